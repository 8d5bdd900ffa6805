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
    bucketOf(w.fp8Bytes, t) += quantisable(t) ? params + fp8BlockScaleBytes(t) : params * 2.0;
}

bool sameWeights(const BlockWeights& a, const BlockWeights& b)
{
    return a.params.tp == b.params.tp && a.params.replicated == b.params.replicated
        && a.params.expert == b.params.expert
        && a.checkpointBytes.total() == b.checkpointBytes.total();
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
    return layerShapeFromSpec(spec, ls);
}

LayerShape layerShapeFromSpec(const model::ModelSpec& spec, const model::LayerSpec& ls)
{
    LayerShape s;
    s.attention = spec.attention;
    s.hidden = double(spec.hiddenSize);
    s.heads = double(spec.numHeads);
    if (spec.attention == model::AttentionKind::MLA) {
        s.kvHeads = s.heads;
        s.qkHeadDim = double(spec.mla.qkNopeHeadDim + spec.mla.qkRopeHeadDim);
        s.vHeadDim = double(spec.mla.vHeadDim);
        s.qLoraRank = double(spec.mla.qLoraRank);
        s.kvLoraRank = double(spec.mla.kvLoraRank);
        s.ropeDim = double(spec.mla.qkRopeHeadDim);
    } else {
        s.kvHeads = double(spec.numKvHeads > 0 ? spec.numKvHeads : spec.numHeads);
        s.qkHeadDim = double(spec.headDim);
        s.vHeadDim = double(spec.headDim);
    }
    s.window = double(ls.slidingWindow > 0 ? ls.slidingWindow : ls.attentionChunk);
    s.gated = spec.gatedMlp;
    s.ffn = double(spec.intermediateSize);
    s.moe = ls.moe() && spec.moe.has_value();
    if (s.moe) {
        s.experts = double(spec.moe->numExperts);
        s.topK = double(spec.moe->topK);
        s.expertFfn = double(spec.moe->expertIntermediate);
        s.sharedFfn = double(spec.moe->sharedIntermediate);
    }
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
        const LayerShape shape = layerShapeFromSpec(spec, int(i));
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
        const LayerShape shape = spec.mtpLayers.empty()
            ? layerShapeFromSpec(spec, m.numLayers - 1)
            : layerShapeFromSpec(spec, spec.mtpLayers.front());
        for (std::size_t c = 0; c < m.classes.size(); ++c) {
            if (m.classes[c].shape == shape) {
                m.mtpClass = int(c);
                break;
            }
        }
        if (m.mtpClass < 0) {
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
            * (c.weights.params.tp + c.weights.params.replicated
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
    if (m.vision.params.total() > 0) {
        m.notes.push_back("the vision tower's weights sit on the first pipeline stage; its "
                          "activations are not modelled");
    }
    return m;
}

} // namespace day0::plan
