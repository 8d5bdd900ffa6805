#pragma once

#include "base/units.h"
#include "model/cache_footprint.h"
#include "model/layer_graph.h"
#include "model/model_spec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::plan {

/// Parameter counts (or bytes) of a part of the model, split by how they shard across ranks.
struct ShardSplit {
    double tp = 0.0; ///< split by tensor parallelism (column-, row-, vocab-parallel)
    double replicated = 0.0; ///< held whole by every rank of a TP group (norms, routers, ...)
    double expert = 0.0; ///< routed experts: split by EP × ETP

    [[nodiscard]] double total() const { return tp + replicated + expert; }
    ShardSplit& operator+=(const ShardSplit& o)
    {
        tp += o.tp;
        replicated += o.replicated;
        expert += o.expert;
        return *this;
    }
    [[nodiscard]] ShardSplit scaled(double f) const
    {
        return { tp * f, replicated * f, expert * f };
    }
};

/// Parameters and their storage of a block of the model.
struct BlockWeights {
    ShardSplit params; ///< parameters (scales excluded)
    ShardSplit checkpointBytes; ///< bytes at the checkpoint's dtypes, block-FP8 scales included
    ShardSplit fp8Bytes; ///< bytes if linear weights were block-FP8 (128×128, fp32 scales) and
                         ///< the rest BF16
    /// Of `params`, those no token multiplies: lookup tables (DeepSeek-V4's hash-routing
    /// tid2eid). Held in memory; neither active nor FLOPs.
    double lookupParams = 0.0;

    BlockWeights& operator+=(const BlockWeights& o)
    {
        params += o.params;
        lookupParams += o.lookupParams;
        checkpointBytes += o.checkpointBytes;
        fp8Bytes += o.fp8Bytes;
        return *this;
    }
};

/// The shapes of one decoder layer that activations, KV cache and FLOPs depend on.
struct LayerShape {
    model::AttentionKind attention = model::AttentionKind::MHA;
    double hidden = 0; ///< h
    double heads = 0; ///< a (query heads)
    double kvHeads = 0; ///< KV heads (MLA: = heads after the up-projection)
    double qkHeadDim = 0; ///< q/k width per head (MLA: nope + rope)
    double vHeadDim = 0; ///< v width per head
    double qLoraRank = 0; ///< MLA q latent (0: direct q projection)
    double kvLoraRank = 0; ///< MLA kv latent
    double ropeDim = 0; ///< MLA decoupled RoPE width
    double window = 0; ///< keys a query sees at most (sliding window / chunk); 0: all
    bool moe = false;
    bool gated = true; ///< SwiGLU-style MLP (fc1 is 2·ffn wide)
    double ffn = 0; ///< dense MLP width
    double experts = 0; ///< routed experts
    double topK = 0;
    double expertGroups = 0; ///< group-limited routing: groups of experts (n_group); 0: none
    double groupsPerToken = 0; ///< groups a token's experts come from at most (topk_group)
    double expertFfn = 0;
    double sharedFfn = 0; ///< total shared-expert width (0: none)

    model::MixerKind mixer = model::MixerKind::Attention;
    model::FfnKind ffnKind = model::FfnKind::Dense;
    std::vector<model::CacheTerm> cache; ///< what the layer keeps per sequence (layerCache)
    /// Keys one query attends to at most when an indexer selects them (DSA / CSA top-k,
    /// block-sparse blocks × block size); 0: every key (or the window).
    double selectedKeys = 0;
    double indexerFlopsPerKey = 0; ///< indexer scoring per query and key (2·heads·dim)
    double compressRatio = 0; ///< DeepSeek-V4: tokens per compressed entry the layer reads
    double stateFlopsPerToken = 0; ///< recurrent mixers: state update and read per token
    double mixerHeads = 0; ///< heads of a linear-attention / Mamba mixer (split by TP)
    double mixerKeyHeads = 0; ///< key heads of a linear-attention mixer, Mamba groups
    double mixerWidth = 0; ///< value width of a linear-attention mixer, Mamba inner width
    double mixerKeyWidth = 0; ///< key width (key heads × key dim), Mamba groups × state
    double stateElements = 0; ///< recurrent state per sequence (all heads)
    double chunkTokens = 0; ///< tokens per chunk of the chunked scan (states kept per chunk)
    /// Layers the analytic projection formulas do not describe (linear attention, Mamba,
    /// DeepSeek-V4 attention, latent MoE, no-op or linear blocks): matmul MACs per token from
    /// the layer's own weights, outside the routed experts and per routed expert.
    double weightMacs = 0;
    double expertMacs = 0;

    bool operator==(const LayerShape&) const = default;
};

/// The KV cache (or fixed state) of one kind of layer on a rank.
struct CacheShare {
    model::MixerKind kind = model::MixerKind::Attention;
    int layers = 0;
    Bytes bytes;
};

/// Decoder layers with the same shape and the same weights per layer.
struct LayerClass {
    LayerShape shape;
    BlockWeights weights; ///< of one layer
    int count = 0; ///< layers of this class in the model
};

/// What the memory estimator, cost model and planner need from a model, computed once from its
/// LayerGraph (never per layout). Per-stage sums are O(classes) through prefix counts.
/// Immutable after construction; thread-safe to read.
struct ModelSummary {
    std::string name;
    model::Family family = model::Family::Llama;
    double hidden = 0;
    double vocab = 0; ///< rows of the embedding as stored
    int numLayers = 0; ///< decoder layers (MTP excluded)
    bool tiedEmbeddings = false;
    DType checkpointDtype = DType::BF16; ///< dtype most weights are stored in
    bool blockFp8Checkpoint = false; ///< linear weights published as block-FP8 (GEMMs in FP8)

    std::vector<LayerClass> classes;
    std::vector<int> layerClass; ///< class of each decoder layer
    std::vector<std::vector<int>> classPrefix; ///< [class][i]: layers of the class before layer i

    BlockWeights embedding; ///< input embedding (first stage)
    BlockWeights lmHead; ///< output head, zero when tied (last stage)
    BlockWeights finalNorm; ///< last stage
    BlockWeights vision; ///< vision tower (first stage)
    int numMtp = 0; ///< MTP layers (last stage)
    int mtpClass = -1; ///< class of the MTP layers' transformer part
    BlockWeights
        mtpLayer; ///< one MTP layer in full (transformer part + eh_proj + norms + head copies)
    BlockWeights mtpShared; ///< of mtpLayer: embedding/head copies the training framework shares

    double totalParams = 0;
    double activeParams = 0; ///< per token (top-k experts), embedding included
    std::vector<std::string> notes; ///< what the summary assumed
    /// The model was read partially (model::ReadOptions::partial): every figure leaves out
    /// `ignored` ("path (reason)"), and every output must say so.
    bool partial = false;
    std::vector<std::string> ignored;

    /// Layers of class `cls` in decoder layers [first, last).
    [[nodiscard]] int countInRange(int cls, int first, int last) const
    {
        return classPrefix[std::size_t(cls)][std::size_t(last)]
            - classPrefix[std::size_t(cls)][std::size_t(first)];
    }
    /// True if any layer is MoE.
    [[nodiscard]] bool hasMoe() const;
    /// The first MoE shape (or the first shape when dense).
    [[nodiscard]] const LayerShape& representativeShape() const;
    /// Attention heads, KV heads, experts of the model (for validity checks).
    [[nodiscard]] double heads() const { return classes.front().shape.heads; }
};

/// Shapes of decoder layer `layer` read from a spec (no weights).
LayerShape layerShapeFromSpec(const model::ModelSpec& spec, int layer);
/// Shapes of a decoder layer with the given per-layer pattern at position `index` (MTP layers:
/// numLayers and on).
LayerShape layerShapeFromSpec(
    const model::ModelSpec& spec, const model::LayerSpec& layer, std::int64_t index);
/// True if a layer's FLOPs come from its weights (LayerShape::weightMacs), not the analytic
/// attention and MLP formulas.
bool usesWeightMacs(const LayerShape& shape);

/// Builds the summary from a layer graph: weights per class from the tensors' roles,
/// components and layers; shapes from graph.spec.
ModelSummary summarizeModel(const model::LayerGraph& graph);

} // namespace day0::plan
