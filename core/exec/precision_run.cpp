#include "exec/precision_run.h"

#include "checkpoint/tensor_file.h"
#include "exec/emulated_ops.h"

#include <fmt/format.h>

namespace day0::exec {

Result<PrecisionRunResult> runWithReference(const model::ModelSpec& spec,
    const WeightSource& weights, const PrecisionRunOptions& options, Progress& progress,
    std::stop_token stop)
{
    if (options.reference && *options.reference != PrecisionMode::F32
        && *options.reference != PrecisionMode::F64) {
        return Error::badInput(fmt::format(
            "--reference must be fp32 or fp64, not {}", precisionName(*options.reference)));
    }
    if (options.reference && options.table == nullptr) {
        return Error::internal("runWithReference: a reference run needs a tolerance table");
    }
    if (options.inject && !options.reference) {
        return Error::badInput("inject mode needs a reference run (--reference fp32 or fp64)");
    }
    if (options.fp32Leg) {
        if (!options.reference) {
            return Error::badInput("the fp32 leg needs a reference run (--reference fp32 or fp64)");
        }
        if (options.backend == nullptr) {
            return Error::badInput(
                "the fp32 leg runs the target's backend in fp32; without --backend the target's "
                "fp32 is the CPU reference itself (run a backend, or compare the fp32 dumps of "
                "the platform under test)");
        }
        if (!isEmulated(options.target.base)) {
            return Error::badInput(fmt::format("the fp32 leg checks a lower-precision target; "
                                               "this target already runs {}",
                precisionName(options.target.base)));
        }
    }
    const bool targetF64 = options.target.isF64();
    std::optional<Engine> f64;
    std::optional<Engine> f32;
    const auto engine = [&](bool wantF64) -> Result<Engine*> {
        auto& slot = wantF64 ? f64 : f32;
        if (!slot) {
            progress.setStage(fmt::format("loading weights ({})", wantF64 ? "fp64" : "fp32"));
            auto e = Engine::create(spec, weights, wantF64, progress, stop);
            if (!e) {
                return e.error();
            }
            slot.emplace(std::move(*e));
        }
        return &*slot;
    };

    PrecisionRunResult result;
    // A CPU run streams its weights when asked; a backend's run loads an engine.
    const auto runOn = [&](const RunOptions& o, bool& streamed) -> Result<RunResult> {
        streamed = !options.streamFrom.empty() && o.backend == nullptr;
        if (!streamed) {
            auto e = engine(o.precision.isF64());
            if (!e) {
                return e.error();
            }
            return (*e)->run(o, progress, stop);
        }
        auto r = runStreamed(options.streamFrom, spec, o, options.streamOptions, progress, stop);
        if (!r) {
            return r.error();
        }
        StreamStats& sum = result.stream ? *result.stream : result.stream.emplace();
        sum.bytesRead += r->stats.bytesRead;
        sum.readSeconds += r->stats.readSeconds;
        sum.phasesLoaded += r->stats.phasesLoaded;
        sum.phasesReadAhead += r->stats.phasesReadAhead;
        sum.readAheadSeconds += r->stats.readAheadSeconds;
        sum.largestPairBytes = std::max(sum.largestPairBytes, r->stats.largestPairBytes);
        sum.expertBytesSkipped += r->stats.expertBytesSkipped;
        if (r->stats.largestPhaseBytes >= sum.largestPhaseBytes) {
            sum.largestPhase = r->stats.largestPhase;
            sum.largestPhaseBytes = r->stats.largestPhaseBytes;
        }
        sum.residentPeakBytes = std::max(sum.residentPeakBytes, r->stats.residentPeakBytes);
        sum.peakRssBytes = std::max(sum.peakRssBytes, r->stats.peakRssBytes);
        sum.memoryBudget = r->stats.memoryBudget;
        return std::move(r->run);
    };
    RunOptions run;
    run.promptIds = options.promptIds;
    run.image = options.image;
    run.newTokens = options.newTokens;
    run.linearAttentionChunk = options.linearAttentionChunk;
    run.capture = options.capture;
    if (options.reference) {
        RunOptions ref = run;
        ref.precision = PrecisionPlan { *options.reference, {}, {}, Fp8Scaling::PerTensor };
        // The reference keeps full tensors so that inject mode and the comparison can use them.
        ref.capture.statsOnly = false;
        if (options.inject) {
            ref.capture.filters.clear(); // inject mode reads every layer's output
        }
        progress.setStage("reference run");
        auto r = runOn(ref, result.referenceStreamed);
        if (!r) {
            return r.error();
        }
        result.reference = std::move(*r);
        run.forcedTokens.assign(
            result.reference->generated.begin(), result.reference->generated.end() - 1);
    }
    run.precision = options.target;
    run.backend = options.backend; // the reference stays on the CPU
    progress.setStage(options.backend != nullptr
            ? fmt::format("target run on {}", options.backend->name())
            : std::string("target run"));
    auto t = runOn(run, result.targetStreamed);
    if (!t) {
        return t.error();
    }
    result.target = std::move(*t);
    // The inject-mode run streams as the target did; the fp32 leg (a backend's) shares the
    // target's loaded engine.
    Result<Engine*> e = static_cast<Engine*>(nullptr);
    if (options.fp32Leg) {
        e = engine(targetF64);
        if (!e) {
            return e.error();
        }
    }
    if (options.inject) {
        RunOptions inj = run;
        inj.injectFrom = &result.reference->dump;
        progress.setStage("inject-mode target run");
        bool injectStreamed = false;
        auto i = runOn(inj, injectStreamed);
        if (!i) {
            return i.error();
        }
        result.injected = std::move(*i);
    }
    // A run against the reference, judged by the rules of `precision`.
    const auto judged
        = [&](const numerics::Dump& target, DType precision, const numerics::Dump* local) {
              numerics::CompareOptions co;
              co.table = options.table;
              co.precision = precision;
              co.local = local;
              return numerics::compareDumps(result.reference->dump, target, co, progress, stop);
          };
    if (options.fp32Leg) {
        RunOptions leg = run;
        leg.precision = PrecisionPlan { PrecisionMode::F32, {}, {}, Fp8Scaling::PerTensor };
        progress.setStage(fmt::format("fp32 leg on {}", options.backend->name()));
        auto l = (*e)->run(leg, progress, stop);
        if (!l) {
            return l.error();
        }
        result.fp32Leg = std::move(*l);
        progress.setStage("fp32 leg comparison");
        auto cmp = judged(result.fp32Leg->dump, DType::F32, nullptr);
        if (!cmp) {
            return cmp.error().withContext("fp32 leg");
        }
        result.fp32LegComparison = std::move(*cmp);
    }
    if (result.reference) {
        progress.setStage("comparison");
        auto cmp = judged(result.target.dump, precisionDType(options.target.base),
            result.injected ? &result.injected->dump : nullptr);
        if (!cmp) {
            return cmp.error();
        }
        result.comparison = std::move(*cmp);
    }
    return result;
}

std::string fp32LegSummary(const numerics::DumpComparison& leg)
{
    if (!leg.firstDivergence) {
        return leg.status();
    }
    const auto& row = leg.rows[*leg.firstDivergence];
    return fmt::format("{}: {} of {} captures failed, first at {}: {}", leg.status(), leg.failCount,
        leg.rows.size(), row.name, row.verdict.reason);
}

bool precisionRunPassed(const PrecisionRunResult& result)
{
    const auto passed
        = [](const std::optional<numerics::DumpComparison>& c) { return !c || c->failCount == 0; };
    return passed(result.comparison) && passed(result.fp32LegComparison);
}

Result<void> writeRunDumps(const PrecisionRunResult& result, const std::filesystem::path& dir)
{
    std::error_code ec;
    const bool existed = std::filesystem::exists(dir, ec);
    const auto written = [&]() -> Result<void> {
        if (!result.reference) {
            return checkpoint::writeDump(result.target.dump, dir);
        }
        DAY0_TRY(checkpoint::writeDump(result.reference->dump, dir / "reference"));
        DAY0_TRY(checkpoint::writeDump(result.target.dump, dir / "target"));
        if (result.injected) {
            DAY0_TRY(checkpoint::writeDump(result.injected->dump, dir / "target-inject"));
        }
        if (result.fp32Leg) {
            DAY0_TRY(checkpoint::writeDump(result.fp32Leg->dump, dir / "target-fp32"));
        }
        return success();
    }();
    if (!written && !existed) {
        // A failed write (a full disk) leaves no folder that looks like a run's dumps.
        std::filesystem::remove_all(dir, ec);
    }
    return written;
}

} // namespace day0::exec
