#pragma once

// Internal: the helper that turns a ModelSpec into blocks and tensors. Family code calls
// begin() for each block and then adds Linear modules, norms and plain tensors to it; the
// builder applies the checkpoint's quantisation layout (FP8 block scales, packed INT groups).

#include "model/layer_graph.h"

#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace day0::model::detail {

/// How one Linear module is stored and split.
struct LinearOptions {
    ParallelRole role = ParallelRole::Replicated;
    Component component = Component::Attention;
    bool bias = false; ///< a `<module>.bias` of the output width
    /// The published quantised checkpoints quantise this kind of module (attention and MLP
    /// projections); routers, embeddings, heads and MTP projections never are.
    bool quantizable = true;
    std::int32_t expert = -1; ///< routed expert index
    /// Precomputed quantise decision (experts decide once per layer and projection); -1: ask.
    int quantized = -1;
};

/// Accumulates the blocks of a LayerGraph.
class GraphBuilder {
public:
    explicit GraphBuilder(const ModelSpec& spec);

    [[nodiscard]] const ModelSpec& spec() const { return m_graph.spec; }

    /// Starts a block; the following calls add to it.
    void begin(std::string anchor, BlockKind kind, std::int32_t layer = -1, bool moe = false);
    /// Reserves room for `count` more tensors in the current block.
    void reserve(std::size_t count) { m_block->tensors.reserve(m_block->tensors.size() + count); }
    /// Adds `<module>.weight` [out, in] (+ scales when quantised, + `<module>.bias`).
    void linear(
        const std::string& module, std::int64_t out, std::int64_t in, const LinearOptions& options);
    /// Adds a norm's `<module>.weight` [width] (+ `<module>.bias` for LayerNorm).
    void norm(const std::string& module, std::int64_t width, bool layerNorm = false);
    /// Adds one tensor as given.
    void tensor(std::string name, std::vector<std::int64_t> shape, DType dtype, ParallelRole role,
        Component component, TensorKind kind = TensorKind::Weight, std::int32_t expert = -1,
        std::int64_t packedExperts = 0);
    /// The tensor added last (to adjust flags such as `optional`).
    TensorSpec& last() { return m_block->tensors.back(); }
    /// True if the checkpoint's quantisation covers Linear module `module`.
    [[nodiscard]] bool quantizes(const std::string& module) const;
    /// Adds the stored tensors of a quantised Linear `module` in `scheme` (weights, scales,
    /// metadata; no bias).
    void quantizedLinear(const std::string& module, std::int64_t out, std::int64_t in,
        const LinearOptions& options, QuantScheme scheme, std::int64_t groupSize);

    /// The finished graph (summaries not yet computed).
    LayerGraph take() { return std::move(m_graph); }

private:
    Component componentFor(Component requested) const;

    LayerGraph m_graph;
    std::vector<std::regex> m_ignore;
    Block* m_block = nullptr;
};

/// True if `pattern` excludes `module` from quantisation: a regex anchored at the start (HF
/// quantizers' modules_to_not_convert, `regex`) or a shell wildcard on the module, one of its
/// parents or its last components (ModelOpt exclude_modules).
bool excludedByPattern(const std::string& module, const std::string& pattern, bool regex);

/// The input embedding block `<textPrefix>.embed_tokens` [vocab, hidden].
void addEmbedding(GraphBuilder& b);
/// One Decoder block per decoder layer, `<textPrefix>.layers.<i>`, whose tensors `layer` adds
/// (called with the builder, the block's anchor, the layer's pattern and its index).
void addDecoderLayers(GraphBuilder& b,
    const std::function<void(GraphBuilder&, const std::string&, const LayerSpec&, std::int64_t)>&
        layer);
/// The final norm block `<textPrefix>.norm` (later tensors join it until the next begin()).
void addFinalNorm(GraphBuilder& b);
/// The output head `<lmHead>.weight` [vocab, hidden], unless the embeddings are tied.
void addLmHead(GraphBuilder& b);

/// Embedding, decoder layers (each added by `layer`, as addDecoderLayers), final norm and
/// lm_head: the text tower of a family whose layers alone are its own.
void addDecoderTower(GraphBuilder& b,
    const std::function<void(GraphBuilder&, const std::string&, const LayerSpec&, std::int64_t)>&
        layer);
/// Adds embedding, decoder layers, final norm, lm_head and MTP layers of the text tower.
void addTextTower(GraphBuilder& builder);
/// The Kimi-Linear / Kimi-K3 text tower: KDA and MLA layers, latent MoE, attention residuals
/// (family_kimi_graph.cpp).
void addKimiLinearTextTower(GraphBuilder& builder);

/// Building blocks of the decoder layers that families share (graph_decoder.cpp).
/// A gated MLP `<p>.{gate,up,down}_proj` of `width`.
void addDenseMlp(GraphBuilder& b, const std::string& p, std::int64_t width, Component component);
/// DeepSeek MLA under `<p>` (q_a/q_b or q_proj, kv_a_proj_with_mqa, kv_b, o; the DSA indexer;
/// Kimi-K3's output gate `g_proj` with spec.mla.outputGate).
/// The indexer is added on the layer's SparseMla layers only.
void addMlaAttention(GraphBuilder& b, const std::string& p, const LayerSpec& layer);
/// q/k/v/o projections (biases as the spec says) and, with qk-norm, q_norm / k_norm.
void addStandardAttention(GraphBuilder& b, const std::string& p);
/// A router `<module>.weight` [experts, hidden] and its `e_score_correction_bias`.
void addRouter(GraphBuilder& b, const std::string& module);
/// Routed experts stored one module per expert, `<p>.<e>.<gate|up|down>`, at spec.moe's widths
/// (between latentSize and the expert width when the MoE is latent).
void addPerExpertMlps(
    GraphBuilder& b, const std::string& p, const char* gate, const char* up, const char* down);
/// ModelOpt's FP8 KV-cache scales of attention `<p>` (F32 scalars `k_proj.k_scale`,
/// `v_proj.v_scale`) when the checkpoint declares an FP8 KV cache; nothing otherwise.
void addModelOptKvScales(GraphBuilder& b, const std::string& p);
/// gpt_oss text tower (family_gpt_oss.cpp).
void addGptOssTextTower(GraphBuilder& builder);
/// minimax_m2 and minimax_m3 text towers (family_minimax.cpp).
void addMiniMaxTextTower(GraphBuilder& builder);
/// The Nemotron-H text tower: backbone.embeddings, one norm + mixer per layer, norm_f, lm_head,
/// the mtp.layers block (family_nemotron_h.cpp).
void addNemotronHTextTower(GraphBuilder& builder);
/// The DeciLM text tower: Llama modules per block_configs entry (family_nemotron_nas.cpp).
void addNemotronNasTextTower(GraphBuilder& builder);

/// The text tower of Qwen3-Next / Qwen3.5 / Qwen3.6 (family_qwen_next_graph.cpp).
void addQwenNextTextTower(GraphBuilder& builder);
/// DeepSeek-V4's text tower in DeepSeek's native names (family_deepseek_v4.cpp).
void addDeepseekV4TextTower(GraphBuilder& builder);
/// Adds the vision tower (patch embedding, blocks, mergers, projector) when the spec has one.
void addVisionTower(GraphBuilder& builder);

/// Gemma 4 (family_gemma4_graph.cpp): the text tower, and the vision and audio towers with
/// their projectors.
void addGemma4TextTower(GraphBuilder& builder);
void addGemma4Towers(GraphBuilder& builder);
/// Hunyuan-A13B (family_hunyuan.cpp): the text tower.
void addHunyuanTextTower(GraphBuilder& builder);

} // namespace day0::model::detail
