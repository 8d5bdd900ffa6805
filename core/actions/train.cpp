#include "actions/train.h"

#include "actions/checkpoint_trainable.h"
#include "actions/train_record.h"
#include "exec/backward.h"
#include "exec/blas_threads.h"
#include "plan/parallel_plan.h"
#include "train/next_token_mlp.h"
#include "train/token_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace day0::actions {

Result<void> applyTrainPlan(const std::string& text, train::TrainOptions& options)
{
    if (text.empty()) {
        return success();
    }
    auto parsed = plan::parsePlan(text);
    if (!parsed) {
        return parsed.error();
    }
    plan::ParallelPlan modelled;
    modelled.dp = parsed->dp;
    modelled.tp = parsed->tp;
    modelled.zero = parsed->zero;
    if (!(*parsed == modelled) || parsed->zero > 1) {
        return Error::unsupported(fmt::format("plan '{}': the trainer models data parallelism "
                                              "(dp), tensor parallelism (tp) and ZeRO-1 "
                                              "(zero=0|1) only; pipeline, expert and context "
                                              "parallelism, sequence parallelism, ZeRO-2/3 and "
                                              "the other plan fields are not modelled yet",
            text));
    }
    options.dp = std::max(parsed->dp, 1);
    options.tp = std::max(parsed->tp, 1);
    options.zero = parsed->zero;
    return success();
}

namespace {

/// The model and data a request trains: the built-in task, or a checkpoint and its data.
struct TrainTask {
    std::unique_ptr<train::TrainableModel> model;
    std::unique_ptr<train::TrainingData> data;
};

Result<TrainTask> taskOf(const TrainRequest& request, const train::TrainOptions& options)
{
    TrainTask task;
    if (request.model == kBuiltinTrainModel) {
        if (!request.data.empty()) {
            return Error::badInput(fmt::format(
                "--data: the built-in task '{}' trains on its own synthetic chain", request.model));
        }
        auto mlp = std::make_unique<train::NextTokenMlp>(train::MlpShape {});
        task.data = std::make_unique<train::SyntheticCorpus>(mlp->shape().vocab, options.seed);
        task.model = std::move(mlp);
        return task;
    }
    auto model = CheckpointTrainable::load(request.model);
    if (!model) {
        return model.error();
    }
    if (options.precision == train::TrainPrecision::MixedBf16) {
        // Refused before any step runs, by what the emulated backward lacks.
        if (const auto missing = exec::emulatedBackwardUnsupported(model->spec());
            !missing.empty()) {
            return Error::unsupported(fmt::format("train {}: bf16-mixed computes through the "
                                                  "emulated-bf16 backward, which does not cover "
                                                  "{}; use --precision f64 or f32",
                request.model, fmt::join(missing, "; ")));
        }
    }
    const std::int64_t vocab = model->spec().vocabSize;
    if (!request.data.empty()) {
        auto file = train::TokenFileData::load(request.data, vocab, options.globalBatch);
        if (!file) {
            return file.error();
        }
        task.data = std::make_unique<train::TokenFileData>(std::move(*file));
    } else if (vocab > kMaxSyntheticVocab) {
        return Error::unsupported(fmt::format("train {}: the synthetic chain over a vocabulary of "
                                              "{} ids would hold {}² × 3 successors (the limit is "
                                              "{} ids); give token-id sequences with --data FILE",
            request.model, vocab, vocab, kMaxSyntheticVocab));
    } else {
        task.data = std::make_unique<train::SyntheticCorpus>(int(vocab), options.seed);
    }
    task.model = std::make_unique<CheckpointTrainable>(std::move(*model));
    return task;
}

} // namespace

namespace {

/// The verdict's metrics, per-step baseline rows and status on the record.
TrainOutcome finishTrainOutcome(TrainOutcome out, const train::TrainOptions& options)
{
    if (out.verdict) {
        const auto& v = *out.verdict;
        out.record.addMetric("baseline_final_loss", v.baselineFinal, "nat");
        out.record.addMetric("compressed_final_loss", v.compressedFinal, "nat");
        out.record.addMetric("convergence_gap", v.gap);
        out.record.addMetric("convergence_tolerance", v.tolerance);
        out.record.setProperty("converges", v.converges ? "yes" : "no");
        for (const auto& s : out.baseline->history) {
            out.record.layers.add(
                fmt::format("step.{}", s.step), int(s.step), "", "baseline_loss", s.loss);
        }
        out.record.info.message = fmt::format("{}: {}", options.compression.describe(), v.message);
        if (!v.converges) {
            out.record.info.status = history::RunStatus::Failed;
        }
    }
    return out;
}

} // namespace

Result<TrainOutcome> trainModel(
    const TrainRequest& request, Progress& progress, const std::stop_token& stop)
{
    train::TrainOptions options = request.options;
    DAY0_TRY(applyTrainPlan(request.plan, options));
    if (!request.gradDump.empty() && request.model == kBuiltinTrainModel) {
        return Error::unsupported(fmt::format("--grad-dump: the built-in task '{}' has no model "
                                              "anchors to dump; gradient dumps are of "
                                              "checkpoints",
            request.model));
    }
    const auto started = std::chrono::steady_clock::now();
    auto task = taskOf(request, options);
    if (!task) {
        return task.error();
    }
    const train::TrainableModel& model = *task->model;
    std::unique_ptr<TrainGradientDumps> dumps;
    std::vector<std::int64_t> dumpSteps;
    if (!request.gradDump.empty()) {
        auto steps = request.gradSteps.resolve(options.steps);
        if (!steps) {
            return steps.error();
        }
        dumpSteps = std::move(*steps);
        const auto& checkpoint = dynamic_cast<const CheckpointTrainable&>(model);
        auto opened = TrainGradientDumps::open(checkpoint.spec(), checkpoint.parameters(),
            request.model, request.gradDump, options.precision);
        if (!opened) {
            return opened.error();
        }
        dumps = std::move(*opened);
        options.gradientTap.steps = dumpSteps;
        options.gradientTap.write
            = [d = dumps.get()](const train::TappedGradient& g) { return d->write(g); };
    }
    const train::TrainingData& corpus = *task->data;
    options.source = request.model == kBuiltinTrainModel
        ? corpus.describe()
        : fmt::format("{} on {}", request.model, corpus.describe());
    // One BLAS thread per rank. Ranks compute at once, and a threaded OpenBLAS called from two
    // threads spins in its dispatcher. A single rank too: the backward's products are one
    // sequence's (tokens x width), too small for OpenBLAS's threads to pay for their hand-offs
    // (tests/bench/train_step_bench, 4 x 64 tokens on a shared 2-core machine: stories260K fp32
    // 493 -> 102 ms a step, shrunk llama-3.1-8b fp64 1473 -> 500 ms).
    const exec::SingleThreadedBlas blas;
    TrainOutcome out;
    auto run = train::runTraining(model, corpus, options, &progress, stop);
    if (!run) {
        return run.error();
    }
    out.result = std::move(*run);
    if (options.compression.kind != train::CompressionKind::None) {
        // The same seed, steps and plan, uncompressed, without checkpoints, drills or dumps.
        train::TrainOptions plain = options;
        plain.gradientTap = {};
        plain.compression = {};
        plain.checkpointDir.clear();
        plain.checkpointEvery = 0;
        plain.resume = false;
        plain.maxRestarts = 0;
        plain.drill.reset();
        auto baseline = train::runTraining(model, corpus, plain, &progress, stop);
        if (!baseline) {
            return baseline.error();
        }
        out.baseline = std::move(*baseline);
        std::vector<double> a;
        std::vector<double> b;
        for (const auto& s : out.baseline->history) {
            a.push_back(s.loss);
        }
        for (const auto& s : out.result.history) {
            b.push_back(s.loss);
        }
        auto verdict = train::judgeConvergence(a, b);
        if (!verdict) {
            return verdict.error();
        }
        out.verdict = *verdict;
    }
    // Only a run that finished (its uncompressed twin too) moves its dumps into place.
    if (dumps) {
        auto committed = dumps->commit();
        if (!committed) {
            return committed.error();
        }
        out.gradDumps = std::move(*committed);
        for (const auto step : dumpSteps) {
            if (std::none_of(out.gradDumps.begin(), out.gradDumps.end(),
                    [&](const GradDumpRef& d) { return d.step == step; })) {
                out.gradStepsNotRun.push_back(step);
            }
        }
    }
    const double seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out.record = trainRunRecord(request.model, options, out.result, seconds);
    out.record.setProperty("data", corpus.describe());
    if (dumps) {
        recordGradDumps(out.gradDumps, out.record);
        out.record.setProperty("peak_rss_note",
            "includes the --grad-dump passes (each dumped step's sequences through the backward "
            "with activation gradients, held together until written)");
        for (const auto step : out.gradStepsNotRun) {
            out.record.addEvent(LogLevel::Warning,
                fmt::format("no gradient dump of step {}: this attempt started after it "
                            "(resumed from step {})",
                    step, out.result.resumedFromStep));
        }
    }
    if (request.model != kBuiltinTrainModel) {
        out.record.setProperty("checkpoint", request.model);
        const auto& checkpoint = dynamic_cast<const CheckpointTrainable&>(model);
        const auto& ranks = out.result.buffersPerRank;
        if (std::any_of(ranks.begin(), ranks.end(),
                [](const train::TrainerBuffers& b) { return b.keptActivations <= 0; })) {
            // A resume at the last step runs none: nothing was measured.
            out.memoryNotCompared = fmt::format("memory is not compared with the planner: no "
                                                "step ran in this attempt (resumed from step {} "
                                                "of {})",
                out.result.resumedFromStep, options.steps);
            out.record.setProperty("memory_not_compared", out.memoryNotCompared);
            return finishTrainOutcome(std::move(out), options);
        }
        // The step's own figures: its buffers' sizes and what its backward kept, every rank's.
        auto memory = compareTrainMemory(
            checkpoint.spec(), options, out.result.buffersPerRank, peakRssBytes());
        if (!memory) {
            return memory.error();
        }
        recordTrainMemory(*memory, out.record);
        out.memory = std::move(*memory);
    }
    return finishTrainOutcome(std::move(out), options);
}

} // namespace day0::actions
