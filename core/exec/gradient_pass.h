#pragma once

// Internal to core/exec: the gradient pass over one sequence (backward.h lossAndGradients). Its
// members live by concern: backward.cpp (reading the weights, the pass from the embedding to
// the loss and back, the public entry points), backward_layer.cpp (a decoder layer's forward
// and backward, standard attention), backward_mla.cpp (DeepSeek's multi-head latent
// attention), backward_ffn.cpp (gated MLPs and mixture-of-experts),
// backward_kimi.cpp (Kimi-Linear's KDA layers).

#include "exec/backward.h"
#include "exec/backward_ops.h"
#include "exec/backward_pass.h"
#include "exec/emulated_ops.h"
#include "exec/ops.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "numerics/float_formats.h"

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <type_traits>
#include <vector>

namespace day0::exec::detail {

/// DeepSeek-V4's weight table and RoPEs for its pass (backward_deepseek_v4.cpp).
struct DeepseekV4Context;

/// The tensor dtype of the compute type T (F64 for double, F32 for float).
template <typename T> constexpr DType computeType()
{
    return std::is_same_v<T, double> ? DType::F64 : DType::F32;
}

/// Tensors no gradient reaches by construction (backward.h untrainableParameter).
inline bool untrainable(const std::string& name) { return untrainableParameter(name); }

/// True for the weights an emulated engine forward reads as stored, unrounded: the Gated
/// DeltaNet's (Qwen3-Next, Qwen3.5) and Mamba-2's (Nemotron-H) conv, decay, skip and gated-norm
/// weights, which only GEMMs and RMSNorms would round (backward_qwen3next.cpp).
bool emulatedAsStored(const model::ModelSpec& spec, const std::string& name);

/// One gradient pass in T (double: fp64, float: fp32): a forward that keeps each op's inputs,
/// the cross-entropy, and the backward of every layer in reverse, op by op (backward_ops.h).
/// Used once, by one thread.
template <typename T> class GradientPass {
public:
    GradientPass(const model::ModelSpec& spec, const GradientOptions& options, std::stop_token stop)
        : m_spec(spec)
        , m_stop(std::move(stop))
        , m_progress(options.progress)
        , m_tpSum(options.tpSum)
    {
        m_acts.enabled = options.activations;
        m_acts.inject = options.inject;
        m_rounded.insert(options.roundedLayers.begin(), options.roundedLayers.end());
        m_roundedTo = options.roundedTo;
        m_mode = options.emulated;
        m_vocabTotal = options.vocabTotal;
        m_vocabStart = options.vocabStart;
        m_tpMax = options.tpMax;
        m_engineNorms = options.engineNorms;
    }

    /// Reads (converting where needed) every weight the model needs and zeroes the gradients.
    Result<void> init(const std::map<std::string, numerics::Tensor>& weights);

    /// The loss of `ids` against `targets` and its gradients.
    Result<GradientResult> run(
        std::span<const std::int64_t> ids, std::span<const std::int64_t> targets);

    /// Layer `l`'s multi-head latent attention alone, for the tests of its emulated rounding
    /// (backward_precision_test): its forward on a.xn1 ([n, h], positions 0..n-1) into `out`,
    /// keeping its state in `a`, then its backward from `dout`: dxn1 accumulated, the weight
    /// gradients in gradient(). After init().
    Result<void> mlaBlock(int l, LayerActivations<T>& a, T* out, const T* dout, T* dxn1)
    {
        const auto n = std::int64_t(a.xn1.size()) / m_spec.hiddenSize;
        m_positions.resize(std::size_t(n));
        for (std::int64_t i = 0; i < n; ++i) {
            m_positions[std::size_t(i)] = i;
        }
        mlaForward(l, a, out);
        return mlaBackward(l, a, dout, dxn1);
    }
    /// Layer `l` alone, for the tests of its emulated rounding (backward_bf16_frontier_test):
    /// its forward from `hidden` ([n, h], positions 0..n-1; replaced by the layer's output),
    /// then its backward from `dh` (replaced by the gradient of the layer's input); the weight
    /// gradients in gradient(), what the forward kept in activations(l). After init().
    Result<void> layerBlock(int l, std::vector<T>& hidden, std::vector<T>& dh)
    {
        const auto n = std::int64_t(hidden.size()) / m_spec.hiddenSize;
        m_positions.resize(std::size_t(n));
        for (std::int64_t i = 0; i < n; ++i) {
            m_positions[std::size_t(i)] = i;
        }
        m_layers.resize(std::size_t(m_spec.numLayers));
        DAY0_TRY(gemma4()     ? gemma4LayerForward(l, hidden)
                : nemotronH() ? nemotronHLayerForward(l, hidden)
                              : layerForward(l, hidden));
        return gemma4()   ? gemma4LayerBackward(l, dh)
            : nemotronH() ? nemotronHLayerBackward(l, dh)
                          : layerBackward(l, dh);
    }
    /// What layer `l`'s forward kept (after layerBlock or run).
    [[nodiscard]] const LayerActivations<T>& activations(int l) const
    {
        return m_layers.at(std::size_t(l));
    }
    /// The weight `name` as the pass computes with it (rounded when emulated); null if absent.
    [[nodiscard]] const T* weight(const std::string& name) const { return m_p.value(name); }
    /// The gradient accumulated for parameter `name`.
    [[nodiscard]] const std::vector<T>& gradient(const std::string& name) const
    {
        return m_p.grads.at(name);
    }

private:
    /// lm_head.weight, or the embedding table it is tied to.
    std::string headWeight() const
    {
        return m_p.values.contains("lm_head.weight") ? "lm_head.weight" : embedModule() + ".weight";
    }

    /// Layer `l`'s attention module (Nemotron-H's: its mixer).
    std::string attn(int l) const
    {
        return nemotronH() ? fmt::format("{}.layers.{}.mixer", m_spec.layout.textPrefix, l)
                           : fmt::format("model.layers.{}.self_attn", l);
    }

    /// The embedding's module: "model.embed_tokens", Nemotron-H's "backbone.embeddings".
    std::string embedModule() const
    {
        return nemotronH() ? m_spec.layout.textPrefix + ".embeddings" : "model.embed_tokens";
    }

    /// The final norm's module: "model.norm", Nemotron-H's "backbone.norm_f".
    std::string finalNormModule() const
    {
        return nemotronH() ? m_spec.layout.textPrefix + ".norm_f" : "model.norm";
    }

    /// Rounds a gradient to the emulated format of GradientOptions::roundedLayers.
    void roundTo(std::vector<T>& values) const
    {
        for (T& v : values) {
            v = T(numerics::roundToFormat(float(v), m_roundedTo));
        }
    }

    // --- emulated low precision (GradientOptions::emulated); the plain kernels otherwise ---

    /// True when the pass emulates a low-precision format.
    [[nodiscard]] bool emulated() const { return std::is_same_v<T, float> && isEmulated(m_mode); }

    /// Rounds `count` activations or activation gradients at `data` to the emulated format.
    void round(T* data, std::int64_t count) const
    {
        if constexpr (std::is_same_v<T, float>) {
            roundActivations({ data, std::size_t(count) }, m_mode);
        } else {
            (void)data;
            (void)count;
        }
    }
    void round(std::vector<T>& values) const { round(values.data(), std::int64_t(values.size())); }

    /// y[n, out] = x · Wᵀ + b, emulated as the engine's forward emulates a projection.
    void project(const T* x, const T* w, const T* b, T* y, std::int64_t n, std::int64_t in,
        std::int64_t out) const
    {
        if constexpr (std::is_same_v<T, float>) {
            emulatedLinear(x, w, b, y, n, in, out, m_mode, Fp8Scaling::PerTensor);
        } else {
            linear<T>(x, w, b, y, n, in, out);
        }
    }

    /// RMSNorm over rows of `dim`, emulated as the engine's forward emulates it; `eps` the
    /// norm's own (the MLA latents'), else rms_norm_eps.
    void norm(const T* x, const T* w, T* y, std::int64_t rows, std::int64_t dim,
        std::optional<double> eps = std::nullopt) const
    {
        if constexpr (std::is_same_v<T, float>) {
            emulatedRmsNorm(x, w, y, rows, dim, eps.value_or(m_spec.normEps), m_mode);
        } else {
            rmsNorm<T>(x, w, y, rows, dim, eps.value_or(m_spec.normEps));
        }
    }

    /// RoPE in place on x[tokens, heads, headDim], emulated as HF's eager rotary.
    void rotate(T* x, std::int64_t heads, std::int64_t headDim) const
    {
        const auto tokens = std::int64_t(m_positions.size());
        if constexpr (std::is_same_v<T, float>) {
            emulatedRope(x, tokens, heads, headDim, m_positions, m_rope, {}, m_mode);
        } else {
            applyRope<T>(x, tokens, heads, headDim, m_positions, m_rope);
        }
    }

    /// The rounding causalAttentionForward applies to scores and probabilities (none unless
    /// emulated).
    [[nodiscard]] std::function<void(T*, std::int64_t)> attentionRounding() const
    {
        if (!emulated()) {
            return {};
        }
        return [this](T* data, std::int64_t count) { round(data, count); };
    }

    /// Layer `l`'s attention mask beyond causality: its sliding window (gpt-oss's sliding
    /// layers), its attention chunk (Llama-4's RoPE layers) and its learned sinks
    /// (`self_attn.sinks`), when it has them.
    [[nodiscard]] AttentionMask<T> attentionMask(int l) const
    {
        AttentionMask<T> mask;
        mask.window = m_spec.layers[std::size_t(l)].slidingWindow;
        mask.chunk = m_spec.layers[std::size_t(l)].attentionChunk; // Llama-4's RoPE layers
        mask.sinks = m_p.value(attn(l) + ".sinks");
        return mask;
    }

    /// Sums `count` values at `data` over the TP group (nothing without tensor parallelism).
    Result<void> tpSum(T* data, std::int64_t count) const
    {
        return m_tpSum ? m_tpSum(data, count, computeType<T>()) : success();
    }

    /// Sums `count` doubles at `data` over the TP group (nothing without tensor parallelism).
    Result<void> tpSumWide(double* data, std::int64_t count) const
    {
        return m_tpSum ? m_tpSum(data, count, DType::F64) : success();
    }

    /// With tensor parallelism each rank's per-head q/k norm gradients cover its own heads only.
    Result<void> sumHeadNormGradients();

    // --- the vocabulary's ends, whole or vocab-parallel (backward_vocab.cpp) ---

    /// hidden[tokens, h] ← the embedding rows of `ids` (vocab-parallel: looked up where held,
    /// summed over the group).
    Result<void> embed(std::span<const std::int64_t> ids, std::vector<T>& hidden);
    /// Adds dh's rows into the embedding gradient of the rows this rank holds.
    void embedBackward(std::span<const std::int64_t> ids, const std::vector<T>& dh);
    /// The mean cross-entropy of `logits` (this rank's columns when vocab-parallel) against
    /// `targets`, its gradient into `dlogits`.
    Result<double> crossEntropyOf(const std::vector<T>& logits,
        std::span<const std::int64_t> targets, std::vector<T>& dlogits, std::int64_t& counted);

    // --- a decoder layer (backward_layer.cpp) ---

    Result<void> layerForward(int l, std::vector<T>& hidden);
    Result<void> layerBackward(int l, std::vector<T>& dh);
    /// The bytes of every layer's saved tensors plus `extra` elements of T.
    [[nodiscard]] std::int64_t keptBytes(std::size_t extra) const;

    // --- standard attention (MHA/GQA/MQA, biases, per-head QK-norm; backward_layer.cpp) ---

    void attentionForward(int l, LayerActivations<T>& a, T* out);
    void attentionBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);

    // --- DeepSeek multi-head latent attention (backward_mla.cpp) ---

    /// MLA's forward on a.xn1 into `out` [n, h] (a partial sum under tensor parallelism: o_proj
    /// is row-parallel by heads), keeping its state in `a`.
    void mlaForward(int l, LayerActivations<T>& a, T* out);
    /// Its backward: `dout` [n, h] → dxn1 accumulated (q_a/kv_a's, or q_proj's and kv_a's,
    /// input gradients summed once), weight gradients accumulated. Under tensor parallelism
    /// (`m_spec` holding this rank's heads, q_b_proj/q_proj and kv_b_proj cut by heads, o_proj
    /// by its input columns) the input gradients of the head-split blocks (the normed q latent,
    /// or q_proj's share of dxn1, the normed kv latent and the shared rope key) are summed over
    /// the group before the replicated q_a/kv_a projections and their norms see them, so those
    /// gradients and dxn1 come out whole and the same on every rank.
    Result<void> mlaBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);

    // --- Gemma-4's decoder layer and attention (backward_gemma4.cpp) ---

    /// The RoPEs of Gemma-4's full and sliding layers and its attention scale (1).
    Result<void> gemma4Init();
    Result<void> gemma4LayerForward(int l, std::vector<T>& hidden);
    Result<void> gemma4LayerBackward(int l, std::vector<T>& dh);
    void gemma4AttentionForward(int l, LayerActivations<T>& a, T* out);
    void gemma4AttentionBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);
    /// The MoE block beside the dense MLP, fed the residual `a.mid`: its router and experts into
    /// `out` = post_feedforward_layernorm_2(experts).
    void gemma4MoeForward(int l, LayerActivations<T>& a, T* out);
    /// Its backward from `dexperts` (the experts' combined output's gradient): dmid accumulated
    /// through pre_feedforward_layernorm_2 and the router's weightless norm.
    void gemma4MoeBackward(int l, const LayerActivations<T>& a, const T* dexperts, T* dmid);
    [[nodiscard]] bool gemma4() const { return m_spec.family == model::Family::Gemma4; }

    // --- GLM-5's DSA indexer and MiniMax-M2's q/k norms across heads (backward_glm.cpp) ---

    /// MiniMax-M2: a.q / a.k ← RMSNorm over each token's whole q (k) projection; a.qPre / a.kPre
    /// keep the projections.
    void acrossHeadsNormForward(int l, LayerActivations<T>& a);
    /// Its backward: dq / dk (of the normed q and k) become the projections' gradients; the
    /// norms' weight gradients accumulated.
    void acrossHeadsNormBackward(
        int l, const LayerActivations<T>& a, std::vector<T>& dq, std::vector<T>& dk);
    /// a.selection ← the keys layer `l`'s indexer keeps for each query (from a.xn1 and
    /// a.qaNormed), the previous layer's for a layer without its own indexer, none without DSA.
    /// No gradient flows back through the discrete choice.
    void dsaSelect(int l, LayerActivations<T>& a);

    // --- MiniMax-M3's sparse attention (backward_minimax_m3.cpp) ---

    /// On an MSA layer: a.selection ← the keys of the blocks each query keeps, per KV group
    /// [kvHeads, n, topK · blockSize] (the index branch on a.xn1 and selectKeyBlocks, as
    /// Forward::blockSparseAttention), the kept blocks kept as `<attn>.indexer#topk` with the
    /// routing; `mask` then restricts each group's heads to them. No gradient flows back through
    /// the discrete choice: the index branch's weights keep their zero gradients.
    void msaSelect(int l, LayerActivations<T>& a, AttentionMask<T>& mask);

    // --- Qwen3-Next / Qwen3.5 (backward_qwen3next.cpp) ---

    /// Layer `l`'s token mixer's anchor: "model.layers.L.linear_attn" for a Gated DeltaNet
    /// layer, else "model.layers.L.self_attn".
    [[nodiscard]] std::string mixerAnchor(int l) const;
    /// The Gated DeltaNet's forward on a.xn1 into `out` [n, h]: the in-projections, the causal
    /// depthwise conv1d + SiLU from a zero window, the L2-normed q/k, β and the decay g, the
    /// gated delta rule token after token from a zero state (gatedDeltaRecurrent; the engine's
    /// chunked form is the same rule), the gated RMSNorm with silu(z), out_proj; keeps in `a`
    /// what the backward reads (the state before each token among it).
    void deltaNetForward(int l, LayerActivations<T>& a, T* out);
    /// Its backward, the rule in reverse token by token: `dout` [n, h] → dxn1 accumulated, the
    /// weight gradients (in-projections, conv1d, A_log, dt_bias, norm, out_proj) accumulated.
    void deltaNetBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);
    /// A gated attention's q_proj output [n, heads, 2·d] (each head's query, then its output
    /// gate) split into the queries `q` [n, heads, d] and a.outGate.
    void splitQueryGate(const std::vector<T>& both, std::vector<T>& q, LayerActivations<T>& a);
    /// a.ctx ← a.ctx · σ(a.outGate), the ungated context kept in a.ungated.
    void applyOutputGate(LayerActivations<T>& a);
    /// The gate's backward: `dctx` (the gated context's gradient) becomes the ungated
    /// context's; returns the gate logits' gradient.
    std::vector<T> outputGateBackward(const LayerActivations<T>& a, std::vector<T>& dctx) const;
    /// [dq | dgate] per head: q_proj's output gradient of a gated attention.
    [[nodiscard]] std::vector<T> joinQueryGate(
        const std::vector<T>& dq, const std::vector<T>& dgate) const;
    /// The shared expert's sigmoid gate (Qwen2-MoE's shared_expert_gate): `shared` [n, h] ←
    /// σ(a.xn2 · wᵀ) · shared, the ungated output and the gate kept in `a`.
    void sharedGateForward(int l, LayerActivations<T>& a, std::vector<T>& shared);
    /// Its backward from the block's output gradient `dout`: returns the shared expert's own
    /// output gradient; the gate's input gradient joins dxn2, its weight's gradient accumulated.
    std::vector<T> sharedGateBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn2);

    // --- Llama-4's text model (backward_llama4.cpp) ---

    /// After q/k/v's projections: a RoPE layer's rotation of q and k, then (use_qk_norm) their
    /// weightless per-head RMS norm, the rotated values kept in a.qPre / a.kPre; a NoPE layer's
    /// attention temperature on the queries (attn_temperature_tuning).
    void llama4QueryKeyForward(int l, LayerActivations<T>& a);
    /// Its backward: dq / dk (of what attention read) become the projections' gradients.
    void llama4QueryKeyBackward(
        int l, const LayerActivations<T>& a, std::vector<T>& dq, std::vector<T>& dk);
    /// Llama4TextMoe on a.xn2: the top-k of the router's raw logits, each chosen expert run on
    /// the token's row times σ(logit) (the score scales the expert's input), plus the shared
    /// expert.
    void llama4MoeForward(int l, LayerActivations<T>& a, T* out);
    void llama4MoeBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn2);
    [[nodiscard]] bool llama4() const { return m_spec.family == model::Family::Llama4; }

    // --- Kimi-Linear's Kimi Delta Attention (backward_kimi.cpp) ---

    /// The KDA layer's forward on a.xn1 into `out` [n, h] (kimi_delta.cpp's): q/k/v projections,
    /// each its own causal depthwise conv1d + SiLU from a zero window, L2-normed q/k, q scaled
    /// by head_dim^-½, the per-channel decay −e^A_log · softplus(f_b(f_a(x)) + dt_bias),
    /// β = σ(b_proj(x)), the rule token after token from a zero state (kimiDeltaRecurrent; the
    /// engine's chunked prefill is the same rule), o_norm times σ(g_b(g_a(x))), o_proj; keeps in
    /// `a` what the backward reads. Kimi-K3's safe gate (gate_lower_bound lb: g = lb ·
    /// σ(e^A_log · (f + dt_bias))) and full-rank output gate (σ(g_proj(x))) when set.
    void kimiDeltaForward(int l, LayerActivations<T>& a, T* out);
    /// Its backward, the rule in reverse (delta_rule_backward.h, per-channel decay): `dout`
    /// [n, h] → dxn1 accumulated, every KDA weight's gradient accumulated.
    void kimiDeltaBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);

    // --- Nemotron-H's layers (backward_nemotron_h.cpp) ---

    /// Its attention scale (head_dim^-½, no RoPE) and its sigmoid router.
    Result<void> nemotronHInit();
    /// One block: hidden + mixer(norm(hidden)), the mixer Mamba-2, attention (attentionForward
    /// under the mixer's name), the relu2 MLP or the MoE.
    Result<void> nemotronHLayerForward(int l, std::vector<T>& hidden);
    Result<void> nemotronHLayerBackward(int l, std::vector<T>& dh);
    /// The Mamba-2 mixer on a.xn1 into `out` [n, h], from zero conv and SSM states.
    void mamba2Forward(int l, LayerActivations<T>& a, T* out);
    /// Its backward from `dout`: dxn1 accumulated, the weight gradients accumulated.
    void mamba2Backward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);
    /// The ungated MLP down(relu(up(x))²) of `module` over `rows` rows of width `in`: `u` the up
    /// projection, `act` relu(u)².
    void relu2Forward(const std::string& module, const T* x, std::int64_t rows, std::int64_t in,
        std::int64_t inter, std::vector<T>& u, std::vector<T>& act, T* out);
    void relu2Backward(const std::string& module, const T* x, std::int64_t rows, std::int64_t in,
        std::int64_t inter, const std::vector<T>& u, const std::vector<T>& act, const T* dout,
        T* dx);
    /// Nemotron-3's MoE on a.xn1: the sigmoid router with its selection bias, relu2 experts (with
    /// moe_latent_size between fc1_latent_proj and fc2_latent_proj) and the shared expert.
    void nemotronHMoeForward(int l, LayerActivations<T>& a, T* out);
    void nemotronHMoeBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn1);
    [[nodiscard]] bool nemotronH() const { return m_spec.family == model::Family::NemotronH; }

    // --- DeepSeek-V4 (backward_deepseek_v4.cpp) ---

    [[nodiscard]] bool deepseekV4() const { return m_spec.family == model::Family::DeepseekV4; }
    /// Its RoPEs and the weights as its forward's helpers read them (after the weights are read).
    Result<void> deepseekV4Init(const std::map<std::string, numerics::Tensor>& weights);
    /// Its whole pass: the hyper-connection streams through every block and hc_head, the loss,
    /// and back.
    Result<GradientResult> deepseekV4Run(
        std::span<const std::int64_t> ids, std::span<const std::int64_t> targets);

    // --- gated MLPs and mixture-of-experts (backward_ffn.cpp) ---

    void mlpForward(const std::string& module, const T* x, std::int64_t rows, std::int64_t inter,
        std::vector<T>& g, std::vector<T>& u, std::vector<T>& act, T* out);
    void mlpBackward(const std::string& module, const T* x, std::int64_t rows, std::int64_t inter,
        const std::vector<T>& g, const std::vector<T>& u, const std::vector<T>& act, const T* dout,
        T* dx);
    void moeForward(int l, LayerActivations<T>& a, T* out);
    /// Routes `router`'s logits [n, experts] as the engine routes (router.h, in double, `bias`
    /// added for the choice where the router has one) and keeps what a forward dump records of
    /// the choice (GradientResult::routing): the logits as `<router>`, a sigmoid router's
    /// σ(logit) + bias as `<router>#score`, the chosen experts as `<router>#topk`.
    Routing routeAndKeep(const std::string& router, const std::vector<double>& logits,
        std::int64_t n, const double* bias);
    /// Under tensor parallelism every rank routes the same way (replicated router) and runs its
    /// slice of each expert: the experts' outputs `x.y` are partial sums, so are the combine
    /// weights' gradients and the experts' input gradients, which are summed before the
    /// router's (replicated) share joins dxn2.
    Result<void> moeBackward(int l, const LayerActivations<T>& a, const T* dout, T* dxn2);
    /// The router logits' gradient [n, experts] from the combine weights' (`dweight` [n, k]):
    /// w_j = r·s_j / D over the chosen j (D = Σ s (+ ε for the sigmoid) with norm_topk_prob, else
    /// 1), ∂L/∂s_j = r·(dw_j / D − Σ_i dw_i·s_i / D²), then through the softmax or the sigmoid.
    std::vector<T> routerLogitsBackward(const LayerActivations<T>& a,
        const std::vector<double>& dweight, std::int64_t n, bool sigmoid) const;

    const model::ModelSpec& m_spec;
    std::stop_token m_stop;
    Progress* m_progress;
    std::function<Result<void>(void*, std::int64_t, DType)> m_tpSum;
    ParameterSet<T> m_p;
    std::map<std::string, numerics::Tensor> m_converted;
    ActivationGrads<T> m_acts;
    std::vector<LayerActivations<T>> m_layers;
    std::vector<std::pair<std::string, numerics::Tensor>> m_routing; ///< routeAndKeep's
    std::vector<std::int64_t> m_positions;
    Rope m_rope;
    Rope m_slidingRope; ///< Gemma-4's sliding layers' (m_rope: its full layers')
    Activation m_activation = Activation::Silu; ///< the gated MLPs' (gpt-oss: its own clamp)
    double m_scale = 1.0;
    RouterConfig m_router;
    std::set<int> m_rounded;
    DType m_roundedTo = DType::BF16;
    PrecisionMode m_mode = PrecisionMode::F32; ///< GradientOptions::emulated
    std::int64_t m_vocabTotal = 0; ///< GradientOptions::vocabTotal (0: the vocabulary whole)
    std::int64_t m_vocabStart = 0;
    std::function<Result<void>(void*, std::int64_t, DType)> m_tpMax;
    bool m_engineNorms = false; ///< GradientOptions::engineNorms
    std::shared_ptr<const DeepseekV4Context> m_v4; ///< DeepSeek-V4's (deepseekV4Init)
};

} // namespace day0::exec::detail
