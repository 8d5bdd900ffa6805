#include "actions/records.h"

#include "base/dtype.h"
#include "base/file_util.h"
#include "base/sha256.h"
#include "exec/engine.h"
#include "numerics/comparison_grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace day0::actions {

namespace {

double verdictCode(numerics::VerdictStatus status)
{
    switch (status) {
    case numerics::VerdictStatus::Pass:
        return 0;
    case numerics::VerdictStatus::Warn:
        return 1;
    case numerics::VerdictStatus::Fail:
        return 2;
    case numerics::VerdictStatus::NotJudged:
        break;
    }
    return std::nan("");
}

std::string joinIds(const std::vector<std::int64_t>& ids)
{
    return fmt::format("{}", fmt::join(ids, ","));
}

void setCheckpointTool(history::RunRecord& r, std::string_view tool, const std::string& source,
    const std::string& out, double seconds)
{
    r.info.modelName = std::filesystem::path(source).filename().string();
    if (r.info.modelName.empty()) {
        r.info.modelName = source;
    }
    r.info.duration = Seconds(seconds);
    r.setProperty("tool", std::string(tool));
    r.setProperty("source", source);
    r.setProperty("out", out);
    if (auto artifact = history::makeArtifact("checkpoint", out)) {
        r.addArtifact(std::move(*artifact));
    }
}

} // namespace

history::LayerMetrics comparisonLayerMetrics(const numerics::DumpComparison& comparison)
{
    history::LayerMetrics layers;
    for (const auto& row : comparison.rows) {
        // The precision grid's metrics (rel_l2, max_rel, cosine_distance, floor_ratio,
        // own_rel_l2, max_abs, snr_db), so that the Runs panel can plot whatever the grid
        // showed; an infinite SNR (no error at all) says nothing a rel_l2 of 0 does not.
        for (const numerics::GridMetric metric : numerics::gridMetrics()) {
            const auto value = numerics::gridMetricValue(row, metric);
            if (value && !(metric == numerics::GridMetric::SnrDb && std::isinf(*value))) {
                layers.add(row.name, std::string(numerics::gridMetricName(metric)), *value);
            }
        }
        if (row.metrics) {
            layers.add(row.name, "cosine", row.metrics->cosine);
        }
        if (row.verdict.status != numerics::VerdictStatus::NotJudged) {
            layers.add(row.name, "verdict", verdictCode(row.verdict.status));
        }
    }
    return layers;
}

void addComparison(history::RunRecord& record, const numerics::DumpComparison& c)
{
    record.addMetric("compared_captures", double(c.rows.size()));
    record.addMetric("verdict_pass", c.passCount);
    record.addMetric("verdict_warn", c.warnCount);
    record.addMetric("verdict_fail", c.failCount);
    record.addMetric("verdict_not_judged", c.notJudgedCount);
    record.setProperty("tolerance_table", c.table);
    record.setProperty("divergence_basis", c.divergenceBasis);
    record.setProperty("verdict", c.status());
    for (const auto& row : c.rows) {
        if (row.logits) {
            record.addMetric("logits_kl_mean", row.logits->klMean, "nat");
            record.addMetric("logits_top1_agreement", row.logits->top1Agreement);
            record.addMetric("logits_top5_overlap", row.logits->top5Overlap);
            break;
        }
    }
    double worst = -1.0;
    std::string worstAnchor;
    for (const auto& row : c.rows) {
        if (row.metrics && row.metrics->relL2 > worst) {
            worst = row.metrics->relL2;
            worstAnchor = row.name;
        }
    }
    if (worst >= 0.0) {
        record.addMetric("max_rel_l2", worst);
        record.setProperty("max_rel_l2_anchor", worstAnchor);
    }
    if (c.firstDivergence) {
        const auto& row = c.rows[*c.firstDivergence];
        record.setProperty("first_divergence", row.name);
        record.addMetric("first_divergence_layer", row.layer);
        record.addEvent(LogLevel::Warning,
            fmt::format("first divergence ({} error): {}: {}", c.divergenceBasis, row.name,
                row.verdict.reason));
    }
    for (const auto& w : c.warnings) {
        record.addEvent(LogLevel::Warning, w);
    }
    record.layers = comparisonLayerMetrics(c);
    if (c.failCount > 0) {
        record.info.status = history::RunStatus::Failed;
        record.info.message
            = fmt::format("{} of {} captures failed their tolerance", c.failCount, c.rows.size());
    } else {
        record.info.message
            = fmt::format("{} captures within tolerance ({} warn)", c.passCount, c.warnCount);
    }
}

history::RunRecord precisionRunRecord(const model::ModelSpec& spec, const std::string& checkpoint,
    const exec::PrecisionRunOptions& options, const exec::PrecisionRunResult& result,
    double seconds)
{
    history::RunRecord r(history::RunKind::Run);
    const auto& t = result.target;
    r.info.modelName = spec.name;
    r.info.modelFingerprint = exec::modelFingerprint(spec);
    r.info.precision = options.target.describe();
    r.info.backend = t.dump.info.backend;
    r.info.duration = Seconds(seconds);
    r.setProperty("checkpoint", checkpoint);
    r.setProperty("prompt_ids", joinIds(options.promptIds));
    r.setProperty("generated", joinIds(t.generated));
    if (result.reference) {
        r.setProperty("reference", result.reference->dump.info.precision);
    }
    r.addMetric("prompt_tokens", double(options.promptIds.size()));
    r.addMetric("new_tokens", double(t.generated.size()));
    r.addMetric("prefill_s", t.prefillSeconds, "s");
    r.addMetric("decode_s", t.decodeSeconds, "s");
    const double decoded = t.generated.size() > 1 ? double(t.generated.size() - 1) : 0.0;
    r.addMetric("tokens_per_s", t.decodeSeconds > 0 ? decoded / t.decodeSeconds : 0.0, "tok/s");
    r.addMetric("captures", double(t.dump.captures().size()));
    if (!t.dispatch.ops.empty()) {
        // A run on a backend plugin: its device and how many operator calls fell back.
        r.setProperty("backend_device", t.dispatch.device);
        r.addMetric("backend_native_calls", double(t.dispatch.nativeCalls()));
        r.addMetric("backend_fallback_calls", double(t.dispatch.fallbackCalls()));
    }
    if (result.comparison) {
        addComparison(r, *result.comparison);
    } else {
        r.info.message = fmt::format("generated {} tokens", t.generated.size());
    }
    if (result.fp32LegComparison) {
        // The target's backend in fp32: a structural fault fails here even where the target's
        // own precision hides it.
        const auto& leg = *result.fp32LegComparison;
        r.setProperty("fp32_leg", leg.status());
        r.addMetric("fp32_leg_failed", double(leg.failCount));
        r.info.message += "; fp32 leg: " + exec::fp32LegSummary(leg);
        if (leg.failCount > 0) {
            r.info.status = history::RunStatus::Failed;
        }
    }
    return r;
}

history::RunRecord parallelRunRecord(const model::ModelSpec& spec, const std::string& checkpoint,
    const std::string& plan, const std::string& ranksMode, const std::string& communicator,
    const parallel::ParallelRunResult& result, const std::vector<parallel::CommKindRow>& table,
    double seconds)
{
    history::RunRecord r(history::RunKind::Run);
    r.info.modelName = spec.name;
    r.info.modelFingerprint = exec::modelFingerprint(spec);
    r.info.plan = plan;
    r.info.precision = "fp32";
    r.info.backend
        = result.dispatch.backend.empty() ? std::string("day0-cpu") : result.dispatch.backend;
    r.info.duration = Seconds(seconds);
    r.setProperty("checkpoint", checkpoint);
    r.setProperty("ranks", ranksMode);
    r.setProperty("communicator", communicator);
    for (std::size_t i = 0; i < result.sequences.size(); ++i) {
        const auto& s = result.sequences[i];
        r.setProperty(fmt::format("sequence{}.prompt_ids", i), joinIds(s.prompt));
        r.setProperty(fmt::format("sequence{}.generated", i), joinIds(s.generated));
    }
    r.addMetric("world_size", double(result.ranks.size()));
    r.addMetric("forward_s", result.seconds, "s");
    for (const auto& rank : result.ranks) {
        r.addMetric(fmt::format("rank{}.weight_bytes", rank.rank), double(rank.weightBytes), "B");
        r.addMetric(fmt::format("rank{}.seconds", rank.rank), rank.seconds, "s");
    }
    for (const auto& row : table) {
        r.addMetric(fmt::format("comm.{}.calls", row.kind), double(row.calls));
        r.addMetric(fmt::format("comm.{}.bytes", row.kind), double(row.bytes), "B");
        r.addMetric(fmt::format("comm.{}.measured_s", row.kind), row.measuredSeconds, "s");
        r.addMetric(fmt::format("comm.{}.model_s", row.kind), row.predictedSeconds, "s");
    }
    if (result.machine.measured) {
        r.addMetric("machine.latency_s", result.machine.latency, "s");
    }
    // "4 ranks (mpi, nccl communicator)"; a communicator named like the ranks mode goes unsaid.
    const std::string over
        = communicator == ranksMode ? "" : fmt::format(", {} communicator", communicator);
    r.info.message = fmt::format("{} ranks ({}{}), {} sequence(s)", result.ranks.size(), ranksMode,
        over, result.sequences.size());
    return r;
}

history::RunRecord compareRunRecord(const numerics::DumpComparison& comparison,
    const std::string& referencePath, const std::string& targetPath)
{
    history::RunRecord r(history::RunKind::Compare);
    r.info.modelName
        = comparison.target.model.empty() ? comparison.reference.model : comparison.target.model;
    r.info.modelFingerprint = comparison.target.fingerprint;
    r.info.precision = comparison.target.precision;
    r.info.backend = comparison.target.backend;
    r.setProperty("reference", referencePath);
    r.setProperty("target", targetPath);
    r.setProperty("reference_precision", comparison.reference.precision);
    r.setProperty("reference_backend", comparison.reference.backend);
    for (const auto& [kind, path] :
        { std::pair { "dump", referencePath }, { "dump", targetPath } }) {
        if (auto artifact = history::makeArtifact(kind, path)) {
            r.addArtifact(std::move(*artifact));
        }
    }
    addComparison(r, comparison);
    return r;
}

history::RunRecord traceRunRecord(const profile::Trace& trace,
    const std::vector<std::string>& given, std::string_view action, double seconds)
{
    // As absolute paths, so that the same files are the same run from any working folder.
    std::vector<std::string> files;
    for (const auto& f : given) {
        std::error_code ec;
        const auto absolute = std::filesystem::absolute(f, ec);
        files.push_back(ec ? f : absolute.lexically_normal().string());
    }
    history::RunRecord r(history::RunKind::Trace);
    r.info.modelName
        = files.empty() ? std::string() : std::filesystem::path(files.front()).filename().string();
    r.info.duration = Seconds(seconds);
    r.setProperty("action", std::string(action));
    r.setProperty("files", fmt::format("{}", fmt::join(files, ",")));
    const auto c = trace.counts();
    r.addMetric("slices", double(c.slices));
    r.addMetric("flows", double(c.flows));
    r.addMetric("instants", double(c.instants));
    r.addMetric("counters", double(c.counters));
    r.addMetric("tracks", double(c.tracks));
    r.addMetric("ranks", double(trace.ranks().size()));
    for (int i = 0; i < profile::kCategoryCount; ++i) {
        if (c.byCategory[i] > 0) {
            r.addMetric(fmt::format("slices_{}", profile::categoryName(profile::Category(i))),
                double(c.byCategory[i]));
        }
    }
    const auto [t0, t1] = trace.timeRange();
    r.addMetric("span_s", double(t1 - t0) * 1e-9, "s");
    for (const auto& s : trace.sources()) {
        if (r.info.backend.empty()) {
            r.info.backend = s.backend.empty() ? s.format : s.backend;
        }
    }
    for (const auto& f : files) {
        if (auto artifact = history::makeArtifact("trace", f)) {
            r.addArtifact(std::move(*artifact));
        }
    }
    for (const auto& w : trace.warnings()) {
        r.addEvent(LogLevel::Warning, w);
    }
    r.info.message = fmt::format("{} slices on {} tracks", c.slices, c.tracks);
    return r;
}

history::RunRecord verifyRunRecord(const std::string& path, const checkpoint::Checkpoint& ckpt,
    const checkpoint::IntegrityReport* integrity, const checkpoint::TensorReport* tensors,
    double seconds)
{
    namespace ck = checkpoint;
    history::RunRecord r(history::RunKind::Verify);
    auto& info = r.info;
    info.duration = Seconds(seconds);
    const auto root = std::filesystem::absolute(ckpt.root()).lexically_normal();
    info.modelName = (root.filename().empty() ? root.parent_path() : root).filename().string();
    if (auto config = readFile(ckpt.root() / "config.json")) {
        info.modelFingerprint = sha256Hex(*config);
    }
    r.setProperty("path", path);
    r.setProperty("format", std::string(ck::checkpointFormatName(ckpt.format())));
    r.addMetric("files", double(ckpt.files().size()));
    r.addMetric("tensors", double(ckpt.tensors().size()));
    r.addMetric("tensor_bytes", double(ckpt.totalTensorBytes()), "B");
    std::string firstFailure;
    if (integrity != nullptr) {
        r.setProperty("manifest", integrity->manifest);
        r.addMetric("integrity_failures", double(integrity->failures()));
        r.addMetric("bytes_hashed", double(integrity->bytesHashed), "B");
        r.addMetric("hash_seconds", integrity->seconds, "s");
        for (const auto& f : integrity->files) {
            if (f.status == ck::FileStatus::Ok) {
                continue;
            }
            const std::string message = f.message.empty()
                ? fmt::format("{}: {}", f.file, ck::fileStatusName(f.status))
                : f.message;
            r.addEvent(LogLevel::Error, message);
            if (firstFailure.empty()) {
                firstFailure = message;
            }
        }
    }
    bool tensorsFailed = false;
    if (tensors != nullptr && tensors->checked) {
        // In the order of the names, as `day0 verify --json` lists them.
        std::vector<std::pair<std::string, std::size_t>> counts;
        for (const auto s :
            { ck::TensorStatus::Ok, ck::TensorStatus::Missing, ck::TensorStatus::Unexpected,
                ck::TensorStatus::WrongShape, ck::TensorStatus::WrongDtype }) {
            std::string name = "tensors_" + std::string(ck::tensorStatusName(s));
            std::replace(name.begin(), name.end(), ' ', '_');
            counts.emplace_back(std::move(name), tensors->count(s));
        }
        std::sort(counts.begin(), counts.end());
        for (const auto& [name, count] : counts) {
            r.addMetric(name, double(count));
        }
        tensorsFailed = !tensors->ok();
        if (firstFailure.empty()) {
            for (const auto& row : tensors->rows) {
                if (row.status != ck::TensorStatus::Ok && !row.message.empty()) {
                    firstFailure = row.message;
                    break;
                }
            }
        }
    }
    constexpr std::size_t kEvents = 200;
    std::size_t events = 0;
    for (const auto& p : ckpt.problems()) {
        if (events++ < kEvents) {
            r.addEvent(p.warning ? LogLevel::Warning : LogLevel::Error, p.error.message);
        }
    }
    const bool checksFailed = (integrity != nullptr && !integrity->ok()) || tensorsFailed;
    if (ckpt.hasErrors()) {
        info.status = history::RunStatus::Error;
        info.message = "structure broken";
    } else if (checksFailed) {
        info.status = history::RunStatus::Failed;
        info.message = firstFailure.empty() ? std::string("checks failed")
                                            : fmt::format("checks failed: {}", firstFailure);
    } else {
        info.status = history::RunStatus::Ok;
        info.message = "ok";
    }
    return r;
}

history::RunRecord convertRunRecord(const std::string& source, const std::string& out,
    const checkpoint::ConvertOptions& options, const checkpoint::ConvertSummary& s, double seconds)
{
    history::RunRecord r(history::RunKind::Verify);
    setCheckpointTool(r, "convert", source, out, seconds);
    r.info.precision = std::string(dtypeName(options.dtype));
    r.addMetric("tensors_in", double(s.tensorsIn));
    r.addMetric("tensors_out", double(s.tensorsOut));
    r.addMetric("dequantized", double(s.dequantized));
    r.addMetric("quantized", double(s.quantized));
    r.addMetric("converted", double(s.converted));
    r.addMetric("copied", double(s.copied));
    r.addMetric("bytes_in", double(s.bytesIn), "B");
    r.addMetric("bytes_out", double(s.bytesOut), "B");
    r.info.message = fmt::format(
        "{} tensors to {} ({} dequantized)", s.tensorsOut, dtypeName(options.dtype), s.dequantized);
    return r;
}

history::RunRecord shardRunRecord(const std::string& source, const std::string& out,
    const std::string& plan, const checkpoint::ShardSummary& s, double seconds)
{
    history::RunRecord r(history::RunKind::Verify);
    setCheckpointTool(r, "shard", source, out, seconds);
    r.info.plan = plan;
    r.addMetric("ranks", double(s.ranks));
    r.addMetric("tensors", double(s.tensors));
    r.addMetric("bytes", double(s.bytes), "B");
    r.addMetric("files", double(s.files.size()));
    r.info.message = fmt::format("{} tensors over {} ranks", s.tensors, s.ranks);
    return r;
}

history::RunRecord shrinkRunRecord(const std::string& model, const std::string& out,
    const checkpoint::ShrinkOptions& options, const checkpoint::ShrinkSummary& s, double seconds)
{
    history::RunRecord r(history::RunKind::Verify);
    setCheckpointTool(r, "shrink", model, out, seconds);
    r.info.modelName = model;
    r.setProperty("model_type", s.modelType);
    r.setProperty("seed", std::to_string(options.seed));
    r.addMetric("tensors", double(s.tensors));
    r.addMetric("parameters", double(s.parameters));
    r.addMetric("bytes", double(s.bytes), "B");
    r.info.message
        = fmt::format("{} parameters of {} in {} tensors", s.parameters, s.modelType, s.tensors);
    return r;
}

} // namespace day0::actions
