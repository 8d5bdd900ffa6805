#pragma once

// Internal to core/exec: the fp32 forward of one rank of a TP/PP/EP/DP plan. Each rank holds
// the slices core/checkpoint assigns it; tensor-parallel linears reduce over the TP group,
// routed experts exchange tokens over the stage's expert group with all-to-all(v). With sequence
// parallelism the residual stream between TP regions is split by tokens over the TP group:
// reduce-scatter ends a row-parallel region, all-gather starts a column-parallel one.

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "comm/communicator.h"
#include "exec/backend_dispatch.h"
#include "exec/deepseek_v4.h"
#include "exec/forward.h"
#include "exec/ops.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "model/model_spec.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace day0::parallel::detail {

/// The communicators one rank computes with.
struct RankGroups {
    comm::Communicator* tp = nullptr; ///< the TP peers of this rank (same stage, same replica)
    comm::Communicator* expert = nullptr; ///< every rank of this stage (dp × tp), EP × ETP × EDP
};

/// One sequence's KV cache on this rank (its local heads of its stage's layers), and the
/// recurrent states of its local heads in the stage's Gated DeltaNet, KDA and Mamba-2 layers.
struct ShardCache {
    std::vector<std::vector<float>> k; ///< per layer of the model (empty outside the stage)
    std::vector<std::vector<float>> v;
    /// Per layer: the causal conv's last kernel − 1 inputs [kernel − 1, local channels] (KDA:
    /// the q, k and v windows one after the other).
    std::vector<std::vector<float>> window;
    /// Per layer: the delta rule's [local value heads, dk, dv] or the SSM's [local heads, P, N].
    std::vector<std::vector<float>> state;
    /// Per layer: MiniMax-M3's index keys [capacity, sparse_index_dim] (replicated).
    std::vector<std::vector<float>> indexKeys;
    /// Per layer: DeepSeek-V4's replicated K=V, compressor and indexer state (deepseek_v4.cpp).
    std::vector<exec::detail::DeepseekV4Cache<float>::Layer> v4;
    std::int64_t capacity = 0;
};

/// One sequence's rows in a batched step (ParallelForward::layersBatch): rows [offset, offset +
/// n) of the step are its tokens at positions [start, start + n), cached in `cache`.
struct StepSegment {
    ShardCache* cache = nullptr;
    std::int64_t offset = 0;
    std::int64_t n = 0;
    std::int64_t start = 0;
};

/// The forward of one rank: embedding (first stage), its stage's decoder layers, final norm and
/// head (last stage). Not thread-safe; every call is collective over the rank's groups.
class ParallelForward {
public:
    ParallelForward(const model::ModelSpec& spec, const exec::detail::WeightTable& weights,
        const checkpoint::ShardLayout& layout, const checkpoint::RankCoord& coord,
        RankGroups groups);

    /// Checks that the plan splits the heads, builds rope tables.
    Result<void> init();
    /// A KV cache for `capacity` tokens of this stage's layers.
    [[nodiscard]] ShardCache newCache(std::int64_t capacity) const;
    /// Rows of the residual stream this rank holds for `n` tokens: n, or with sequence
    /// parallelism ⌈n / tp⌉ (TP rank r holds tokens [r·rows, (r + 1)·rows), the last padded).
    [[nodiscard]] std::int64_t localRows(std::int64_t n) const;
    /// Vocab-parallel embedding: hidden [localRows(n), h].
    Result<std::vector<float>> embed(std::span<const std::int64_t> ids);
    /// This stage's decoder layers on hidden [localRows(n), h] for the n tokens at positions
    /// [start, start + n).
    Result<void> layers(ShardCache& cache, std::vector<float>& hidden, std::int64_t n,
        std::int64_t start, std::stop_token stop);
    /// This stage's decoder layers for several sequences' rows at once: hidden [localRows(n), h]
    /// holds the segments' rows one after another (n their sum). Every linear, norm and expert
    /// runs once over all the rows; each segment's rows write and attend over its own cache.
    /// Refused for a model batchRefusal names.
    Result<void> layersBatch(
        std::span<const StepSegment> segments, std::vector<float>& hidden, std::stop_token stop);
    /// Why layersBatch does not run `spec` (empty: it does): layers that keep a state per
    /// sequence the batched step does not split (recurrent mixers, sparse-attention indexers)
    /// or that run a block of their own (Nemotron-H, Gemma-4, DeepSeek-V4).
    [[nodiscard]] static std::string batchRefusal(const model::ModelSpec& spec);
    /// Final norm and vocab-parallel head of hidden [localRows(n), h]: logits [n, vocab] on every
    /// TP rank.
    Result<std::vector<float>> head(const std::vector<float>& hidden, std::int64_t n);

    [[nodiscard]] std::pair<std::int64_t, std::int64_t> stageLayers() const { return m_layers; }

    /// Gemma-4's per-layer inputs of the current step [n, layers, width] (gemma4.cpp): computed
    /// by the first stage's embed, sent with the hidden rows to the later stages. Empty for
    /// every other model.
    [[nodiscard]] std::vector<float>& perLayerInputs() { return m_perLayerInputs; }
    /// Floats of perLayerInputs() for a step of n tokens (0: none to send).
    [[nodiscard]] std::int64_t perLayerInputFloats(std::int64_t n) const;
    /// Floats per local row of the residual stream between stages: hidden_size, or
    /// DeepSeek-V4's hc_mult streams of it.
    [[nodiscard]] std::int64_t hiddenWidth() const;
    /// The token ids of the current step: set by the first stage's embed, received by the later
    /// stages when needsStepIds() (DeepSeek-V4's hash-routed layers read them).
    [[nodiscard]] std::vector<std::int64_t>& stepIds() { return m_stepIds; }
    [[nodiscard]] bool needsStepIds() const;

    /// Runs the float operators on `backend` (per operator falling back to the CPU); null: the
    /// CPU reference.
    void setBackend(exec::Backend* backend) { m_ops = exec::detail::BackendDispatch(backend); }
    /// Where this rank's operators ran so far.
    [[nodiscard]] exec::DispatchReport dispatchReport() const { return m_ops.report(); }
    /// Called before the forward reads a module's weights: kEmbedPhase before the embedding, l
    /// before decoder layer l, numLayers before the final norm and head; a streamed rank fills
    /// the weight table there (rank_stream.h). An error stops the step. Unset: the table holds
    /// every weight of the rank.
    void setPhaseHook(std::function<Result<void>(int phase)> hook)
    {
        m_phaseHook = std::move(hook);
    }
    static constexpr int kEmbedPhase = -1;

private:
    /// m_phaseHook(phase) when set.
    Result<void> enterPhase(int phase);
    const float* weight(const std::string& name) const;
    /// y[n, out] = x · Wᵀ with the rank's slice, bias included unless `skipBias`.
    Result<void> linearOp(const std::string& module, const float* x, float* y, std::int64_t n,
        std::int64_t in, std::int64_t out, bool skipBias = false) const;
    Result<void> reduceTp(float* data, std::int64_t count);
    /// The end of a row-parallel region: the TP ranks' partial sums [n, h] reduced (all-reduce,
    /// or with sequence parallelism reduce-scatter to this rank's rows), `biasModule`'s bias added
    /// once, into `out` [localRows(n), h]. `partial` is scratch.
    Result<void> finishRowParallel(std::vector<float>& partial, std::int64_t n,
        const std::string& biasModule, std::vector<float>& out);
    /// The input of a column-parallel region: every token's row of `local` [localRows(n), h]
    /// (all-gathered into `scratch` with sequence parallelism, else `local` itself).
    Result<const float*> allTokens(
        const std::vector<float>& local, std::int64_t n, std::vector<float>& scratch);
    /// The first error of the rank's backend, if any.
    [[nodiscard]] Result<void> backendStatus() const;
    Result<void> addBias(const std::string& module, float* y, std::int64_t n, std::int64_t out);
    /// The decoder layers over m_segments (set, with m_positions, by layers and layersBatch).
    Result<void> runLayers(std::vector<float>& hidden, std::int64_t n, std::stop_token stop);
    /// Attention of the local heads over every token's row `x` [n, h] of the step's segments
    /// (m_segments: each writes and reads its own cache); `out` [n, h] gets this rank's partial
    /// o_proj sums (finishRowParallel reduces them and adds the bias).
    Result<void> attention(int layer, const float* x, float* out, std::int64_t n);
    /// The same for multi-head latent attention.
    Result<void> mla(int layer, const float* x, float* out, std::int64_t n);
    /// Gated DeltaNet (Qwen3-Next, Qwen3.5) over this rank's key and value heads; `out` [n, h]
    /// gets the partial out_proj sums (hybrid.cpp).
    Result<void> gatedDeltaNet(
        int layer, ShardCache& cache, const float* x, float* out, std::int64_t n);
    /// Kimi Delta Attention (Kimi-Linear) over this rank's heads; `out` [n, h] gets the partial
    /// o_proj sums (hybrid.cpp).
    Result<void> kimiDelta(
        int layer, ShardCache& cache, const float* x, float* out, std::int64_t n);
    /// The Mamba-2 mixer over this rank's heads and groups; `out` gets partial out_proj sums.
    Result<void> mamba2(int layer, ShardCache& cache, const float* x, float* out, std::int64_t n);
    /// Nemotron-H's non-gated relu² MLP on rows of `width` (0: hidden), up column-sliced, down
    /// row-sliced (partial sum).
    Result<void> relu2Partial(const std::string& module, const float* x, float* out, std::int64_t n,
        std::int64_t inter, std::int64_t width = 0);
    /// Nemotron-H's layers: one norm and one mixer (M, *, -) per layer (hybrid.cpp).
    Result<void> nemotronHLayer(
        int layer, ShardCache& cache, std::vector<float>& hidden, std::int64_t n);
    /// Soft-caps final logits in place when the model has final_logit_softcapping.
    void softCap(std::vector<float>& logits) const;
    /// Gemma-4's RoPE per layer type, the KV source of each layer (a KV-shared layer reads its
    /// source's cache, which must lie in this stage), and the local head counts (gemma4.cpp).
    Result<void> gemma4Init();
    /// Gemma-4's per-layer inputs of `ids` from the scaled embedding of every token `embedded`
    /// [n, h] into m_perLayerInputs.
    Result<void> gemma4PerLayerInputs(
        std::span<const std::int64_t> ids, const float* embedded, std::int64_t n);
    /// One Gemma-4 decoder layer on hidden [localRows(n), h]: sandwich norms around the
    /// attention and the MLP, the per-layer input branch, layer_scalar.
    Result<void> gemma4Layer(int layer, ShardCache& cache, std::vector<float>& hidden,
        std::int64_t n, std::int64_t start);
    /// MiniMax-M3's sparse attention (MSA) over the local heads: the replicated index branch
    /// selects key blocks per KV group, each local group attends over its own (minimax_m3.cpp);
    /// `out` gets the partial o_proj sums.
    Result<void> blockSparseAttention(int layer, ShardCache& cache, const float* x, float* out,
        std::int64_t n, std::int64_t start);
    /// Gemma-4's MoE block of a layer beside its MLP: `branch` [localRows(n), h] holds the
    /// reduced MLP output and becomes post_feedforward_layernorm_1(branch) plus the normed
    /// routed experts of `hidden` (the residual stream).
    Result<void> gemma4Experts(
        int layer, const std::vector<float>& hidden, std::int64_t n, std::vector<float>& branch);
    /// Gemma-4 attention of the local heads (q/k norms, v_norm, the layer type's RoPE, the KV
    /// source's cache); `out` gets the partial o_proj sums.
    Result<void> gemma4Attention(int layer, ShardCache& cache, const float* x, float* out,
        std::int64_t n, std::int64_t start);
    /// Local KV heads of a layer: kv / tp, or 1 (replicated) when tp exceeds the KV heads.
    [[nodiscard]] std::int64_t localKvHeads(const model::LayerSpec& layer) const;
    /// The embedding table ("model.embed_tokens.weight", Nemotron-H's "backbone.embeddings…").
    [[nodiscard]] std::string embedName() const;
    /// The final norm's weight ("model.norm.weight", Nemotron-H's "backbone.norm_f.weight").
    [[nodiscard]] std::string finalNormName() const;
    /// "model.layers.7", or Nemotron-H's "backbone.layers.7".
    [[nodiscard]] std::string layerPrefix(int layer) const;
    /// The module of a layer's softmax attention: "….self_attn", Nemotron-H's "….mixer".
    [[nodiscard]] std::string attentionModule(int layer) const;
    /// Gated MLP with column-sliced gate/up and row-sliced down; the output is a partial sum.
    /// `width`: the rows' width (0: hidden; Kimi-K3's latent experts run narrower).
    Result<void> mlpPartial(const std::string& module, const std::string& gate,
        const std::string& up, const std::string& down, const float* x, float* out, std::int64_t n,
        std::int64_t inter, std::int64_t width = 0);
    /// The MoE block's module names (Nemotron-H's mixer, router and relu² experts, or
    /// exec::detail::layerNames).
    [[nodiscard]] exec::detail::LayerNames moeNames(int layer) const;
    /// One routed expert's slice on rows x [n, width]: gated (gate/up/down, width h) or relu²
    /// (up/down).
    Result<void> expertMlpPartial(const std::string& module, const exec::detail::LayerNames& names,
        const float* x, float* out, std::int64_t n, std::int64_t width, std::int64_t inter);
    /// The MoE block's partial output [n, h] (routed tokens on their owning TP rank, shared
    /// experts TP-sliced), to be reduced by finishRowParallel.
    Result<void> moe(int layer, const float* x, float* out, std::int64_t n);
    /// Routed experts of this rank's TP-owned tokens, dispatched and combined with all-to-all(v);
    /// `acc` [n, h] receives the weighted sums of the owned tokens.
    /// The router reads x [n, h]; the experts read `rowsIn` [n, width] (x, or the latent rows),
    /// `acc` [n, width].
    Result<void> routedExperts(int layer, const float* x, std::int64_t n, const float* rowsIn,
        std::int64_t width, float* acc);
    /// The dispatch and combine of routedExperts for a routing already made (on every rank).
    Result<void> dispatchExperts(int layer, const exec::Routing& routing, std::int64_t n,
        const float* rowsIn, std::int64_t width, float* acc);
    /// DeepSeek-V4: the o_groups split, the two RoPEs (deepseek_v4.cpp).
    Result<void> deepseekV4Init();
    /// One DeepSeek-V4 block on the streams hidden [localRows(n), hc_mult, h]: each
    /// sub-block's replicated hyper-connection collapses this rank's rows, the attention (local
    /// heads and output groups, replicated K=V, compressors and indexer) or the MoE (experts
    /// over EP, the shared expert TP-sliced) runs on every token, the reduced output expands
    /// back into the streams.
    Result<void> deepseekV4Layer(int layer, ShardCache& cache, std::vector<float>& hidden,
        std::int64_t n, std::int64_t start);
    /// DeepSeek-V4's MoE partial output [n, h] of x [n, h].
    Result<void> deepseekV4Moe(int layer, const float* x, float* out, std::int64_t n);
    /// DeepSeek-V4's head: hc_head collapses the streams of this rank's rows into [rows, h].
    [[nodiscard]] std::vector<float> deepseekV4Collapse(
        const std::vector<float>& hidden, std::int64_t n) const;

    const model::ModelSpec& m_spec;
    const exec::detail::WeightTable& m_weights;
    checkpoint::ShardLayout m_layout;
    checkpoint::RankCoord m_coord;
    RankGroups m_groups;
    std::pair<std::int64_t, std::int64_t> m_layers;
    exec::Rope m_rope;
    double m_scale = 1.0;
    exec::Activation m_activation = exec::Activation::Silu;
    /// The clamped SwiGLU's limit (MiniMax-M3's swigluoai), 0: none.
    double m_swigluLimit = 0.0;
    exec::RouterConfig m_router;
    std::int64_t m_heads = 0; ///< local query heads
    std::int64_t m_kvHeads = 0; ///< local KV heads
    std::vector<std::int64_t> m_positions; ///< of the step's rows, segment after segment
    std::vector<StepSegment> m_segments; ///< the step's sequences (one outside layersBatch)
    bool m_sp = false; ///< sequence parallelism in effect (sp on and tp > 1)
    exec::Rope m_slidingRope; ///< Gemma-4's sliding layers' RoPE (m_rope: its full layers')
    std::vector<int> m_kvSource; ///< Gemma-4: the layer whose cache each layer reads
    std::vector<float> m_perLayerInputs; ///< Gemma-4: [n, layers, width] of the current step
    std::vector<std::int64_t> m_stepIds; ///< the current step's tokens
    exec::Rope m_compressRope; ///< DeepSeek-V4's compressed layers' RoPE (m_rope: sliding)
    /// The operators, on the rank's backend or the CPU (mutable: linearOp is logically const).
    mutable exec::detail::BackendDispatch m_ops;
    std::function<Result<void>(int phase)> m_phaseHook;
};

} // namespace day0::parallel::detail
