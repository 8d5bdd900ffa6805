#pragma once

#include "train/trainable_model.h"

namespace day0::train {

/// Shape of a NextTokenMlp.
struct MlpShape {
    int vocab = 32;
    int embed = 16; ///< D
    int hidden = 48; ///< H
};

/// A small next-token model with hand-written gradients, to exercise the trainer on a real task
/// before the LLM backward lands: the previous two tokens' embeddings, concatenated, through
/// one tanh layer to the logits.
///   x = [E[t-2]; E[t-1]] (2D), h = tanh(W1·x + b1) (H), z = W2·h + b2 (V),
///   loss = mean over predicted positions of -log softmax(z)[t].
/// Parameters (torch nn.Linear layout, out × in): embed.weight [V, D], hidden.weight [H, 2D],
/// hidden.bias [H], out.weight [V, H], out.bias [V]. Emulated precisions round every stored
/// intermediate (x, the pre-activation, h, z, the softmax, each backward product) to the compute
/// dtype; dot products accumulate in double before their one rounding, as a GEMM with a wide
/// accumulator does. Thread-safe (no mutable state).
class NextTokenMlp final : public TrainableModel {
public:
    explicit NextTokenMlp(MlpShape shape);

    [[nodiscard]] std::vector<ParameterSpec> parameters() const override;
    /// N(0, 1/fan_in)-like uniform init from `seed` (embeddings U(-1, 1)), biases zero.
    [[nodiscard]] std::vector<double> initialValues(std::uint64_t seed) const override;
    Result<double> lossAndGradients(std::span<const double> flat, const Batch& batch, DType compute,
        std::span<double> grad) const override;

    [[nodiscard]] const MlpShape& shape() const { return m_shape; }

private:
    MlpShape m_shape;
};

/// Rounds `value` to `dtype` (F64 unchanged, F32, BF16, F16), the emulation of storing it there.
double roundTo(double value, DType dtype);

} // namespace day0::train
