#pragma once

// Internal to core/exec: the gradient pass over one sequence (backward.cpp drives it; the MLA
// attention's forward and backward live in backward_mla.cpp). The forward here recomputes the
// model with the reference kernels and keeps what each op's backward needs.

#include "base/result.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "model/model_spec.h"
#include "numerics/dump.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace day0::exec::detail {

/// What one decoder layer's forward keeps for its backward.
template <typename T> struct LayerActivations {
    std::vector<T> in; ///< the layer's input (residual stream) [n, h]
    std::vector<T> xn1; ///< input_layernorm output
    std::vector<T> qPre, kPre; ///< q/k before their per-head norms (QK-norm models)
    std::vector<T> q, k, v; ///< what attention read (after norms and RoPE)
    std::vector<T> probs; ///< attention probabilities [heads, n, n]
    std::vector<T> sinkProbs; ///< each row's sink probability [heads, n] (gpt-oss sinks)
    std::vector<T> ctx; ///< attention context, o_proj's input
    std::vector<T> mid; ///< residual after attention
    std::vector<T> xn2; ///< post_attention_layernorm output
    // Dense MLP.
    std::vector<T> g, u, act;
    // MLA (backward_mla.cpp).
    std::vector<T> qa, qaNormed, ckv, latentNormed, kv;
    // MoE.
    std::vector<double> scores; ///< softmax probabilities or sigmoid scores [n, experts]
    Routing routing;
    struct Expert {
        std::vector<std::int64_t> token; ///< rows' tokens, in order
        std::vector<std::int64_t> slot; ///< rows' choice index in the routing
        std::vector<T> x, g, u, act, y;
    };
    std::vector<Expert> experts;
    std::vector<T> sharedG, sharedU, sharedAct;
};

/// Parameters (read-only, in the compute type) and their gradients (zero-initialised for every
/// trainable parameter), by HF name.
template <typename T> struct ParameterSet {
    std::map<std::string, const T*> values;
    std::map<std::string, std::vector<T>> grads;
    std::map<std::string, numerics::Shape> shapes;

    [[nodiscard]] const T* value(const std::string& name) const
    {
        const auto it = values.find(name);
        return it == values.end() ? nullptr : it->second;
    }
    /// The gradient accumulator of `name`, or null for a parameter without one.
    T* grad(const std::string& name)
    {
        const auto it = grads.find(name);
        return it == grads.end() ? nullptr : it->second.data();
    }
};

/// The anchors' activation gradients of a pass, in the order recorded.
template <typename T> struct ActivationGrads {
    bool enabled = false;
    std::vector<std::pair<std::string, numerics::Tensor>> list;
    void record(const std::string& anchor, const T* data, const numerics::Shape& shape);
    /// Inject mode (GradientOptions::inject): the reference dump whose "<anchor>#grad" replaces
    /// the gradient at each module boundary; null: none.
    const numerics::Dump* inject = nullptr;
    /// Records `anchor`'s gradient as computed, then overwrites `data` with the reference's
    /// (inject mode). Error when the reference lacks the capture or its shape differs.
    Result<void> recordAndInject(const std::string& anchor, T* data, const numerics::Shape& shape);
};

/// Forward of a DeepSeek MLA attention block on xn1 (into `out` [n, h]), keeping its state in
/// `a` (backward_mla.cpp).
template <typename T>
void mlaForward(const model::ModelSpec& spec, const ParameterSet<T>& p, const Rope& rope,
    double scale, int layer, LayerActivations<T>& a, std::span<const std::int64_t> positions,
    std::int64_t n, T* out);

/// Sums `count` values in place over the tensor-parallel group; null without one.
template <typename T> using TpSumOf = std::function<Result<void>(T* data, std::int64_t count)>;

/// Its backward: `dout` [n, h] → dxn1 accumulated, weight gradients accumulated. Under tensor
/// parallelism (`tpSum` set, `spec` holding this rank's heads, q_b_proj/q_proj and kv_b_proj
/// cut by heads, o_proj by its input columns) the input gradients of the head-split blocks (the
/// normed q latent, or q_proj's share of dxn1, the normed kv latent and the shared rope key)
/// are summed over the group before the replicated q_a/kv_a projections and their norms see
/// them, so those gradients and dxn1 come out whole and the same on every rank.
template <typename T>
Result<void> mlaBackward(const model::ModelSpec& spec, ParameterSet<T>& p, const Rope& rope,
    double scale, int layer, const LayerActivations<T>& a, std::span<const std::int64_t> positions,
    std::int64_t n, const T* dout, T* dxn1, const TpSumOf<T>& tpSum);

} // namespace day0::exec::detail
