#pragma once

#include "base/dtype.h"
#include "base/result.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace day0::comm {
class Communicator;
} // namespace day0::comm

namespace day0::train {

class TensorParallelShard;

/// One named parameter tensor of a model (HF-style name, row-major shape).
struct ParameterSpec {
    std::string name;
    std::vector<std::int64_t> shape;

    [[nodiscard]] std::int64_t numel() const;
};

/// Every parameter of a model laid out back to back in one flat buffer, in declaration order:
/// the optimizer, clipping, the all-reduce and ZeRO-1's shards all work on that buffer.
struct FlatLayout {
    std::vector<ParameterSpec> parameters;
    std::vector<std::int64_t> offsets; ///< start of each parameter in the flat buffer
    std::int64_t total = 0; ///< elements in the flat buffer

    static FlatLayout of(std::vector<ParameterSpec> parameters);
    /// The elements of parameter `i` in `flat`.
    [[nodiscard]] std::span<double> slice(std::span<double> flat, std::size_t i) const;
    [[nodiscard]] std::span<const double> slice(std::span<const double> flat, std::size_t i) const;
};

/// A batch of token-id sequences; each sequence predicts its own next tokens.
struct Batch {
    std::vector<std::vector<std::int32_t>> sequences;
};

/// Where a run's batches come from: sequence `first + i` of step `step`'s global batch is a pure
/// function of (step, first + i), so every data-parallel split of a step sees the same data and
/// a resumed run sees what an uninterrupted one saw. Thread-safe (read-only once built).
class TrainingData {
public:
    virtual ~TrainingData() = default;

    /// Sequences [first, first + count) of step `step`'s global batch, at most `length` tokens.
    [[nodiscard]] virtual Batch batch(
        std::int64_t step, std::int64_t first, int count, int length) const = 0;
    /// One line for the run record ("synthetic order-2 chain over 512 ids, seed 1", a file).
    [[nodiscard]] virtual std::string describe() const = 0;
};

/// What one lossAndGradients() call held beyond the trainer's own buffers, where the model
/// measures it.
struct StepFootprint {
    /// Bytes the forward kept for the backward, the largest of the batch's sequences (a rank
    /// runs them one after another), in the compute type; 0: not measured.
    std::int64_t keptActivations = 0;
};

/// What the trainer needs from a model: its named parameters, and the mean next-token loss of a
/// batch with the gradient of that loss with respect to every parameter. The LLM backward of
/// core/exec plugs in here; next_token_mlp.h is a small model with hand-written gradients.
/// Implementations must be deterministic (same inputs, same bits) and may be called from one
/// thread per rank at once (no shared mutable state).
class TrainableModel {
public:
    virtual ~TrainableModel() = default;

    /// The parameters, in the order of the flat buffer.
    [[nodiscard]] virtual std::vector<ParameterSpec> parameters() const = 0;

    /// Deterministic initial values of the flat buffer for `seed`.
    [[nodiscard]] virtual std::vector<double> initialValues(std::uint64_t seed) const = 0;

    /// Mean cross-entropy (nats per predicted token) of `batch` under the weights `flat`, and its
    /// gradient written into `grad` (same layout, overwritten). `compute` is the precision the
    /// arithmetic is emulated in (F64, F32, BF16, F16): every intermediate and the gradient are
    /// rounded to it. Errors name the batch entry at fault (e.g. a token id out of range).
    virtual Result<double> lossAndGradients(std::span<const double> flat, const Batch& batch,
        DType compute, std::span<double> grad) const = 0;

    /// lossAndGradients() that also fills `footprint` (the trainer calls this one, so a step
    /// measures what it holds while it runs). The default calls lossAndGradients() and leaves
    /// `footprint` empty: not measured.
    virtual Result<double> lossGradientsAndFootprint(std::span<const double> flat,
        const Batch& batch, DType compute, std::span<double> grad, StepFootprint& footprint) const;

    /// The share of tensor-parallel rank `rank` of `tp` (Megatron-style), computing
    /// collectively over `group` (the rank's TP peers, size tp, which must outlive the shard).
    /// The default refuses (Unsupported): the model has no tensor-parallel split. Errors name
    /// the field that tp does not divide.
    virtual Result<std::unique_ptr<TensorParallelShard>> tensorParallel(
        int tp, int rank, comm::Communicator& group) const;
};

/// One tensor-parallel rank's share of a TrainableModel: parameters() are this rank's slices
/// (replicated parameters whole, under the same names), initialValues() the slices of the whole
/// model's, and lossAndGradients() is collective over the TP group (every rank of the group
/// calls it with the same batch; the loss comes out the same on each). Used by one rank thread.
class TensorParallelShard : public TrainableModel {
public:
    /// True when parameter `i` is whole on every TP rank: its gradient is the same on each, so a
    /// global norm counts it once.
    [[nodiscard]] virtual bool replicated(std::size_t i) const = 0;
    /// Writes this rank's slices of `local` (this shard's flat buffer) into `whole` (the whole
    /// model's flat buffer); replicated parameters are written by TP rank 0 only, so that the
    /// sum of the ranks' buffers (zeros elsewhere) is the whole model.
    virtual void scatter(std::span<const double> local, std::span<double> whole) const = 0;
};

} // namespace day0::train
