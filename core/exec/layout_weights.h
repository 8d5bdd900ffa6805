#pragma once

// Internal to core/exec: presents a checkpoint under the engine's canonical tensor names.

#include "exec/weight_source.h"
#include "model/model_spec.h"

#include <string>
#include <vector>

namespace day0::exec::detail {

/// Canonical names are those of a plain decoder checkpoint ("model.layers.3.mlp.experts.5.
/// up_proj.weight", "lm_head.weight"); this source maps them onto the spec's layout: text
/// prefixes ("model.language_model"), the lm_head name, fused 3-D expert tensors
/// (`experts.gate_up_proj` [E, H, 2I] and `experts.down_proj` [E, I, H], sliced and transposed
/// into per-expert [out, in] weights; gpt-oss interleaves gate and up along 2I and adds
/// per-expert biases `gate_up_proj_bias` [E, 2I] and `down_proj_bias` [E, H]) and the Conv3d patch
/// embedding viewed as a linear weight. Vision tower names pass through unchanged.
class LayoutWeights final : public WeightSource {
public:
    LayoutWeights(const WeightSource& inner, const model::ModelSpec& spec);

    [[nodiscard]] bool has(const std::string& name) const override;
    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override;
    [[nodiscard]] std::vector<std::string> names() const override { return m_inner.names(); }
    [[nodiscard]] std::string describe() const override { return m_inner.describe(); }

    /// The checkpoint's name of canonical tensor `name` (text prefix and lm_head mapped).
    [[nodiscard]] std::string checkpointName(const std::string& name) const;

private:
    struct Packed {
        std::string tensor; ///< checkpoint name of the fused tensor
        std::int64_t expert = -1;
        int part = 0; ///< 0 gate, 1 up (of gate_up_proj), 2 down
        bool bias = false; ///< gpt-oss: the expert's bias (`gate_up_proj_bias`, `down_proj_bias`)
    };
    [[nodiscard]] bool packed(const std::string& name, Packed& out) const;

    const WeightSource& m_inner;
    const model::ModelSpec& m_spec;
};

/// True when `spec` needs LayoutWeights (a non-default layout or fused experts).
bool needsLayoutMapping(const model::ModelSpec& spec);

} // namespace day0::exec::detail
