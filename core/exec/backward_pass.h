#pragma once

// Internal to core/exec: what the gradient pass over one sequence (gradient_pass.h) keeps and
// accumulates: each layer's saved activations, the parameters with their gradients and the
// anchors' activation gradients.

#include "base/result.h"
#include "exec/router.h"
#include "model/model_spec.h"
#include "numerics/dump.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <map>
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
    /// GLM-5's DSA: the keys each query attends to [n, index_topk] (−1 padded); MiniMax-M3's
    /// MSA: those of each KV group's kept blocks [kvHeads, n, topK · blockSize]; empty: all.
    std::vector<std::int64_t> selection;
    // MoE.
    std::vector<double> scores; ///< softmax probabilities or sigmoid scores [n, experts]
    Routing routing;
    struct Expert {
        std::vector<std::int64_t> token; ///< rows' tokens, in order
        std::vector<std::int64_t> slot; ///< rows' choice index in the routing
        std::vector<T> x, g, u, act, y;
    };
    std::vector<Expert> experts;
    /// Fills `experts` from `routing`: each expert's rows are the tokens that chose it, in token
    /// order, with their choice index (an expert no token chose has none).
    void groupByExpert(std::int64_t n, std::int64_t numExperts)
    {
        experts.assign(std::size_t(numExperts), {});
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t s = 0; s < routing.k; ++s) {
                auto& ex = experts[std::size_t(routing.experts[std::size_t(t * routing.k + s)])];
                ex.token.push_back(t);
                ex.slot.push_back(s);
            }
        }
    }
    std::vector<T> sharedG, sharedU, sharedAct;
    // Gemma-4 (backward_gemma4.cpp).
    std::vector<T> vPre; ///< the values before v_norm (k_proj's output with attention_k_eq_v)
    std::vector<T> attnOut; ///< self_attn's output, post_attention_layernorm's input
    std::vector<T> ffnOut; ///< the dense MLP's output, post_feedforward_layernorm's input
    std::vector<T> unscaled; ///< the layer's output before layer_scalar
    // Gemma-4's MoE block beside the dense MLP (routing, scores, experts above).
    std::vector<T> routerIn; ///< the router's proj input: norm(mid) · scale · h^-½
    std::vector<T>
        expertsOut; ///< the experts' combined output, post_feedforward_layernorm_2's input
    std::vector<T>
        ffnSum; ///< post_ffn_1(mlp) + post_ffn_2(experts): post_feedforward_layernorm's input
    // Qwen3-Next / Qwen3.5 (backward_qwen3next.cpp): the attention output gate, the shared
    // expert's sigmoid gate and the Gated DeltaNet.
    std::vector<T> outGate; ///< the output gate's logits [n, heads·d] (q_proj's second half)
    std::vector<T> ungated; ///< attention's context before the gate
    std::vector<T> sharedGate; ///< σ(shared_expert_gate(x)) [n]
    std::vector<T> sharedOut; ///< the shared expert's output before its gate [n, h]
    std::vector<T> mixed; ///< the conv's input, q|k|v [n, convDim]
    std::vector<T> convPre; ///< the conv's output before its SiLU [n, convDim]
    std::vector<T> qkUnit; ///< q and k per key head after the L2 norm [n, 2·keyDim]
    std::vector<T> z; ///< the gated norm's gate [n, valueDim]
    std::vector<T> decayIn; ///< a + dt_bias, the softplus's input [n, nv]
    std::vector<T> beta, decay; ///< β = σ(b) and g = −e^A_log · softplus(a + dt_bias) [n, nv]
    std::vector<T> states; ///< the delta rule's state before each token [n, nv, dk, dv]
    std::vector<T> core; ///< the rule's output, the gated norm's input [n, valueDim]
    std::vector<T> gatedCore; ///< the gated norm's output, out_proj's input [n, valueDim]
    // Kimi-Linear's KDA layers (backward_kimi.cpp) keep mixed (q|k|v projections), convPre,
    // qkUnit, decayIn (f_b(f_a(x)) + dt_bias), decay (the per-channel g), beta, states, core,
    // z (the output gate's logits) and gatedCore above, with the low-rank projections here.
    std::vector<T> decayLow; ///< f_a_proj's output [n, head_dim]
    std::vector<T> gateLow; ///< g_a_proj's output [n, head_dim]
    // Nemotron-H (backward_nemotron_h.cpp); its norm's output is xn1, a relu2 MLP's up
    // projection u and relu(u)² act, a relu2 expert's likewise in Expert::u and ::act.
    std::vector<T> proj; ///< the Mamba-2 in_proj output z ‖ xBC ‖ dt [n, width]
    // convPre (above): the conv's pre-activation [n, conv channels]
    std::vector<T> conv; ///< SiLU of it: x ‖ B ‖ C as the scan reads them
    std::vector<T> dt; ///< softplus(dt + dt_bias) [n, heads]
    std::vector<T> ssd; ///< the scan's output y + D·x [n, inner]
    std::vector<T> gatedOut; ///< the gated group norm's output, out_proj's input [n, inner]
    std::vector<T> latentIn; ///< the latent MoE's fc1_latent_proj output [n, latent]
    std::vector<T> latentSum; ///< its experts' combined output, fc2_latent_proj's input
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

/// Layer `l`'s per-expert gradients gathered into Llama-4's fused tensors (Llama4TextExperts:
/// gate_up_proj [E, H, 2I], gate the first I columns, and down_proj [E, I, H]), the per-expert
/// entries taken out of `grads`; nothing when one is missing (backward_llama4.cpp).
void packLlama4Experts(
    const model::ModelSpec& spec, int l, std::map<std::string, numerics::Tensor>& grads);

} // namespace day0::exec::detail
