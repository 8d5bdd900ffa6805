#pragma once

// `day0 train CHECKPOINT --grad-dump DIR [--grad-steps ...]`: the gradient of chosen training
// steps written as gradient dumps (the format and names of `day0 run --grad --dump`,
// exec::gradientDump), so that `day0 compare` and the Training view's heatmap take them.

#include "base/result.h"
#include "exec/precision.h"
#include "history/run_record.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"
#include "train/trainer.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace day0::actions {

/// Which steps of a run write a gradient dump (`--grad-steps`): "last" (the default), a list
/// of 0-based steps "0,4,9", or "every=K" (steps K-1, 2K-1, ..., and the last).
struct GradDumpSteps {
    enum class Kind { Last, List, Every };
    Kind kind = Kind::Last;
    std::vector<std::int64_t> list;
    std::int64_t every = 0;

    /// BadInput naming the text and the syntax when it is none of the three.
    static Result<GradDumpSteps> parse(const std::string& text);
    /// The steps of a run of `steps` steps, ascending; BadInput naming a listed step the run
    /// does not have.
    [[nodiscard]] Result<std::vector<std::int64_t>> resolve(std::int64_t steps) const;
};

/// A gradient dump of a training run: its step, replica and folder.
struct GradDumpRef {
    std::int64_t step = 0; ///< 0-based
    int dpRank = 0;
    std::string path;
};

/// The folder name of a step's dump: "step-N", or "step-N-dpR" when the run has dp > 1 replicas
/// (each saw other sequences, so each has its own activation gradients).
std::string gradDumpName(std::int64_t step, int dpRank, int dp);

/// Writes the tapped steps (train::GradientTap) of a checkpoint's run into `dir`, each dump
/// first into a staging folder inside `dir` and moved to its name only by commit(): a cancelled
/// or failed run leaves no dump, half-written or whole (the destructor removes the staging
/// folder). A dump holds
///  - "<parameter>#grad": the step's gradient as the optimizer received it (the trainer's
///    buffer: the mean over the replicas, before clipping), under the model's HF names;
///  - "<anchor>#grad" and "lm_head" (the logits): the replica's sequences passed through the
///    same backward (exec::lossAndGradients) on the step's weights with activation gradients
///    on, stacked along the token axis, each sequence's scaled by its share of the step's loss
///    (its counted positions over the replica's, over dp), so every gradient in the dump is of
///    the step's loss. The pass is checked against the trainer's: its loss must be the
///    replica's loss of the step.
/// dump.json's input ids are the replica's sequences back to back; its extra says "training":
/// {step, dp_rank, dp, sequences, step_loss, replica_loss}. With one sequence and one replica
/// the dump is what `day0 run --grad` writes for that sequence and those weights.
class TrainGradientDumps {
public:
    /// `parameters` are the trained ones in the flat layout's order; the other weights the
    /// backward needs (e_score_correction_bias) are read from `checkpoint`. `precision` is the
    /// run's: a bf16-mixed step's pass is the emulated bf16 one on the bf16 copy the step
    /// computed on, as `day0 run --grad --precision bf16`. Creates `dir`.
    static Result<std::unique_ptr<TrainGradientDumps>> open(const model::ModelSpec& spec,
        const std::vector<train::ParameterSpec>& parameters,
        const std::filesystem::path& checkpoint, const std::filesystem::path& dir,
        train::TrainPrecision precision);
    ~TrainGradientDumps();
    TrainGradientDumps(const TrainGradientDumps&) = delete;
    TrainGradientDumps& operator=(const TrainGradientDumps&) = delete;

    /// The tap's writer: one replica's dump of one step into the staging folder. Thread-safe.
    Result<void> write(const train::TappedGradient& gradient);
    /// Moves every staged dump to its name in the folder (replacing a dump of that name), in
    /// step and replica order.
    Result<std::vector<GradDumpRef>> commit();

private:
    TrainGradientDumps() = default;

    model::ModelSpec m_spec;
    std::vector<train::ParameterSpec> m_parameters;
    std::map<std::string, numerics::Tensor> m_fixed;
    std::filesystem::path m_dir;
    std::filesystem::path m_staging;
    bool m_fp64 = true;
    exec::PrecisionMode m_emulated = exec::PrecisionMode::F32; ///< BF16 for a bf16-mixed run
    std::mutex m_mutex;
    std::vector<GradDumpRef> m_staged; ///< guarded by m_mutex; paths inside m_staging
};

/// Adds the dumps to a training run's record: one artifact of kind "grad_dump" each, and the
/// property grad_dump_steps ("0,9").
void recordGradDumps(const std::vector<GradDumpRef>& dumps, history::RunRecord& record);

/// The gradient dumps recorded with a training run (recordGradDumps), in step and replica
/// order; the step and replica come from the folder's name.
std::vector<GradDumpRef> gradDumpsOf(const history::RunRecord& record);

} // namespace day0::actions
