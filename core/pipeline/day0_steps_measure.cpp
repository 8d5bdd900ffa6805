// Steps 5-8 of the Day-0 playbook (multi-rank, precision, performance, report), the report files
// and the run record of a validation.
#include "actions/eval.h"
#include "actions/records.h"
#include "actions/run.h"
#include "actions/run_plan.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/sharding.h"
#include "exec/emulated_ops.h"
#include "exec/precision_run.h"
#include "hardware/cluster.h"
#include "model/layer_graph.h"
#include "numerics/tolerance.h"
#include "parallel/run.h"
#include "pipeline/day0_steps.h"
#include "pipeline/validation_state.h"
#include "plan/memory_estimator.h"
#include "plan/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::pipeline {

namespace fs = std::filesystem;

namespace detail {

namespace {

double relativeL2(const std::vector<double>& reference, const std::vector<double>& target)
{
    double diff = 0.0;
    double norm = 0.0;
    for (std::size_t i = 0; i < reference.size() && i < target.size(); ++i) {
        diff += (target[i] - reference[i]) * (target[i] - reference[i]);
        norm += reference[i] * reference[i];
    }
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// Error against depth of the decoder layers' outputs: accumulated and own relative L2, with the
/// tolerance limit and the noise floor, as the precision panel plots it.
FigureSpec errorDepthFigure(const numerics::DumpComparison& c)
{
    FigureSpec f;
    f.title
        = fmt::format("Error against depth: {} vs {}", c.target.precision, c.reference.precision);
    f.xLabel = "decoder layer";
    f.yLabel = "relative L2 error";
    f.logY = true;
    FigureSeries accumulated { "accumulated", {}, {}, false };
    FigureSeries own { "own (inject mode)", {}, {}, false };
    FigureSeries limit { "tolerance", {}, {}, true };
    FigureSeries floor { "noise floor", {}, {}, true };
    for (const auto& row : c.rows) {
        if (row.kind != numerics::OpKind::DecoderLayer || row.layer < 0) {
            continue;
        }
        const double x = row.layer;
        if (row.metrics && row.metrics->relL2 > 0) {
            accumulated.x.push_back(x);
            accumulated.y.push_back(row.metrics->relL2);
        }
        if (row.own && row.own->relL2 > 0) {
            own.x.push_back(x);
            own.y.push_back(row.own->relL2);
        }
        if (row.verdict.limit > 0) {
            limit.x.push_back(x);
            limit.y.push_back(row.verdict.limit);
        }
        if (row.verdict.floor > 0) {
            floor.x.push_back(x);
            floor.y.push_back(row.verdict.floor);
        }
    }
    for (auto* series : { &accumulated, &own, &limit, &floor }) {
        if (!series->y.empty()) {
            f.series.push_back(std::move(*series));
        }
    }
    return f;
}

FigureSpec stepTimeFigure(const std::vector<StepRecord>& steps)
{
    FigureSpec f;
    f.kind = FigureSpec::Kind::Bars;
    f.title = "Time per step";
    f.yLabel = "wall time";
    f.yFormat = FigureAxis::Duration;
    FigureSeries bars { "time", {}, {}, false };
    for (const auto& step : steps) {
        f.categories.push_back(step.id);
        bars.y.push_back(step.duration.value);
    }
    f.series.push_back(std::move(bars));
    return f;
}

FigureSpec memoryFigure(const std::vector<history::MemoryEntry>& memory)
{
    FigureSpec f;
    f.kind = FigureSpec::Kind::Bars;
    f.title = "Memory: estimate against measurement (one rank)";
    f.yLabel = "memory";
    f.yFormat = FigureAxis::Bytes;
    f.categories = { "estimated", "measured" };
    for (const auto& e : memory) {
        const bool measured = e.rank == 0 && e.stage == -1 && e.component == "measured_peak_growth";
        if (e.component.rfind("estimated_", 0) == 0) {
            f.series.push_back({ e.component.substr(10), {}, { double(e.bytes.value), 0.0 } });
        } else if (measured) {
            f.series.push_back({ "process growth", {}, { 0.0, double(e.bytes.value) } });
        }
    }
    return f;
}

/// " on cuda" for a target that ran on a backend plugin, with where each operator ran as details
/// and the native and fallback calls as metrics; "" for the CPU reference.
std::string backendDetails(const exec::DispatchReport& d, StepReport& report)
{
    if (d.ops.empty()) {
        return {};
    }
    for (const auto& row : d.ops) {
        report.details.push_back(fmt::format("{} on {}: {} native, {} on day0-cpu{}",
            exec::backendOpName(row.op), d.backend, row.nativeCalls, row.fallbackCalls,
            row.fallbackReason.empty() ? std::string() : " (" + row.fallbackReason + ")"));
    }
    report.metrics["backend_native_calls"] = double(d.nativeCalls());
    report.metrics["backend_fallback_calls"] = double(d.fallbackCalls());
    return fmt::format(" on {}", d.backend);
}

} // namespace

Step multiRankStep(ValidationState& s)
{
    return { "multi_rank", "Multi-rank run equals single-rank", { "shard", "smoke" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            const auto runner = multiRankRunner();
            if (!runner) {
                report.skipped = true;
                report.summary = "sharded execution not available in this build";
                return report;
            }
            MultiRankRequest request;
            request.spec = &*s.spec;
            request.checkpoint = s.runnable;
            request.sharded = s.sharded;
            request.plan = s.options.plan;
            request.promptIds = s.promptIds;
            request.newTokens = s.options.tokens;
            request.stream = s.options.stream;
            request.streamOptions = s.options.streamOptions;
            request.budgetPerRank = s.options.budgetPerRank;
            auto multi = runner(request, ctx.progress, ctx.stop);
            if (!multi) {
                return multi.error();
            }
            // The single-rank run in the precision the ranks computed in, on the same tokens.
            auto plan = exec::parsePrecisionPlan(multi->precision);
            if (!plan) {
                return plan.error().withContext("multi-rank precision");
            }
            exec::RunOptions o;
            o.precision = *plan;
            o.promptIds = s.promptIds;
            o.newTokens = s.options.tokens;
            o.capture.filters = { "lm_head" };
            std::optional<exec::Engine> own;
            Result<exec::RunResult> single = Error::internal("multi-rank: no single-rank run");
            if (s.options.stream || s.engine->isF64() == plan->isF64()) {
                single = runModel(s, o, ctx.progress, ctx.stop); // streamed too, when it is
            } else {
                auto made = exec::Engine::create(
                    *s.spec, *s.weights, plan->isF64(), ctx.progress, ctx.stop);
                if (!made) {
                    return made.error();
                }
                own.emplace(std::move(*made));
                single = own->run(o, ctx.progress, ctx.stop);
            }
            if (!single) {
                return single.error();
            }
            const auto* logits = single->dump.tensor("lm_head");
            if (!logits) {
                return Error::internal("single-rank run: no lm_head logits to compare");
            }
            const auto reference = logits->toDoubles();
            const std::vector<double> sharded(multi->logits.begin(), multi->logits.end());
            report.metrics["ranks"] = multi->ranks;
            report.details.push_back(fmt::format("{} ranks ({}) in {}; single-rank generated {}",
                multi->ranks, multi->how, multi->precision, fmt::join(single->generated, " ")));
            if (sharded.size() != reference.size()) {
                return Error::checkFailed(fmt::format(
                    "multi-rank logits hold {} values, the single-rank run's {} (shape {})",
                    sharded.size(), reference.size(), numerics::shapeString(logits->shape())));
            }
            const double rel = relativeL2(reference, sharded);
            report.metrics["logits_rel_l2"] = rel;
            if (multi->generated != single->generated) {
                return Error::checkFailed(
                    fmt::format("{} generated {}, the single-rank run {}", s.options.plan,
                        fmt::join(multi->generated, " "), fmt::join(single->generated, " ")));
            }
            // Sharded sums reduce in another order; anything beyond fp32 rounding is a bug.
            constexpr double kLimit = 1e-4;
            if (!(rel <= kLimit)) {
                return Error::checkFailed(fmt::format(
                    "logits differ from the single-rank run: rel L2 {:.3g} > {:.0e}", rel, kLimit));
            }
            std::string streamed;
            if (s.options.stream) {
                report.metrics["stream_bytes_read"] = double(multi->streamBytesRead);
                report.metrics["stream_rank_peak_bytes"] = double(multi->streamRankPeakBytes);
                if (multi->streamRankBudget > 0) {
                    report.metrics["stream_rank_budget_bytes"] = double(multi->streamRankBudget);
                }
                streamed = fmt::format("; each rank streamed its rank file, holding at most {}{}",
                    formatBytes(Bytes(multi->streamRankPeakBytes)),
                    multi->streamRankBudget > 0 ? fmt::format(" (each rank within {}: {})",
                        formatBytes(Bytes(std::int64_t(multi->streamRankBudget))),
                        multi->streamBudgetBasis)
                                                : std::string());
            }
            report.summary = fmt::format("{} on {} ranks ({}, {}): same {} tokens, logits rel L2 "
                                         "{:.3g}{}",
                s.options.plan, multi->ranks, multi->how, multi->precision, multi->generated.size(),
                rel, streamed);
            return report;
        } };
}

Step precisionStep(ValidationState& s)
{
    return { "precision", "Precision against the reference", { "smoke" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            auto reference = exec::parsePrecision(s.options.reference);
            if (!reference) {
                return reference.error().withContext("--reference");
            }
            // `day0 run <checkpoint> --reference … --inject`'s action on the runnable checkpoint.
            actions::RunRequest request;
            request.checkpoint = s.runnable.string();
            request.tolerances = s.options.tolerances;
            request.stream = s.options.stream;
            request.streamOptions = s.options.streamOptions;
            auto& o = request.options;
            o.target = *s.target;
            o.reference = *reference;
            // Judge every layer on its own error, not what it inherited, where the engine
            // injects: not into Nemotron-H's backbone nor DeepSeek-V4's hyper-connection
            // streams, whose layers are compared as propagated (the report says so).
            const bool noInject = s.spec
                && (s.spec->family == model::Family::NemotronH
                    || s.spec->family == model::Family::DeepseekV4);
            o.inject = !noInject;
            if (noInject) {
                report.details.push_back(fmt::format("{}: compared without inject mode (each "
                                                     "layer's error includes what it inherited)",
                    s.spec->modelType));
            }
            o.promptIds = s.promptIds;
            o.newTokens = s.options.tokens;
            o.backend = s.options.backend.get();
            // A backend also runs its fp32 leg: a structural fault (a misread config, an epsilon
            // or a RoPE frequency off) can lie below a low-precision target's rounding noise.
            o.fp32Leg = o.backend != nullptr && exec::isEmulated(o.target.base);
            auto ran = actions::runCheckpoint(request, ctx.progress, ctx.stop);
            if (!ran) {
                return ran.error();
            }
            if (ran->stream) {
                addStreamStats(s, *ran->stream);
            }
            const auto* run = &ran->result;
            if (!run->comparison) {
                return Error::internal("precision run: no comparison");
            }
            const auto& c = *run->comparison;
            s.layers = actions::comparisonLayerMetrics(c);
            report.metrics["verdict_pass"] = c.passCount;
            report.metrics["verdict_warn"] = c.warnCount;
            report.metrics["verdict_fail"] = c.failCount;
            report.metrics["captures"] = double(c.rows.size());
            std::string logits;
            for (const auto& row : c.rows) {
                if (row.logits) {
                    report.metrics["logits_kl_mean"] = row.logits->klMean;
                    report.metrics["logits_top1_agreement"] = row.logits->top1Agreement;
                    logits = fmt::format("; logits KL {:.2e}, top-1 {:.1f}%", row.logits->klMean,
                        100.0 * row.logits->top1Agreement);
                }
                if (row.verdict.status == numerics::VerdictStatus::Fail
                    || row.verdict.status == numerics::VerdictStatus::Warn) {
                    report.details.push_back(fmt::format("{}: {}", row.name, row.verdict.reason));
                }
            }
            std::string divergence = "no divergence";
            if (c.firstDivergence) {
                const auto& row = c.rows[*c.firstDivergence];
                divergence
                    = fmt::format("first divergence ({} error): {}", c.divergenceBasis, row.name);
                report.details.insert(
                    report.details.begin(), fmt::format("{}: {}", divergence, row.verdict.reason));
            }
            s.comparison = c;
            const std::string where = backendDetails(run->target.dispatch, report);
            const std::string verdicts = fmt::format(
                "{}{} against {} ({}): {} pass, {} warn, {} fail", o.target.describe(), where,
                s.options.reference, c.table, c.passCount, c.warnCount, c.failCount);
            std::string leg;
            if (const auto& l = run->fp32LegComparison) {
                report.metrics["fp32_leg_fail"] = l->failCount;
                leg = fmt::format(
                    "; its fp32 leg on {}: {}", o.backend->name(), exec::fp32LegSummary(*l));
            }
            if (!exec::precisionRunPassed(*run)) {
                return Error::checkFailed(fmt::format("{}; {}{}", verdicts, divergence, leg));
            }
            // End to end (`day0 eval`'s action): the target against the reference over a short
            // corpus sampled from the reference, judged by the table's end_to_end rule.
            actions::EvalRequest eval;
            eval.stream = s.options.stream;
            eval.streamOptions = s.options.streamOptions;
            eval.checkpoint = s.runnable.string();
            eval.reference = s.options.reference;
            eval.targetPlan = o.target;
            eval.backend = o.backend;
            eval.tolerances = s.options.tolerances;
            eval.corpus.sampleSequences = s.options.evalSequences;
            eval.corpus.sequenceLength = s.options.evalLength;
            eval.corpus.seed = s.options.seed;
            eval.corpus.sampleStart = { s.promptIds.front() };
            auto e2e = actions::evaluate(eval, ctx.progress, ctx.stop);
            if (!e2e) {
                return e2e.error().withContext("end to end");
            }
            const auto& es = e2e->summary;
            report.metrics["eval_kl_mean"] = es.klMean.value;
            report.metrics["eval_kl_p99"] = es.klP99;
            report.metrics["eval_same_top"] = es.sameTop.value;
            report.metrics["eval_ppl_ratio"] = es.pplRatio.value;
            const std::string endToEnd = fmt::format("; end to end over {}×{} sampled tokens: {}",
                s.options.evalSequences, s.options.evalLength, e2e->verdict.reason);
            if (e2e->verdict.status == numerics::VerdictStatus::Fail) {
                return Error::checkFailed(
                    fmt::format("{}; {}{}{}", verdicts, divergence, leg, endToEnd));
            }
            report.summary
                = fmt::format("{}; {}{}{}{}", verdicts, divergence, logits, leg, endToEnd);
            return report;
        } };
}

Step performanceStep(ValidationState& s)
{
    return { "performance", "Performance and memory", { "smoke" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            exec::RunOptions o;
            o.precision = *s.target;
            o.promptIds = s.promptIds;
            o.newTokens = s.options.tokens;
            o.capture.filters = { "lm_head" };
            o.capture.statsOnly = true;
            o.backend = s.target->isF64() ? nullptr : s.options.backend.get();
            auto run = runModel(s, o, ctx.progress, ctx.stop);
            if (!run) {
                return run.error();
            }
            const double decoded = double(run->generated.size()) - 1.0;
            const double tokensPerSecond
                = run->decodeSeconds > 0 && decoded > 0 ? decoded / run->decodeSeconds : 0.0;
            const double prefillRate
                = run->prefillSeconds > 0 ? double(s.promptIds.size()) / run->prefillSeconds : 0.0;
            report.metrics["time_to_first_token_s"] = run->prefillSeconds;
            report.metrics["decode_tokens_per_s"] = tokensPerSecond;
            report.metrics["prefill_tokens_per_s"] = prefillRate;

            // The estimate for this one rank at this sequence length, in the dtypes the CPU
            // engine holds (fp32, or fp64 for an fp64 run), without GPU runtime allowances.
            const auto graph = model::buildLayerGraph(*s.spec);
            const auto summary = plan::summarizeModel(graph);
            plan::ParallelPlan single;
            const DType held = s.target->isF64() ? DType::F64 : DType::F32;
            single.weights = held;
            single.kv = held;
            plan::Workload wl;
            wl.mode = plan::Mode::Infer;
            wl.batch = 1;
            wl.context = int(s.promptIds.size() + std::size_t(s.options.tokens));
            wl.promptLength = int(s.promptIds.size());
            wl.outputLength = int(s.options.tokens);
            wl.prefillChunk = wl.context;
            plan::MemoryOptions mo;
            mo.cudaContext = 0;
            mo.ncclPerGroup = 0;
            mo.fragmentation = 0;
            auto cluster = hardware::parseCluster("h200:1x1");
            if (!cluster) {
                return cluster.error();
            }
            auto estimate = plan::estimateMemory(summary, single, wl, *cluster, mo);
            if (!estimate) {
                return estimate.error();
            }
            const auto& rank = estimate->perRank.front();
            const std::int64_t peak = peakResidentBytes();
            const std::int64_t growth = std::max<std::int64_t>(0, peak - s.residentBeforeEngine);
            s.memory.push_back({ 0, -1, "estimated_weights", rank.weights });
            s.memory.push_back({ 0, -1, "estimated_kv_cache", rank.kvCache });
            s.memory.push_back({ 0, -1, "estimated_activations", rank.activations });
            s.memory.push_back({ 0, -1, "measured_peak_growth", Bytes(growth) });
            s.memory.push_back({ -1, -1, "process_peak_rss", Bytes(peak) });
            const double estimated = double(rank.total.value);
            report.metrics["peak_rss_bytes"] = double(peak);
            report.metrics["peak_growth_bytes"] = double(growth);
            report.metrics["estimated_bytes"] = estimated;
            report.metrics["measured_over_estimate"]
                = estimated > 0 ? double(growth) / estimated : 0.0;
            report.details.push_back(fmt::format(
                "estimate ({} weights and KV cache, batch 1, {} tokens): weights {}, KV cache {}, "
                "activations {}, total {}",
                dtypeName(held), wl.context, formatBytes(rank.weights), formatBytes(rank.kvCache),
                formatBytes(rank.activations), formatBytes(rank.total)));
            report.details.push_back(fmt::format("measured: peak RSS {} (getrusage), {} above what "
                                                 "was resident before the engine loaded (the "
                                                 "engine, its work buffers and the BLAS pools)",
                formatBytes(Bytes(peak)), formatBytes(Bytes(growth))));
            const std::string where = backendDetails(run->dispatch, report);
            if (!where.empty()) {
                report.details.push_back(fmt::format("the target ran{}: the host RSS above does "
                                                     "not include its device memory",
                    where));
            }
            if (!std::isfinite(tokensPerSecond) || (decoded > 0 && tokensPerSecond <= 0)) {
                return Error::checkFailed("decode throughput could not be measured");
            }
            std::string streamed;
            if (const auto& st = s.stream) {
                // The estimate is a whole engine's; a streamed validation held a layer at a time.
                report.metrics["stream_bytes_read"] = double(st->bytesRead);
                report.metrics["stream_largest_layer_bytes"] = double(st->largestPhaseBytes);
                report.metrics["stream_memory_budget"] = double(st->memoryBudget);
                const std::string budget = st->memoryBudget > 0
                    ? fmt::format(" against a budget of {}",
                        formatBytes(Bytes(std::int64_t(st->memoryBudget))))
                    : std::string();
                report.details.push_back(fmt::format("streamed: the smoke, precision and "
                                                     "performance runs read {} of weights a layer "
                                                     "at a time (the largest, {}, needs {}); peak "
                                                     "RSS {}{}",
                    formatBytes(Bytes(std::int64_t(st->bytesRead))), st->largestPhase,
                    formatBytes(Bytes(std::int64_t(st->largestPhaseBytes))),
                    formatBytes(Bytes(peak)), budget));
                streamed = fmt::format(" (streamed: largest layer {}; peak RSS {}{})",
                    formatBytes(Bytes(std::int64_t(st->largestPhaseBytes))),
                    formatBytes(Bytes(peak)), budget);
            }
            report.summary = fmt::format("{:.1f} tokens/s decode{}, time to first token {}; peak "
                                         "growth {} against an estimate of {}{}",
                tokensPerSecond, where, formatDuration(Seconds(run->prefillSeconds)),
                formatBytes(Bytes(growth)), formatBytes(rank.total), streamed);
            return report;
        } };
}

Step reportStep(ValidationState& s)
{
    return { "report", "Report", {}, [&s](StepContext& ctx) -> Result<StepReport> {
                StepReport& report = *ctx.partial;
                std::vector<FigureSpec> specs;
                if (s.comparison) {
                    specs.push_back(errorDepthFigure(*s.comparison));
                }
                if (!s.memory.empty()) {
                    specs.push_back(memoryFigure(s.memory));
                }
                specs.push_back(stepTimeFigure(s.finished));
                if (!s.renderer) {
                    report.summary = "no figure renderer in this build (built without the GUI): "
                                     "the HTML report has tables only";
                    return report;
                }
                ctx.progress.setTotal(std::int64_t(specs.size()));
                for (const auto& spec : specs) {
                    if (ctx.stop.stop_requested()) {
                        return Error::cancelled();
                    }
                    auto figure = s.renderer(spec);
                    if (!figure) {
                        return figure.error().withContext(fmt::format("figure '{}'", spec.title));
                    }
                    s.figures.push_back(std::move(*figure));
                    ctx.progress.advance();
                }
                report.metrics["figures"] = double(s.figures.size());
                report.summary
                    = fmt::format("{} figures rendered for the HTML report", s.figures.size());
                return report;
            } };
}

} // namespace detail

MultiRankRunner inProcessMultiRankRunner()
{
    return [](const MultiRankRequest& request, Progress& progress,
               std::stop_token stop) -> Result<MultiRankOutput> {
        auto layout = checkpoint::parseShardLayout(request.plan);
        if (!layout) {
            return layout.error();
        }
        // `day0 run <shard folder> --plan … --ranks in-process`'s action: each rank reads its
        // own rank file.
        actions::PlanRunRequest plan;
        plan.checkpoint = request.sharded.string();
        plan.layout = *layout;
        plan.newTokens = request.newTokens;
        plan.prompts = { request.promptIds };
        plan.stream = request.stream;
        plan.memoryBudget = request.streamOptions.memoryBudget;
        plan.budgetPerRank = request.budgetPerRank;
        auto ran = actions::runPlanInProcess(plan, progress, stop);
        if (!ran) {
            return ran.error();
        }
        auto* run = &ran->result;
        if (run->sequences.empty()) {
            return Error::internal("sharded run: rank 0 gathered no sequence");
        }
        MultiRankOutput out;
        out.precision = "fp32";
        out.ranks = int(run->ranks.size());
        out.how = "in-process threads";
        out.generated = std::move(run->sequences.front().generated);
        out.logits = std::move(run->sequences.front().logits);
        if (request.stream) {
            for (const auto& rank : run->ranks) {
                out.streamBytesRead += rank.streamBytesRead;
                out.streamRankPeakBytes = std::max(out.streamRankPeakBytes, rank.weightBytes);
            }
            out.streamRankBudget = ran->budget.perRank;
            out.streamBudgetBasis = ran->budget.basis;
        }
        return out;
    };
}

Result<void> writeReports(const Validation& v, const ReportPaths& paths)
{
    if (!paths.junit.empty()) {
        DAY0_TRY(writeFileAtomic(paths.junit, toJUnitXml(v.result, v.header)));
    }
    if (!paths.html.empty()) {
        DAY0_TRY(writeFileAtomic(paths.html, toHtml(v.result, v.header, v.figures)));
    }
    if (!paths.json.empty()) {
        DAY0_TRY(writeFileAtomic(paths.json, dumpJson(toJson(v.result, v.header), 2)));
    }
    return success();
}

history::RunRecord validationRunRecord(const Validation& v, const ReportPaths& paths)
{
    history::RunRecord r(history::RunKind::Validate);
    const auto& result = v.result;
    r.info.modelName = v.modelName;
    r.info.modelFingerprint = v.fingerprint;
    r.info.plan = v.options.plan;
    r.info.precision = v.options.precision;
    r.info.backend = v.options.backend ? v.options.backend->name() : std::string("day0-cpu");
    r.info.duration = result.duration;
    r.info.status = result.cancelled ? history::RunStatus::Cancelled
        : result.exitCode() == 2     ? history::RunStatus::Error
        : result.passed()            ? history::RunStatus::Ok
                                     : history::RunStatus::Failed;
    int passed = 0;
    std::string firstBad;
    for (const auto& step : result.steps) {
        passed += step.status == StepStatus::Passed;
        if (firstBad.empty()
            && (step.status == StepStatus::Failed || step.status == StepStatus::Error)) {
            firstBad = fmt::format("{}: {}", step.id, step.reason);
        }
        r.setProperty(step.id + ".status", stepStatusName(step.status));
        r.addMetric(step.id + ".duration_s", step.duration.value, "s");
        for (const auto& [name, value] : step.report.metrics) {
            r.addMetric(step.id + "." + name, value);
        }
        const auto level = step.status == StepStatus::Failed || step.status == StepStatus::Error
            ? LogLevel::Error
            : (step.status == StepStatus::Skipped ? LogLevel::Warning : LogLevel::Info);
        r.addEvent(level,
            fmt::format("{} {}: {}", step.id, stepStatusName(step.status),
                step.reason.empty() ? step.report.summary : step.reason));
        for (const auto& line : step.log) {
            r.addEvent(LogLevel::Info, fmt::format("{}: {}", step.id, line));
        }
    }
    r.addMetric("steps_passed", passed);
    r.info.message = firstBad.empty()
        ? fmt::format("{} of {} steps passed", passed, result.steps.size())
        : firstBad;
    r.layers = v.layers;
    r.memory = v.memory;
    for (const auto& [kind, path] :
        { std::pair { "junit", paths.junit }, { "report", paths.html }, { "json", paths.json } }) {
        if (!path.empty()) {
            if (auto artifact = history::makeArtifact(kind, path)) {
                r.addArtifact(std::move(*artifact));
            }
        }
    }
    return r;
}

Result<ValidateOutcome> validate(const ValidateOptions& options, const ReportPaths& paths,
    const FigureRenderer& renderer, Progress& progress, std::stop_token stop,
    const PipelineObserver& observer, Progress* stepProgress)
{
    auto validation = runValidation(options, renderer, progress, stop, observer, stepProgress);
    if (!validation) {
        return validation.error();
    }
    ValidateOutcome out;
    out.validation = std::move(*validation);
    if (auto written = writeReports(out.validation, paths); !written) {
        out.reportsError = written.error();
    } else {
        out.written = paths;
    }
    out.record = validationRunRecord(out.validation, out.written);
    return out;
}

} // namespace day0::pipeline
