#pragma once

// Internal to core/exec: the forward pass of one decoder model, templated on the compute type
// (float for fp32 and emulated runs, double for the fp64 reference). engine.cpp drives it.

#include "base/result.h"
#include "exec/backend_dispatch.h"
#include "exec/gated_delta_net.h"
#include "exec/ops.h"
#include "exec/precision.h"
#include "exec/rope.h"
#include "exec/router.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"
#include "numerics/tolerance.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace day0::exec::detail {

/// The checkpoint names of one decoder layer's modules, per family.
struct LayerNames {
    std::string prefix; ///< "model.layers.3"
    std::string ffn; ///< "model.layers.3.mlp", "...block_sparse_moe" (Mixtral), "...feed_forward"
    std::string router; ///< "<ffn>.gate" or "<ffn>.router" (Llama-4)
    std::string expertGate; ///< per-expert weight leaf names: gate_proj / w1
    std::string expertUp; ///< up_proj / w3
    std::string expertDown; ///< down_proj / w2
    std::string shared; ///< "...mlp.shared_experts" / "...mlp.shared_expert"; empty: none
    /// The sigmoid router's selection bias: "<ffn>.gate.e_score_correction_bias" (DeepSeek),
    /// "<ffn>.e_score_correction_bias" (MiniMax).
    std::string scoreBias;
    std::string qNorm; ///< per-head q norm: "<prefix>.self_attn.q_norm" (Hunyuan: query_layernorm)
    std::string kNorm;
};

/// Names of layer `layer` of `spec`.
LayerNames layerNames(const model::ModelSpec& spec, int layer);

/// A weight the forward needs: name and the shape the config implies.
struct WeightRequirement {
    std::string name;
    std::vector<std::int64_t> shape;
    bool optional = false; ///< lm_head when embeddings are tied
    bool integer = false; ///< an integer table (DeepSeek-V4's tid2eid), loaded as exact values
};

/// Every weight the forward of `spec` reads, with expected shapes.
std::vector<WeightRequirement> requiredWeights(const model::ModelSpec& spec);
/// Those of a Gemma-4 text tower (gemma4_block.cpp): per-layer widths, no v_proj on
/// attention_k_eq_v layers, the router and experts beside the dense MLP, layer_scalar.
std::vector<WeightRequirement> gemma4Weights(const model::ModelSpec& spec);
/// Those of a DeepSeek-V4 model (deepseek_v4_block.cpp), by its native checkpoint names.
std::vector<WeightRequirement> deepseekV4Weights(const model::ModelSpec& spec);
/// Those of a Nemotron-H model (nemotron_h_block.cpp) under its checkpoint names (backbone.*):
/// per layer its norm and one mixer (Mamba-2, attention, relu2 MLP or latent MoE).
std::vector<WeightRequirement> nemotronHWeights(const model::ModelSpec& spec);
/// Gemma-4's RoPE of its full layers (global_head_dim wide; "proportional": the first
/// int(partial · d // 2) rotate-half pairs turn, the others keep frequency 0) or of its sliding
/// layers (head_dim wide). Unsupported, naming it, for another RoPE type.
Result<Rope> gemma4Rope(const model::ModelSpec& spec, bool full);
/// What a Gemma-4 pass (the forward's and the gradient pass's) sets up once: its MLPs'
/// activation and the full and sliding layers' RoPE tables.
struct Gemma4Tables {
    Activation activation = Activation::Silu;
    Rope full;
    Rope sliding;
};
Result<Gemma4Tables> gemma4Tables(const model::ModelSpec& spec);
/// Qwen3-Next, Qwen3.5, Qwen3.5-MoE (gated_delta_net.cpp).
bool isQwenNext(const model::ModelSpec& spec);
/// Whether `weightName` is a zero-centred RMSNorm weight, y = x̂·(1 + w), which the engine loads
/// as 1 + w: Qwen3NextRMSNorm's (not its gated norm's), and every norm of MiniMax-M3 with
/// use_gemma_norm.
bool zeroCentredNorm(const model::ModelSpec& spec, const std::string& weightName);
/// The weights of the Gated DeltaNet `layer` (model.layers.N.linear_attn.*), appended to `w`.
void addGatedDeltaNetWeights(
    const model::ModelSpec& spec, int layer, std::vector<WeightRequirement>& w);
/// The weights of the Kimi Delta Attention `layer` (model.layers.N.self_attn.*, kimi_delta.cpp).
void addKimiDeltaWeights(
    const model::ModelSpec& spec, int layer, std::vector<WeightRequirement>& w);
/// The 2-D weights opcheck multiplies: those of the first dense layer, the first MoE layer (one
/// expert), the vision tower's first block and mergers, and the head, each with its module name
/// relative to its layer ("self_attn.q_proj", "mlp.experts.0.gate_proj").
std::vector<std::pair<std::string, WeightRequirement>> opCheckLinearWeights(
    const model::ModelSpec& spec);

/// Receives the tensors of one forward step and supplies injected inputs.
template <typename T> class Taps {
public:
    virtual ~Taps() = default;
    /// True if `name` is captured (so the forward may skip computing copies).
    [[nodiscard]] virtual bool wants(const std::string& name) const = 0;
    /// Records `data` (shape [rows, ...]) under `name`; `op` overrides the op kind ("moe").
    virtual void record(const std::string& name, const T* data, const numerics::Shape& shape,
        std::string_view op = {})
        = 0;
    /// Records integer data (router choices).
    virtual void recordIds(
        const std::string& name, std::span<const std::int64_t> ids, const numerics::Shape& shape)
        = 0;
    /// Overwrites x[rows, width] with the reference's `anchor` output for this step's rows;
    /// false when not injecting.
    virtual bool inject(const std::string& anchor, T* x, std::int64_t rows, std::int64_t width) = 0;
};

/// The weights in the compute type, by checkpoint name, plus which were exact fp8 (block-scaled
/// FP8 checkpoints), so that fp8 emulation does not round them a second time.
struct WeightTable {
    std::map<std::string, numerics::Tensor> tensors; ///< contiguous F32 or F64
    std::set<std::string> exactFp8;
};

/// The vision tower's output for one image.
template <typename T> struct VisionFeatures {
    std::vector<T> embeds; ///< [tokens, text hidden]: replaces the image-pad embeddings
    std::vector<std::vector<T>> deepstack; ///< Qwen3-VL: added after decoder layers 0, 1, ...
    std::int64_t tokens = 0;
};

/// Multimodal inputs of a prefill step: image features at the image-pad rows, M-RoPE positions.
template <typename T> struct MultimodalStep {
    const VisionFeatures<T>* vision = nullptr;
    std::vector<std::int64_t> imageRows; ///< rows of the step that hold image tokens, in order
    std::vector<std::int64_t> positions3; ///< [3, n] (t, h, w) positions; empty: 1-D (Gemma-4)
    /// Gemma-4 use_bidirectional_attention "vision": the image rows attend to each other both
    /// ways (HF blockwise_overlay), on top of the causal and sliding masks.
    bool imageBidirectional = false;
    /// The id whose embedding the image rows get before the features replace them (Gemma-4:
    /// the text pad_token_id, as HF does for out-of-vocabulary image ids); -1: the ids as given.
    std::int64_t imagePadId = -1;
};

/// The vision tower's weights, by checkpoint name (Qwen3-VL layout), with shapes.
std::vector<WeightRequirement> visionWeights(const model::ModelSpec& spec);
/// Gemma-4's vision tower, its standardisation buffers and embed_vision (vision_gemma4.cpp).
std::vector<WeightRequirement> gemma4VisionWeights(const model::ModelSpec& spec);

/// DeepSeek-V4's caches between steps (deepseek_v4.h).
template <typename T> struct DeepseekV4Cache;

/// The forward pass with a KV cache for up to `capacity` tokens.
template <typename T> class Forward {
public:
    Forward(const model::ModelSpec& spec, const WeightTable& weights, PrecisionPlan plan,
        std::int64_t capacity);

    /// Builds rope tables and caches; errors for unsupported settings.
    Result<void> init();

    /// Runs `ids` at positions [start, start + ids.size()); returns the logits [n, vocab].
    /// `mm` (prefill of a vision-language prompt) supplies image features and M-RoPE positions.
    Result<std::vector<T>> step(std::span<const std::int64_t> ids, std::int64_t start,
        Taps<T>& taps, std::stop_token stop, const MultimodalStep<T>* mm = nullptr);

    /// Runs the float operators on `backend` (CPU fallback per operator); null: the CPU
    /// reference. Only for Forward<float>: the fp64 reference always runs on the CPU.
    void setBackend(Backend* backend) { m_ops = BackendDispatch(backend); }
    /// Where the operators ran so far.
    [[nodiscard]] DispatchReport dispatchReport() const { return m_ops.report(); }

    /// Gated DeltaNet steps of more than one token run the chunked delta rule over chunks of
    /// `chunk` tokens (decode steps the recurrent form).
    void setDeltaRuleChunk(std::int64_t chunk) { m_deltaChunk = chunk; }

    /// M-RoPE decode steps: the token at row i is rotated at position i + delta.
    void setPositionDelta(std::int64_t delta) { m_positionDelta = delta; }

    /// Runs decoder layers [first, last] only (`day0 run --layers`): a step skips the embedding
    /// and takes the residual stream entering `first` from taps.inject at the anchor before it
    /// ("model.embed_tokens" or "model.layers.<first − 1>"), and ends after `last` with no
    /// logits (an empty vector). The decoder families of the generic layer loop only; step()
    /// refuses the others by name.
    void setLayerSlice(int first, int last)
    {
        m_sliceFirst = first;
        m_sliceLast = last;
    }

    /// Runs the vision tower (Qwen3-VL: patch embedding, interpolated learned positions, ViT
    /// blocks with 2-D RoPE, patch merger, deepstack mergers) over `patches` [gridH × gridW,
    /// patch width] (one frame), capturing `<visionPrefix>.*` anchors.
    Result<VisionFeatures<T>> visionTower(std::span<const double> patches, std::int64_t gridH,
        std::int64_t gridW, Taps<T>& taps, std::stop_token stop);

private:
    struct Cache {
        std::vector<T> k; ///< [capacity, kWidth]
        std::vector<T> v; ///< [capacity, vWidth]
    };

    /// A Gated DeltaNet layer's recurrent state in place of a KV cache (gated_delta_net.cpp).
    struct DeltaState {
        std::vector<T> window; ///< the conv's last kernel − 1 inputs [kernel − 1, conv channels]
        std::vector<T> state; ///< the delta rule's [value heads, key dim, value dim]
    };

    const T* weight(const std::string& name) const;
    const T* gemmWeight(
        const std::string& name, PrecisionMode mode, std::int64_t rows, std::int64_t cols);
    bool hasWeight(const std::string& name) const;
    void roundAct(T* data, std::int64_t n, PrecisionMode mode) const;
    /// y[n, out] = x[n, in] · W[out, in]ᵀ (+ bias), emulating `kind`'s precision in `layer`.
    void linear(const std::string& module, const T* x, T* y, std::int64_t n, std::int64_t in,
        std::int64_t out, numerics::OpKind kind, int layer, Taps<T>& taps, bool capture);
    /// `eps`: the norm's own (the MLA latents'), else the spec's rms_norm_eps.
    void rmsNormOp(const std::string& module, const T* x, T* y, std::int64_t n, std::int64_t dim,
        int layer, std::optional<double> eps = std::nullopt);
    /// Rotates x[tokens, heads, headDim] at the step's positions (M-RoPE when it has them) and
    /// rounds it to `mode`.
    void rotate(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t headDim,
        const Rope& table, PrecisionMode mode);
    void attentionBlock(
        int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps);
    void mlaBlock(int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps);
    /// `selected`: the DSA selection [n, index_topk] (dsa_indexer.cpp); empty: dense.
    void causalAttention(int layer, const T* q, std::int64_t n, std::int64_t start,
        std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim, std::int64_t valueDim,
        double scale, T* out, std::span<const std::int64_t> selected = {});
    /// DeepSeek Sparse Attention's indexer of `layer` (dsa_indexer.cpp): caches the step's
    /// index keys and leaves the keys each query attends to in m_selection.
    void dsaIndexer(
        int layer, const T* x, const T* qr, std::int64_t n, std::int64_t start, Taps<T>& taps);
    // MiniMax-M3's sparse attention layers (minimax_m3_block.cpp): the index keys' caches, and
    // the layer (index branch, block selection, attention over the kept blocks).
    Result<void> blockSparseInit();
    void blockSparseAttention(
        int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps);
    /// `width`: the MLP's input and output width; 0: the hidden size (Kimi-K3's latent experts
    /// run at routed_expert_hidden_size).
    void mlp(const std::string& module, const std::string& gate, const std::string& up,
        const std::string& down, const T* x, T* out, std::int64_t n, std::int64_t inter, int layer,
        Taps<T>& taps, std::int64_t width = 0);
    void moeBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps);
    /// Routes the router logits [n, experts] (`bias`: the sigmoid router's selection bias, or
    /// null) and records the choices as `<router>#topk` and, for a sigmoid router, the scores it
    /// ranks by as `<router>#score` (a flipped choice's margin is measured on that scale).
    Routing routeAndRecord(const std::string& router, const T* logits, std::int64_t n,
        std::int64_t experts, const T* bias, Taps<T>& taps);
    void layerNormOp(const std::string& module, const T* x, T* y, std::int64_t n, std::int64_t dim,
        int layer, double eps);
    // Gemma-4's text tower (gemma4_block.cpp).
    Result<void> gemma4Init();
    void gemma4ScaleEmbedding(T* hidden, std::int64_t n);
    /// Gemma-4's per-layer inputs of the step's tokens into m_perLayerInputs [n, layers, width]
    /// from their ids and their scaled embeddings.
    Result<void> gemma4PerLayerInputs(
        std::span<const std::int64_t> ids, const T* embedded, std::int64_t n, Taps<T>& taps);
    void gemma4Layer(int layer, T* hidden, std::int64_t n, std::int64_t start, Taps<T>& taps);
    void gemma4Attention(
        int layer, const T* x, T* out, std::int64_t n, std::int64_t start, Taps<T>& taps);
    void gemma4Experts(int layer, const T* residual, T* out, std::int64_t n, Taps<T>& taps);
    /// Projects, normalises and rotates the layer's keys and values into its cache.
    void gemma4KeysValues(int layer, const T* x, std::int64_t n, std::int64_t start, Taps<T>& taps);
    void softCapLogits(T* logits, std::int64_t count);
    // Qwen3-Next / Qwen3.5 linear attention (gated_delta_net.cpp).
    void gatedDeltaNetInit();
    void gatedDeltaNetBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps);
    // Kimi-Linear's KDA layers (kimi_delta.cpp); their state is a DeltaState whose window holds
    // the q, k and v conv windows one after the other.
    void kimiDeltaInit();
    void kimiDeltaBlock(int layer, const T* x, T* out, std::int64_t n, Taps<T>& taps);
    // Kimi-K3's Block Attention Residuals (kimi_attn_res.cpp): `blocks` holds the step's sealed
    // block sums, each [n, hidden]; `hidden` is the running partial sum, in and out.
    void kimiAttnResLayer(int layer, T* hidden, std::vector<std::vector<T>>& blocks, std::int64_t n,
        std::int64_t start, Taps<T>& taps);
    /// out[n, hidden] = the softmax mix of (blocks, partial) scored with `<module>_res_norm` and
    /// `<module>_res_proj`; `out` may be `partial`.
    void attnResMix(const std::string& module, const std::vector<std::vector<T>>& blocks,
        const T* partial, T* out, std::int64_t n, int layer);
    // DeepSeek-V4 (deepseek_v4_block.cpp, deepseek_v4_forward.cpp).
    Result<void> deepseekV4Init();
    Result<std::vector<T>> deepseekV4Step(
        std::span<const std::int64_t> ids, std::int64_t start, Taps<T>& taps, std::stop_token stop);
    // Nemotron-H (nemotron_h_block.cpp; the Mamba-2 operators in mamba2.cpp).
    Result<void> nemotronHInit();
    Result<std::vector<T>> nemotronHStep(
        std::span<const std::int64_t> ids, std::int64_t start, Taps<T>& taps, std::stop_token stop);
    void mamba2Mixer(
        int layer, const std::string& module, const T* x, T* out, std::int64_t n, Taps<T>& taps);
    void nemotronHAttention(int layer, const std::string& module, const T* x, T* out,
        std::int64_t n, std::int64_t start, Taps<T>& taps);
    void relu2Mlp(const std::string& module, const T* x, T* out, std::int64_t n, std::int64_t in,
        std::int64_t inter, int layer, Taps<T>& taps);
    void nemotronHMoe(
        int layer, const std::string& module, const T* x, T* out, std::int64_t n, Taps<T>& taps);
    void visionBlock(int block, T* x, std::int64_t n, std::span<const std::int64_t> rows,
        std::span<const std::int64_t> cols, Taps<T>& taps);
    void visionMerger(const std::string& module, const T* x, std::int64_t n, bool postShuffleNorm,
        int layer, std::vector<T>& out, Taps<T>& taps);
    // Gemma-4's vision tower and embed_vision (vision_gemma4.cpp).
    Result<VisionFeatures<T>> gemma4VisionTower(std::span<const double> patches, std::int64_t gridH,
        std::int64_t gridW, Taps<T>& taps, std::stop_token stop);
    void gemma4VisionLayer(int layer, T* x, std::int64_t n, std::span<const std::int64_t> xs,
        std::span<const std::int64_t> ys, double eps, Taps<T>& taps);
    /// Gemma4ClippableLinear: `<module>.linear`, with its input/output clamps when the tower has
    /// use_clipped_linears.
    void gemma4ClippedLinear(const std::string& module, const T* x, T* y, std::int64_t n,
        std::int64_t in, std::int64_t out, int layer, Taps<T>& taps);
    /// Recomputes the context of this prefill's image rows (m_bidirectionalRows) so that each
    /// also sees the image rows after it (Gemma-4 "vision" blockwise overlay).
    void gemma4ImageBlockAttention(int layer, const T* q, std::int64_t start, std::int64_t heads,
        std::int64_t kvHeads, std::int64_t headDim, T* context);

    const model::ModelSpec& m_spec;
    const WeightTable& m_weights;
    PrecisionPlan m_plan;
    std::int64_t m_capacity;
    Rope m_rope;
    Rope m_slidingRope; ///< Gemma-4: the sliding layers' RoPE (m_rope: the full layers')
    double m_attentionScale = 1.0;
    std::vector<Cache> m_caches;
    /// The cache each layer's attention reads: its own, or for Gemma-4's KV-shared layers the
    /// last unshared layer of its kind. Empty: every layer its own.
    std::vector<int> m_kvSource;
    std::vector<T> m_perLayerInputs; ///< Gemma-4: the step's per-layer inputs [n, layers, width]
    std::vector<std::int64_t> m_positions; ///< positions of the current step
    std::vector<std::int64_t> m_positions3; ///< M-RoPE (t, h, w) positions of a prefill, or empty
    std::int64_t m_positionDelta = 0;
    /// Gemma-4 "vision": the rows of this prefill that hold image tokens and attend both ways
    /// within their run; empty otherwise.
    std::vector<std::int64_t> m_bidirectionalRows;
    int m_sliceFirst = -1; ///< setLayerSlice; -1: every layer, with embedding and head
    int m_sliceLast = -1;
    Rope m_visionRope;
    double m_visionRopeTheta = 100.0; ///< Gemma-4 vision rope_theta (read with the image rules)
    Activation m_activation = Activation::Silu;
    bool m_situ = false; ///< Kimi-K3 SiTU-GLU instead of m_activation (spec situBeta, ...)
    double m_swigluLimit = 0; ///< gpt-oss clamped SwiGLU: |up| and gate's top; 0: no clamp
    std::vector<std::vector<float>> m_sinks; ///< attention sinks per layer [heads]; empty: none
    Rope m_indexerRope; ///< DSA indexer: qk_rope_head_dim rotated lanes, its own pairing
    std::vector<std::vector<T>> m_indexerKeys; ///< DSA index keys per layer [capacity, D]
    /// The last DSA selection, [step tokens, index_topk]: GLM-5's "shared" layers reuse it.
    std::vector<std::int64_t> m_selection;
    std::vector<DeltaState> m_deltaStates; ///< per layer; empty for attention layers
    std::int64_t m_deltaChunk = kDeltaRuleChunk;
    RouterConfig m_router;
    std::map<std::pair<std::string, int>, std::vector<float>> m_rounded; ///< emulated weights
    BackendDispatch m_ops; ///< the float operators (a backend's or the CPU reference's)
    std::shared_ptr<DeepseekV4Cache<T>> m_v4; ///< DeepSeek-V4's caches; null for other families
    /// Nemotron-H's Mamba-2 layers: the conv state [conv_kernel − 1, conv channels] (the last
    /// inputs of the convolution) and the SSM state [heads, head_dim, state] per layer, carried
    /// from step to step; empty for the other layers.
    std::vector<std::vector<T>> m_convStates;
    std::vector<std::vector<T>> m_ssmStates;
};

/// Reads one forward weight in `compute`, dequantising block-scaled FP8 (engine.cpp), for the
/// sharded executor (core/parallel), which slices what this reads.
Result<numerics::Tensor> loadForwardWeight(const WeightSource& source, const WeightRequirement& req,
    const model::ModelSpec& spec, DType compute, bool& exactFp8);

} // namespace day0::exec::detail
