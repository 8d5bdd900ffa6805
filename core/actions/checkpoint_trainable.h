#pragma once

#include "base/result.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"
#include "train/trainable_model.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace day0::actions {

/// A loaded checkpoint as the trainer's TrainableModel (`day0 train CKPT`): the parameters are
/// every weight the CPU reference's backward (exec/backward.h) trains, in the order
/// exec::detail::requiredWeights lists them, under their HF names; the initial values are the
/// checkpoint's own as the engine reads them (block FP8 dequantised; the seed is not used). The
/// loss is the mean next-token cross-entropy over every predicted position of the batch (HF labels
/// = input_ids), computed sequence by sequence by exec::lossAndGradients in fp64, fp32 or emulated
/// bf16/fp16 (GradientOptions::emulated: Megatron's bf16 recipe on the weights given, which
/// bf16-mixed training rounds from its fp32 masters); the gradient is that mean's, in fp32 below
/// fp64. Tensors no gradient reaches (DeepSeek's e_score_correction_bias) stay fixed at the
/// checkpoint's values. Thread-safe (read-only once loaded).
class CheckpointTrainable final : public train::TrainableModel {
public:
    /// Opens `checkpoint` and reads its weights; Unsupported naming what the backward lacks for
    /// its family (exec::backwardUnsupported) before any weight is read.
    static Result<CheckpointTrainable> load(const std::filesystem::path& checkpoint);

    [[nodiscard]] std::vector<train::ParameterSpec> parameters() const override;
    /// The checkpoint's weights as doubles, whatever `seed`.
    [[nodiscard]] std::vector<double> initialValues(std::uint64_t seed) const override;
    /// F64, F32, and BF16 / F16 emulated (what exec::emulatedBackwardUnsupported admits, MLA
    /// included).
    Result<double> lossAndGradients(std::span<const double> flat, const train::Batch& batch,
        DType compute, std::span<double> grad) const override;
    /// The same, with the bytes the backward kept for the batch's largest sequence
    /// (exec::GradientResult::keptBytes).
    Result<double> lossGradientsAndFootprint(std::span<const double> flat,
        const train::Batch& batch, DType compute, std::span<double> grad,
        train::StepFootprint& footprint) const override;
    /// Megatron-style: attention heads, MLP width, each routed expert's and the shared experts'
    /// widths split over the TP ranks with the slicing rules of the sharded forward
    /// (checkpoint::sliceFor with etp = tp: q/k/v/gate/up by rows, o/down by columns, q/k/v
    /// biases with their rows; MLA's q_b_proj or q_proj and kv_b_proj by rows, i.e. by heads);
    /// the embedding and the head vocab-parallel (rows [r·V/tp, (r+1)·V/tp) of each, Megatron's
    /// VocabParallelEmbedding and vocab-parallel cross-entropy: exec::GradientOptions::
    /// vocabTotal); norms, the router, the o_proj bias, MLA's q_a/kv_a projections and their
    /// norms and the fixed tensors replicated (the exec backward's tpSum and tpMax do the
    /// reductions). Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE, DeepSeek-V3 and Kimi-K2 (gpt-oss,
    /// whose sinks and packed biased experts it does not cut, is refused by name); a tp that
    /// does not divide num_attention_heads, num_key_value_heads (not MLA), intermediate_size,
    /// moe_intermediate_size, the shared experts' width or vocab_size is refused (BadInput)
    /// naming the field (a vocabulary is not padded, as Megatron would pad it).
    Result<std::unique_ptr<train::TensorParallelShard>> tensorParallel(
        int tp, int rank, comm::Communicator& group) const override;

    [[nodiscard]] const model::ModelSpec& spec() const { return m_spec; }

private:
    model::ModelSpec m_spec;
    std::vector<train::ParameterSpec> m_parameters;
    std::vector<double> m_initial;
    std::map<std::string, numerics::Tensor> m_fixed; ///< read but not trained
};

namespace detail {

/// exec::GradientOptions::tpSum (and tpMax).
using TpSum = std::function<Result<void>(void* data, std::int64_t count, DType type)>;

/// How one tensor-parallel rank computes (exec::GradientOptions' tensor-parallel fields); empty:
/// a single rank.
struct TpShare {
    TpSum sum; ///< the group's sum
    TpSum max; ///< the group's maximum (the vocab-parallel cross-entropy)
    std::int64_t vocabStart = 0; ///< the first id of the rank's embedding and head rows
    std::int64_t vocabTotal = 0; ///< the whole vocabulary; 0: not vocab-parallel
};

/// CheckpointTrainable::lossAndGradients for `spec` (the whole model or one TP rank's share)
/// with the trainable `parameters` (values in `flat`, in order) and the `fixed` tensors; the
/// largest of the sequences' kept bytes into `footprint` when given.
Result<double> batchLossAndGradients(const model::ModelSpec& spec,
    const std::vector<train::ParameterSpec>& parameters,
    const std::map<std::string, numerics::Tensor>& fixed, std::span<const double> flat,
    const train::Batch& batch, DType compute, std::span<double> grad, const TpShare& tp,
    train::StepFootprint* footprint = nullptr);

} // namespace detail

} // namespace day0::actions
