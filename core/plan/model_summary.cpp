#include "plan/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace day0::plan {

namespace {

using model::Component;
using model::TensorKind;
using model::TensorSpec;

double& bucketOf(ShardSplit& split, const TensorSpec& t)
{
    if (t.isExpert()) {
        return split.expert;
    }
    return t.role == model::ParallelRole::Replicated ? split.replicated : split.tp;
}

/// Linear weights that block-FP8 recipes (DeepSeek-V3, Kimi-K2, Qwen3-FP8) quantise: 2-D or
/// packed 3-D matrices outside the embedding, the output head, norms and routers.
bool quantisable(const TensorSpec& t)
{
    if (t.kind != TensorKind::Weight || t.shape.size() < 2) {
        return false;
    }
    switch (t.component) {
    case Component::Embedding:
    case Component::LmHead:
    case Component::Norm:
    case Component::Router:
    case Component::Vision:
        return false;
    default:
        break;
    }
    return t.name.find("norm") == std::string::npos
        && t.name.find("embed_tokens") == std::string::npos
        && t.name.find("shared_head.head") == std::string::npos;
}

double fp8BlockScaleBytes(const TensorSpec& t)
{
    const auto n = t.shape.size();
    const double rows = double(t.shape[n - 2]);
    const double cols = double(t.shape[n - 1]) * t.packFactor; // logical input width
    double blocks = std::ceil(rows / 128.0) * std::ceil(cols / 128.0);
    for (std::size_t i = 0; i + 2 < n; ++i) {
        blocks *= double(t.shape[i]);
    }
    return blocks * 4.0;
}

void addTensor(BlockWeights& w, const TensorSpec& t)
{
    bucketOf(w.checkpointBytes, t) += double(t.bytes());
    if (t.kind == TensorKind::Scale || t.kind == TensorKind::Metadata) {
        return;
    }
    const double params = double(t.params());
    bucketOf(w.params, t) += params;
    if (t.lookupTable) {
        w.lookupParams += params;
    }
    bucketOf(w.fp8Bytes, t) += quantisable(t) ? params + fp8BlockScaleBytes(t) : params * 2.0;
}

bool sameWeights(const BlockWeights& a, const BlockWeights& b)
{
    return a.params.tp == b.params.tp && a.params.replicated == b.params.replicated
        && a.params.expert == b.params.expert && a.lookupParams == b.lookupParams
        && a.checkpointBytes.total() == b.checkpointBytes.total();
}

// Matmul MACs per token of a layer from its weights, for layers the analytic formulas do not
// describe: every non-expert parameter once, one routed expert's parameters per selected expert.
void setWeightMacs(LayerShape& shape, const BlockWeights& w)
{
    if (!usesWeightMacs(shape)) {
        return;
    }
    shape.weightMacs = w.params.tp + w.params.replicated - w.lookupParams;
    shape.expertMacs = shape.experts > 0 ? w.params.expert / shape.experts : 0.0;
}

bool isSharedCopy(const TensorSpec& t)
{
    return t.name.find("embed_tokens") != std::string::npos
        || t.name.find("shared_head.head") != std::string::npos;
}

} // namespace

bool ModelSummary::hasMoe() const
{
    return std::any_of(
        classes.begin(), classes.end(), [](const LayerClass& c) { return c.shape.moe; });
}

const LayerShape& ModelSummary::representativeShape() const
{
    for (const auto& c : classes) {
        if (c.shape.moe) {
            return c.shape;
        }
    }
    return classes.front().shape;
}

LayerShape layerShapeFromSpec(const model::ModelSpec& spec, int layer)
{
    model::LayerSpec ls;
    ls.ffn = spec.moe ? model::FfnKind::Moe : model::FfnKind::Dense;
    if (layer >= 0 && std::size_t(layer) < spec.layers.size()) {
        ls = spec.layers[std::size_t(layer)];
    }
    return layerShapeFromSpec(spec, ls, layer);
}

bool usesWeightMacs(const LayerShape& s)
{
    using model::MixerKind;
    const bool classicMixer = s.mixer == MixerKind::Attention || s.mixer == MixerKind::Sliding
        || s.mixer == MixerKind::Chunked || s.mixer == MixerKind::SparseMla;
    const bool classicFfn = s.ffnKind == model::FfnKind::Dense || s.ffnKind == model::FfnKind::Moe;
    return !classicMixer || !classicFfn || s.weightMacs > 0;
}

namespace {

// What the cost model needs of the mixers the analytic formulas do not cover. Estimates of the
// per-token work beyond the projections (documented in the planner's notes):
// - Gated DeltaNet / KDA (chunked delta rule): per value head S ← decay·S + β·k(v − Sᵀk)ᵀ and
//   o = Sᵀq, about 6·d_k·d_v FLOPs per token;
// - Mamba-2 (SSD): per head h ← dA·h + B·x and y = C·h, about 5·head_dim·state FLOPs;
// - DSA / CSA indexers: 2·index_heads·index_dim per query and key scored; block-sparse indexers
//   the same over every key.
void setMixerWork(const model::ModelSpec& spec, const model::LayerSpec& ls, LayerShape& s)
{
    using model::MixerKind;
    switch (ls.mixer) {
    case MixerKind::GatedDeltaNet:
    case MixerKind::KimiDelta:
        if (spec.linearAttention) {
            const auto& la = *spec.linearAttention;
            s.mixerHeads = double(la.valueHeads);
            s.mixerKeyHeads = double(la.keyHeads);
            s.mixerWidth = double(la.valueHeads * la.valueHeadDim);
            s.mixerKeyWidth = double(la.keyHeads * la.keyHeadDim);
            s.stateElements = double(la.valueHeads * la.keyHeadDim * la.valueHeadDim);
            s.chunkTokens = 64.0; // fla's chunked delta rule
            s.stateFlopsPerToken
                = 6.0 * double(la.valueHeads) * double(la.keyHeadDim) * double(la.valueHeadDim);
        }
        break;
    case MixerKind::Mamba2:
        if (spec.mamba) {
            const auto& m = *spec.mamba;
            s.mixerHeads = double(m.numHeads);
            s.mixerKeyHeads = double(m.numGroups);
            s.mixerWidth = double(m.inner());
            s.mixerKeyWidth = double(m.numGroups * m.stateSize);
            s.stateElements = double(m.numHeads * m.headDim * m.stateSize);
            s.chunkTokens = double(m.chunkSize > 0 ? m.chunkSize : 256);
            s.stateFlopsPerToken
                = 5.0 * double(m.numHeads) * double(m.headDim) * double(m.stateSize);
        }
        break;
    case MixerKind::SparseMla:
        s.selectedKeys = double(spec.mla.indexerTopK);
        s.indexerFlopsPerKey = 2.0 * double(spec.mla.indexerHeads * spec.mla.indexerHeadDim);
        break;
    case MixerKind::Compressed:
        s.compressRatio = double(ls.compressRatio);
        if (spec.compressedAttention && ls.compressRatio == 4) {
            const auto& c = *spec.compressedAttention;
            s.selectedKeys = double(c.indexerTopK);
            // The indexer scores one compressed key per 4 tokens.
            s.indexerFlopsPerKey = 2.0 * double(c.indexerHeads * c.indexerHeadDim) / 4.0;
        }
        break;
    case MixerKind::BlockSparse:
        if (spec.blockSparse) {
            const auto& b = *spec.blockSparse;
            s.selectedKeys = double(b.topKBlocks * b.blockSize);
            s.indexerFlopsPerKey = 2.0 * double(b.indexHeads * b.indexDim);
        }
        break;
    default:
        break;
    }
}

} // namespace

LayerShape layerShapeFromSpec(
    const model::ModelSpec& spec, const model::LayerSpec& ls, std::int64_t index)
{
    LayerShape s;
    s.attention = spec.attention;
    s.hidden = double(spec.hiddenSize);
    s.heads = double(spec.headsOf(ls));
    if (spec.attention == model::AttentionKind::MLA) {
        s.kvHeads = s.heads;
        s.qkHeadDim = double(spec.mla.qkNopeHeadDim + spec.mla.qkRopeHeadDim);
        s.vHeadDim = double(spec.mla.vHeadDim);
        s.qLoraRank = double(spec.mla.qLoraRank);
        s.kvLoraRank = double(spec.mla.kvLoraRank);
        s.ropeDim = double(spec.mla.qkRopeHeadDim);
    } else {
        const std::int64_t kv = spec.kvHeadsOf(ls);
        s.kvHeads = double(kv > 0 ? kv : spec.headsOf(ls));
        s.qkHeadDim = double(spec.headDimOf(ls));
        s.vHeadDim = double(spec.headDimOf(ls));
    }
    s.window = double(ls.slidingWindow > 0 ? ls.slidingWindow : ls.attentionChunk);
    s.gated = spec.gatedMlp;
    s.ffn = ls.ffn == model::FfnKind::Dense ? double(spec.ffnWidthOf(ls)) : 0.0;
    s.moe = ls.moe() && spec.moe.has_value();
    if (s.moe) {
        s.experts = double(spec.moe->numExperts);
        s.topK = double(spec.topKOf(ls));
        if (spec.moe->numGroups > 1 && spec.moe->topkGroup < spec.moe->numGroups) {
            s.expertGroups = double(spec.moe->numGroups);
            s.groupsPerToken = double(spec.moe->topkGroup);
        }
        s.expertFfn = double(spec.expertWidthOf(ls));
        s.sharedFfn = double(spec.sharedWidthOf(ls));
        s.gated = spec.moe->gatedExperts;
    }
    s.mixer = ls.mixer;
    s.ffnKind = ls.ffn;
    s.cache = model::layerCache(spec, ls, index);
    setMixerWork(spec, ls, s);
    return s;
}

ModelSummary summarizeModel(const model::LayerGraph& graph)
{
    const auto& spec = graph.spec;
    ModelSummary m;
    m.name = spec.name;
    m.family = spec.family;
    m.hidden = double(spec.hiddenSize);
    m.vocab = double(spec.vocabSize);
    m.numLayers = int(spec.numLayers);
    m.tiedEmbeddings = spec.tieEmbeddings;
    m.blockFp8Checkpoint
        = spec.quantization && spec.quantization->scheme == model::QuantScheme::BlockFp8;

    std::vector<BlockWeights> perLayer(std::size_t(std::max(0, m.numLayers)));
    std::map<int, BlockWeights> mtpLayers;
    std::map<int, BlockWeights> mtpShared;
    std::map<DType, double> paramsByDtype;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            if (t.kind == TensorKind::Weight) {
                paramsByDtype[t.dtype] += double(t.params());
            }
            switch (block.kind) {
            case model::BlockKind::Embedding:
                addTensor(m.embedding, t);
                break;
            case model::BlockKind::Decoder:
                if (block.layer >= 0 && block.layer < m.numLayers) {
                    addTensor(perLayer[std::size_t(block.layer)], t);
                }
                break;
            case model::BlockKind::FinalNorm:
                addTensor(m.finalNorm, t);
                break;
            case model::BlockKind::LmHead:
                addTensor(m.lmHead, t);
                break;
            case model::BlockKind::Mtp:
                addTensor(mtpLayers[block.layer], t);
                if (isSharedCopy(t)) {
                    addTensor(mtpShared[block.layer], t);
                }
                break;
            case model::BlockKind::VisionPatchEmbed:
            case model::BlockKind::VisionBlock:
            case model::BlockKind::VisionMerger:
                addTensor(m.vision, t);
                break;
            }
        }
    }
    if (!paramsByDtype.empty()) {
        m.checkpointDtype = std::max_element(
            paramsByDtype.begin(), paramsByDtype.end(), [](const auto& a, const auto& b) {
                return a.second < b.second;
            })->first;
    }

    m.layerClass.resize(perLayer.size());
    for (std::size_t i = 0; i < perLayer.size(); ++i) {
        LayerShape shape = layerShapeFromSpec(spec, int(i));
        setWeightMacs(shape, perLayer[i]);
        int found = -1;
        for (std::size_t c = 0; c < m.classes.size(); ++c) {
            if (m.classes[c].shape == shape && sameWeights(m.classes[c].weights, perLayer[i])) {
                found = int(c);
                break;
            }
        }
        if (found < 0) {
            m.classes.push_back({ shape, perLayer[i], 0 });
            found = int(m.classes.size()) - 1;
        }
        ++m.classes[std::size_t(found)].count;
        m.layerClass[i] = found;
    }
    if (m.classes.empty()) {
        m.classes.push_back({ layerShapeFromSpec(spec, 0), {}, 0 });
    }

    m.numMtp = int(mtpLayers.size());
    if (m.numMtp > 0) {
        m.mtpLayer = mtpLayers.begin()->second;
        m.mtpShared = mtpShared.count(mtpLayers.begin()->first)
            ? mtpShared[mtpLayers.begin()->first]
            : BlockWeights {};
        // The MTP block is a decoder layer of its own pattern (DeepSeek-V3: like the last layer).
        LayerShape shape = spec.mtpLayers.empty()
            ? layerShapeFromSpec(spec, m.numLayers - 1)
            : layerShapeFromSpec(spec, spec.mtpLayers.front(), spec.numLayers);
        for (std::size_t c = 0; c < m.classes.size(); ++c) {
            LayerShape candidate = m.classes[c].shape;
            candidate.weightMacs = 0;
            candidate.expertMacs = 0;
            if (candidate == shape) {
                m.mtpClass = int(c);
                break;
            }
        }
        if (m.mtpClass < 0) {
            setWeightMacs(shape, m.mtpLayer);
            m.classes.push_back({ shape, m.mtpLayer, 0 });
            m.mtpClass = int(m.classes.size()) - 1;
        }
    }

    m.classPrefix.assign(m.classes.size(), std::vector<int>(perLayer.size() + 1, 0));
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
        for (std::size_t i = 0; i < perLayer.size(); ++i) {
            m.classPrefix[c][i + 1] = m.classPrefix[c][i] + (m.layerClass[i] == int(c) ? 1 : 0);
        }
    }

    double total = m.embedding.params.total() + m.lmHead.params.total() + m.finalNorm.params.total()
        + m.vision.params.total();
    double active
        = m.embedding.params.total() + m.lmHead.params.total() + m.finalNorm.params.total();
    for (const auto& c : m.classes) {
        total += c.count * c.weights.params.total();
        const double routedShare
            = c.shape.moe && c.shape.experts > 0 ? c.shape.topK / c.shape.experts : 1.0;
        active += c.count
            * (c.weights.params.tp + c.weights.params.replicated - c.weights.lookupParams
                + c.weights.params.expert * routedShare);
    }
    for (const auto& [layer, w] : mtpLayers) {
        total += w.params.total();
    }
    m.totalParams = total;
    m.activeParams = active;
    if (m.numMtp > 0) {
        m.notes.push_back(
            fmt::format("{} MTP layer(s) are placed on the last pipeline stage", m.numMtp));
    }
    m.partial = spec.partial;
    for (const auto& key : spec.ignored) {
        m.ignored.push_back(fmt::format("{} ({})", key.path, key.reason));
    }
    const bool recurrent = std::any_of(m.classes.begin(), m.classes.end(),
        [](const LayerClass& c) { return c.shape.stateFlopsPerToken > 0; });
    if (recurrent) {
        m.notes.push_back("linear-attention and Mamba layers: FLOPs from their weights plus an "
                          "estimated state update (Gated DeltaNet/KDA 6·d_k·d_v per value head, "
                          "Mamba-2 5·head_dim·state per head per token); their state is a fixed "
                          "per-sequence cache");
    }
    if (m.vision.params.total() > 0) {
        m.notes.push_back("the vision tower's weights sit on the first pipeline stage; its "
                          "activations are not modelled");
    }
    return m;
}

} // namespace day0::plan
