#include "pipeline/day0_steps.h"

#include "actions/verify.h"
#include "base/file_util.h"
#include "base/resident_pages.h"
#include "base/units.h"
#include "checkpoint/arch_check.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sharding.h"
#include "checkpoint/shrink.h"
#include "exec/backend.h"
#include "exec/checkpoint_weights.h"
#include "exec/recurrent_state.h"
#include "history/recording.h"
#include "model/config_reader.h"
#include "pipeline/validation_state.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>

namespace day0::pipeline {

namespace fs = std::filesystem;
namespace ck = day0::checkpoint;

namespace {

std::mutex g_runnerMutex;
MultiRankRunner g_runner = inProcessMultiRankRunner();

std::string countsLine(const ck::TensorReport& r)
{
    return fmt::format("{} of {} tensors match the architecture ({} missing, {} unexpected, {} "
                       "wrong shape, {} wrong dtype)",
        r.count(ck::TensorStatus::Ok), r.rows.size(), r.count(ck::TensorStatus::Missing),
        r.count(ck::TensorStatus::Unexpected), r.count(ck::TensorStatus::WrongShape),
        r.count(ck::TensorStatus::WrongDtype));
}

/// Architecture check of an opened checkpoint; CheckFailed lists the first bad tensors.
Result<ck::TensorReport> checkArchitecture(const ck::Checkpoint& ckpt, StepReport& report)
{
    if (ckpt.hasErrors()) {
        DAY0_TRY(ckpt.firstError());
    }
    auto arch = ck::checkAgainstConfig(ckpt);
    if (!arch) {
        return arch.error();
    }
    if (!arch->has_value()) {
        return Error::badInput(fmt::format(
            "{}: no config.json: the architecture cannot be checked", displayPath(ckpt.root())));
    }
    auto tensors = std::move(**arch);
    if (!tensors.ok()) {
        std::string first;
        int shown = 0;
        for (const auto& row : tensors.rows) {
            if (row.status != ck::TensorStatus::Ok && shown++ < 10) {
                report.details.push_back(row.message);
                first = first.empty() ? row.message : first;
            }
        }
        return Error::checkFailed(fmt::format("{}; first: {}", countsLine(tensors), first));
    }
    return tensors;
}

/// With ValidateOptions::stream, what the steps could not stream, refused by name before any
/// step runs: a backend, and a model or precision runStreamed refuses (the model as given: a
/// shrunk checkpoint keeps its architecture).
Result<void> refuseUnstreamed(const ValidateOptions& options, const exec::PrecisionPlan& target)
{
    if (!options.stream) {
        if (options.streamOptions.memoryBudget > 0) {
            return Error::badInput(fmt::format("{} bounds a streamed validation; add --stream",
                options.budgetPerRank ? "--memory-budget-per-rank" : "--memory-budget"));
        }
        return success();
    }
    if (options.backend != nullptr) {
        return Error::badInput(fmt::format("--stream: --backend {}: streamed runs compute on the "
                                           "CPU reference (validate without --stream to run a "
                                           "backend)",
            options.backend->name()));
    }
    const fs::path given(options.model);
    auto spec = exec::holdsWeights(given) ? exec::loadCheckpointModel(given)
                                          : model::loadModel(options.model);
    if (!spec) {
        return success(); // the weights or convert step reports what is wrong with it
    }
    exec::RunOptions o;
    o.precision = target;
    return exec::checkStreamable(*spec, o);
}

} // namespace

void setMultiRankRunner(MultiRankRunner runner)
{
    std::lock_guard lock(g_runnerMutex);
    g_runner = std::move(runner);
}

MultiRankRunner multiRankRunner()
{
    std::lock_guard lock(g_runnerMutex);
    return g_runner;
}

fs::path defaultWorkDir(const std::string& model)
{
    fs::path base;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && fs::path(xdg).is_absolute()) {
        base = xdg;
    } else if (const char* home = std::getenv("HOME"); home && *home) {
        base = fs::path(home) / ".cache";
    } else {
        base = fs::temp_directory_path();
    }
    std::string name = fs::path(model).filename().string();
    if (name.empty() || name == "config.json") {
        name = fs::path(model).parent_path().filename().string();
    }
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
            c = '_';
        }
    }
    return base / "day0" / "validate" / (name.empty() ? std::string("model") : name);
}

const std::vector<std::string>& day0StepIds()
{
    static const std::vector<std::string> ids { "weights", "convert", "shard", "smoke",
        "multi_rank", "precision", "performance", "report" };
    return ids;
}

namespace detail {

std::int64_t peakResidentBytes()
{
    rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return std::int64_t(usage.ru_maxrss) * 1024; // Linux reports KiB
}

std::int64_t residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0;
    std::int64_t resident = 0;
    if (!(statm >> size >> resident)) {
        return 0;
    }
    return resident * std::int64_t(sysconf(_SC_PAGESIZE));
}

Result<exec::RunResult> runModel(
    ValidationState& s, const exec::RunOptions& o, Progress& progress, std::stop_token stop)
{
    if (!s.options.stream) {
        if (!s.engine || s.engine->isF64() != o.precision.isF64()) {
            return Error::internal("validate: no engine loaded in the run's arithmetic");
        }
        return s.engine->run(o, progress, stop);
    }
    auto run = exec::runStreamed(s.runnable, *s.spec, o, s.options.streamOptions, progress, stop);
    if (!run) {
        return run.error();
    }
    addStreamStats(s, run->stats);
    return std::move(run->run);
}

void addStreamStats(ValidationState& s, const exec::StreamStats& stats)
{
    exec::StreamStats& sum = s.stream ? *s.stream : s.stream.emplace();
    sum.bytesRead += stats.bytesRead;
    sum.readSeconds += stats.readSeconds;
    sum.phasesLoaded += stats.phasesLoaded;
    sum.phasesReadAhead += stats.phasesReadAhead;
    sum.readAheadSeconds += stats.readAheadSeconds;
    sum.largestPairBytes = std::max(sum.largestPairBytes, stats.largestPairBytes);
    if (stats.largestPhaseBytes >= sum.largestPhaseBytes) {
        sum.largestPhase = stats.largestPhase;
        sum.largestPhaseBytes = stats.largestPhaseBytes;
    }
    sum.residentPeakBytes = std::max(sum.residentPeakBytes, stats.residentPeakBytes);
    sum.memoryBudget = stats.memoryBudget;
}

Step weightsStep(ValidationState& s)
{
    return { "weights", "Weight acquisition and integrity", {},
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            const fs::path given(s.options.model);
            if (exec::holdsWeights(given)) {
                s.source = given;
            } else {
                // Only a config (a file, a folder without weights, or a bundled name): rehearse
                // on a small random checkpoint of the same architecture.
                s.source = s.work / "shrunk";
                ck::ShrinkOptions o;
                o.seed = s.options.seed;
                o.replace = true;
                auto shrunk = ck::shrinkModel(s.options.model, s.source, o, ctx.progress, ctx.stop);
                if (!shrunk) {
                    return shrunk.error();
                }
                s.shrunk = true;
                const auto note = fmt::format("no weights given: shrank a homologous {} checkpoint "
                                              "of '{}' ({} parameters, {}) into {}",
                    shrunk->modelType, s.options.model, shrunk->parameters,
                    formatBytes(Bytes(std::int64_t(shrunk->bytes))), displayPath(s.source));
                ctx.log(note);
                report.details.push_back(note);
                report.metrics["shrunk_parameters"] = double(shrunk->parameters);
            }
            // `day0 verify`'s action; the architecture is the next step's.
            actions::VerifyOptions verify;
            verify.checkArchitecture = false;
            auto verified = actions::verifyCheckpoint(s.source, verify, ctx.progress, ctx.stop);
            if (!verified) {
                return verified.error();
            }
            const auto& ckpt = verified->checkpoint;
            if (ckpt->hasErrors()) {
                return Error::checkFailed(ckpt->firstError().error().message);
            }
            report.metrics["files"] = double(ckpt->files().size());
            report.metrics["tensors"] = double(ckpt->tensors().size());
            report.metrics["tensor_bytes"] = double(ckpt->totalTensorBytes());
            if (!verified->integrity) {
                return Error::checkFailed(fmt::format(
                    "{}: no {} or {}: the weights' hashes cannot be checked (day0 verify "
                    "--write-manifest creates one)",
                    displayPath(ckpt->root()), ck::kManifestName, ck::kSha256SumsName));
            }
            const auto& integrity = verified->integrity;
            report.metrics["bytes_hashed"] = double(integrity->bytesHashed);
            report.metrics["hash_seconds"] = integrity->seconds;
            for (const auto& f : integrity->files) {
                if (f.status != ck::FileStatus::Ok) {
                    report.details.push_back(f.message);
                }
            }
            if (!integrity->ok()) {
                return Error::checkFailed(fmt::format("{}: {} of {} files fail their SHA-256 check",
                    integrity->manifest, integrity->failures(), integrity->files.size()));
            }
            report.summary = fmt::format("{}{} files, {} tensors, {}; {} of {} files match {}",
                s.shrunk ? "shrunk checkpoint: " : "", ckpt->files().size(), ckpt->tensors().size(),
                formatBytes(Bytes(std::int64_t(ckpt->totalTensorBytes()))), integrity->files.size(),
                integrity->files.size(), integrity->manifest);
            return report;
        } };
}

Step convertStep(ValidationState& s)
{
    return { "convert", "Architecture check and format conversion", { "weights" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            auto ckpt = ck::Checkpoint::open(s.source);
            if (!ckpt) {
                return ckpt.error();
            }
            auto tensors = checkArchitecture(*ckpt, report);
            if (!tensors) {
                return tensors.error();
            }
            std::size_t fp8 = 0;
            for (const auto& t : ckpt->tensors()) {
                fp8 += t.dtype && (*t.dtype == DType::F8E4M3 || *t.dtype == DType::F8E5M2);
            }
            report.metrics["tensors_checked"] = double(tensors->rows.size());
            report.metrics["fp8_tensors"] = double(fp8);
            std::string conversion = "no block-FP8 weights: used as stored";
            s.runnable = s.source;
            if (fp8 > 0) {
                ck::ConvertOptions o;
                o.dtype = DType::BF16;
                o.onlyFp8 = true;
                o.replace = true;
                const auto out = s.work / "dequantized";
                auto converted = ck::convertCheckpoint(s.source, out, o, ctx.progress, ctx.stop);
                if (!converted) {
                    return converted.error();
                }
                auto again = ck::Checkpoint::open(out);
                if (!again) {
                    return again.error();
                }
                auto check = checkArchitecture(*again, report);
                if (!check) {
                    return check.error().withContext("after dequantisation");
                }
                s.runnable = out;
                report.metrics["dequantized"] = double(converted->dequantized);
                conversion = fmt::format("{} block-FP8 weights dequantised to BF16 into {}",
                    converted->dequantized, displayPath(out));
                ctx.log(conversion);
            }
            auto spec = exec::loadCheckpointModel(s.runnable);
            if (!spec) {
                return spec.error();
            }
            const auto missing = exec::unsupportedFeatures(*spec);
            if (!missing.empty()) {
                report.details.insert(report.details.end(), missing.begin(), missing.end());
                return Error::checkFailed(fmt::format(
                    "the engine cannot run {}: {}", spec->name, fmt::join(missing, "; ")));
            }
            s.spec = std::move(*spec);
            s.modelName = s.spec->name;
            if (s.shrunk) {
                s.modelName = s.options.model;
            } else if (auto original = exec::loadCheckpointModel(s.source)) {
                s.modelName = original->name;
            }
            report.summary = fmt::format("{} ({}): {}; {}", s.modelName,
                exec::modelFingerprint(*s.spec), countsLine(*tensors), conversion);
            return report;
        } };
}

Step shardStep(ValidationState& s)
{
    return { "shard", "Sharding for the plan and reassembly check", { "convert" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            auto layout = ck::parseShardLayout(s.options.plan);
            if (!layout) {
                return layout.error().withContext("--plan");
            }
            s.sharded = s.work / "sharded";
            ck::HashOptions hash;
            auto summary = ck::shardCheckpoint(
                s.runnable, s.sharded, *layout, hash, true, ctx.progress, ctx.stop);
            if (!summary) {
                return summary.error();
            }
            auto plan = ck::readShardPlan(s.sharded);
            if (!plan) {
                return plan.error();
            }
            auto whole = ck::Checkpoint::open(s.runnable);
            if (!whole) {
                return whole.error();
            }
            // Every tensor rebuilt from the ranks' pieces must equal the original bit for bit.
            std::size_t checked = 0;
            std::size_t bad = 0;
            ctx.progress.setTotal(std::int64_t(whole->tensors().size()));
            ctx.progress.setDone(0);
            for (const auto& t : whole->tensors()) {
                if (ctx.stop.stop_requested()) {
                    return Error::cancelled();
                }
                auto original = whole->data(t);
                if (!original) {
                    return original.error();
                }
                auto rebuilt = ck::reassembleTensor(s.sharded, *plan, t.name);
                ++checked;
                ctx.progress.advance();
                if (!rebuilt) {
                    ++bad;
                    report.details.push_back(rebuilt.error().message);
                    releaseResidentPages(*original);
                    continue;
                }
                if (rebuilt->size() != original->size()
                    || !std::equal(rebuilt->begin(), rebuilt->end(), original->begin())) {
                    ++bad;
                    report.details.push_back(
                        fmt::format("tensor '{}': reassembled from the ranks it differs from {}",
                            t.name, displayPath(s.runnable)));
                }
                // Compared: its mapped pages leave the process (a tensor at a time resident).
                releaseResidentPages(*original);
            }
            report.metrics["ranks"] = summary->ranks;
            report.metrics["bytes_written"] = double(summary->bytes);
            report.metrics["tensors_reassembled"] = double(checked);
            report.metrics["reassembly_mismatches"] = double(bad);
            if (bad > 0) {
                return Error::checkFailed(fmt::format(
                    "{} of {} tensors do not reassemble bit-exactly from the {} ranks of {}", bad,
                    checked, summary->ranks, s.options.plan));
            }
            report.summary = fmt::format("{} ranks for {} ({} written); all {} tensors reassemble "
                                         "bit-exactly",
                summary->ranks, s.options.plan, formatBytes(Bytes(std::int64_t(summary->bytes))),
                checked);
            return report;
        } };
}

namespace {

/// The logits of a run, checked for NaN/Inf.
Result<std::vector<double>> finiteLogits(const exec::RunResult& run, const std::string& label)
{
    const auto* logits = run.dump.tensor("lm_head");
    if (!logits) {
        return Error::internal(fmt::format("{}: the run kept no logits (lm_head)", label));
    }
    auto values = logits->toDoubles();
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!std::isfinite(values[i])) {
            return Error::checkFailed(fmt::format("{}: logit {} of lm_head is {} (shape {})", label,
                i, values[i], numerics::shapeString(logits->shape())));
        }
    }
    return values;
}

} // namespace

Step smokeStep(ValidationState& s)
{
    return { "smoke", "Single-rank smoke test", { "convert" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            auto plan = exec::parsePrecisionPlan(s.options.precision);
            if (!plan) {
                return plan.error().withContext("--precision");
            }
            if (!s.options.stateDtype.empty()) {
                auto state = exec::parseStateDtype(s.options.stateDtype);
                if (!state) {
                    return state.error();
                }
                plan->stateMode = *state;
            }
            s.target = *plan;
            if (s.options.stream) {
                // No engine: every run streams the weights a layer at a time.
                s.residentBeforeEngine = residentBytes();
            } else {
                auto weights = exec::openCheckpointWeights(s.runnable);
                if (!weights) {
                    return weights.error();
                }
                s.weights = std::move(*weights);
                s.residentBeforeEngine = residentBytes();
                auto engine = exec::Engine::create(
                    *s.spec, *s.weights, plan->isF64(), ctx.progress, ctx.stop);
                if (!engine) {
                    return engine.error();
                }
                s.engine.emplace(std::move(*engine));
            }
            const std::int64_t vocab = std::max<std::int64_t>(s.spec->vocabSize, 1);
            s.promptIds = s.options.promptIds;
            if (s.promptIds.empty()) {
                for (std::int64_t i = 1; i <= 8; ++i) {
                    s.promptIds.push_back(i % vocab);
                }
            }
            exec::RunOptions o;
            o.precision = *plan;
            o.promptIds = s.promptIds;
            o.newTokens = s.options.tokens;
            o.capture.filters = { "lm_head" };
            std::optional<exec::RunResult> first;
            for (int attempt = 0; attempt < 2; ++attempt) {
                auto run = runModel(s, o, ctx.progress, ctx.stop);
                if (!run) {
                    return run.error();
                }
                if (!first) {
                    first = std::move(*run);
                    continue;
                }
                auto a = finiteLogits(*first, "first run");
                if (!a) {
                    return a.error();
                }
                auto b = finiteLogits(*run, "second run");
                if (!b) {
                    return b.error();
                }
                if (first->generated != run->generated) {
                    return Error::checkFailed(
                        fmt::format("not deterministic: two runs generated {} and {}",
                            fmt::join(first->generated, " "), fmt::join(run->generated, " ")));
                }
                if (*a != *b) {
                    std::size_t i = 0;
                    while (i < a->size() && (*a)[i] == (*b)[i]) {
                        ++i;
                    }
                    return Error::checkFailed(fmt::format(
                        "not deterministic: logit {} differs between two runs ({} vs {})", i,
                        (*a)[i], (*b)[i]));
                }
                report.metrics["logits_checked"] = double(a->size());
            }
            report.metrics["prompt_tokens"] = double(s.promptIds.size());
            report.metrics["generated_tokens"] = double(first->generated.size());
            report.metrics["prefill_s"] = first->prefillSeconds;
            report.metrics["decode_s"] = first->decodeSeconds;
            report.summary = fmt::format("{} on {} prompt tokens generated {} (twice, identical; "
                                         "no NaN/Inf in the logits)",
                plan->describe(), s.promptIds.size(), fmt::join(first->generated, " "));
            s.smoke = std::move(*first);
            return report;
        } };
}

} // namespace detail

Result<Validation> runValidation(const ValidateOptions& options, const FigureRenderer& renderer,
    Progress& progress, std::stop_token stop, const PipelineObserver& observer,
    Progress* stepProgress)
{
    if (options.model.empty()) {
        return Error::badInput("validate: no model or checkpoint given");
    }
    if (options.tokens < 1) {
        return Error::badInput(fmt::format("--tokens {}: must be at least 1", options.tokens));
    }
    if (options.serve) {
        if (options.serveRequests < 1 || options.serveConcurrency.empty()) {
            return Error::badInput("--serve-requests must be at least 1 and --serve-concurrency "
                                   "must name a level");
        }
        for (const int c : options.serveConcurrency) {
            if (c < 1) {
                return Error::badInput(
                    fmt::format("--serve-concurrency {}: must be at least 1", c));
            }
        }
    }
    if (options.evalSequences < 1 || options.evalLength < 2) {
        return Error::badInput(fmt::format("the end-to-end corpus needs a sequence of at least 2 "
                                           "tokens, got {} of {}",
            options.evalSequences, options.evalLength));
    }
    auto target = exec::parsePrecisionPlan(options.precision);
    if (!target) {
        return target.error().withContext("--precision");
    }
    if (!options.stateDtype.empty()) {
        DAY0_TRY(exec::parseStateDtype(options.stateDtype));
    }
    DAY0_TRY(ck::parseShardLayout(options.plan));
    DAY0_TRY(refuseUnstreamed(options, *target));
    detail::ValidationState s;
    s.options = options;
    s.renderer = renderer;
    s.work = options.work.empty() ? defaultWorkDir(options.model) : options.work;
    std::error_code ec;
    fs::create_directories(s.work, ec);
    if (ec) {
        return Error::badInput(fmt::format(
            "{}: cannot create the work folder: {}", displayPath(s.work), ec.message()));
    }
    std::vector<Step> steps { detail::weightsStep(s), detail::convertStep(s), detail::shardStep(s),
        detail::smokeStep(s), detail::multiRankStep(s), detail::precisionStep(s),
        detail::performanceStep(s) };
    if (options.serve) {
        steps.push_back(detail::servingStep(s));
    }
    steps.push_back(detail::reportStep(s));
    PipelineObserver wrapped;
    wrapped.stepStarted = observer.stepStarted;
    wrapped.stepFinished = [&](const StepRecord& record) {
        s.finished.push_back(record);
        if (observer.stepFinished) {
            observer.stepFinished(record);
        }
    };
    Validation v;
    v.options = options;
    v.result = runPipeline(fmt::format("day0 validate {}", options.model), steps, progress, stop,
        wrapped, stepProgress);
    v.header.model = s.modelName.empty() ? options.model : s.modelName;
    v.header.plan = options.plan;
    v.header.precision = options.precision;
    v.header.backend = options.backend
        ? fmt::format("{} ({})", options.backend->name(), options.backend->device())
        : std::string("day0-cpu");
    v.header.created = history::formatIso(history::now());
    v.header.softwareVersion = history::recordingOptions().softwareVersion;
    v.figures = std::move(s.figures);
    v.modelName = v.header.model;
    v.fingerprint = s.spec ? exec::modelFingerprint(*s.spec) : std::string();
    v.layers = std::move(s.layers);
    v.memory = std::move(s.memory);
    v.servingBench = std::move(s.servingBench);
    return v;
}

} // namespace day0::pipeline
