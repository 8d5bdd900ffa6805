// What each kind of decoder layer keeps between tokens. Formulas, per layer and sequence:
// - softmax attention (MHA/GQA/MQA): K and V, 2·kv_heads·head_dim per token (Gemma-4's
//   attention_k_eq_v layers still cache both: K and V get different norms and RoPE); sliding
//   layers keep at most `sliding_window` tokens, Llama-4 chunked layers one chunk; Gemma-4's
//   last num_kv_shared_layers layers reuse an earlier layer's cache and keep nothing.
// - MLA (DeepSeek-V2/V3, Kimi, GLM): the normalised latent and the rotary key,
//   kv_lora_rank + qk_rope_head_dim per token, the same on every TP rank; the DSA indexer
//   (DeepSeek-V3.2, GLM-5) adds its key, index_head_dim per token (HF update_indexer, model
//   dtype).
// - DeepSeek-V4 (reference inference/model.py): one K=V vector of head_dim per cached position;
//   every layer keeps a window of `sliding_window` raw entries; ratio r > 0 adds one compressed
//   entry per r tokens; r = 4 (CSA) also keeps the indexer's key per 4 tokens (index_head_dim)
//   and, like r = 128 (HCA), small fixed F32 compressor states (kv_state and score_state,
//   2·(coff·r)·(coff·d), coff = 2 for the overlapping r = 4 compressor, 1 otherwise; the CSA
//   indexer's compressor 2·(2·4)·(2·index_head_dim)). The KV-dtype terms reproduce the model
//   card's "9.62 GiB/sequence (in bf16)" at 1M tokens for DeepSeek-V4-Pro exactly
//   (10,334,371,840 B); the card does not count the F32 compressor states (18,710,528 B more
//   for Pro's 31 HCA and 30 CSA layers).
// - MiniMax-M3 block-sparse layers: full K and V plus one index key of sparse_index_dim per
//   token (transformers MiniMaxM3VLSparseCacheLayer.update_index).
// - Gated DeltaNet (Qwen3-Next / Qwen3.5): a conv state of conv_dim × (kernel − 1) in the model
//   dtype (vLLM gated_delta_net_state_shape; conv_dim = 2·key_heads·key_dim + value_heads·
//   value_dim) and a recurrent state value_heads × key_dim × value_dim in mamba_ssm_dtype.
// - Kimi Delta Attention: q, k and v short convolutions, 3 · heads·head_dim × (kernel − 1) in
//   the model dtype, and an F32 recurrent state heads × head_dim × head_dim.
// - Mamba-2 (Nemotron-H): conv state (kernel − 1) × (heads·head_dim + 2·groups·state) in the
//   model dtype and an SSM state heads × head_dim × state in mamba_ssm_cache_dtype (vLLM
//   mamba2 state shapes).
// - linear-replaced and no-op mixers keep nothing.

#include "model/cache_footprint.h"

#include <algorithm>
#include <cmath>

namespace day0::model {

namespace {

void addKv(
    std::vector<CacheTerm>& out, const ModelSpec& spec, const LayerSpec& layer, std::int64_t window)
{
    const std::int64_t kv = spec.kvHeadsOf(layer);
    const std::int64_t d = spec.headDimOf(layer);
    out.push_back({ "kv", double(2 * kv * d), 0.0, window, kv, std::nullopt });
}

void addLatent(std::vector<CacheTerm>& out, const ModelSpec& spec)
{
    out.push_back({ "latent kv", double(spec.mla.kvLoraRank + spec.mla.qkRopeHeadDim), 0.0, 0, 1,
        std::nullopt });
}

void addCompressed(std::vector<CacheTerm>& out, const ModelSpec& spec, const LayerSpec& layer)
{
    const double d = double(spec.headDimOf(layer));
    out.push_back({ "kv window", d, 0.0, layer.slidingWindow, 1, std::nullopt });
    const std::int64_t r = layer.compressRatio;
    if (r <= 0) {
        return;
    }
    const double coff = r == 4 ? 2.0 : 1.0;
    out.push_back({ "compressed kv", d / double(r), 0.0, 0, 1, std::nullopt });
    out.push_back(
        { "compressor state", 0.0, 2.0 * (coff * double(r)) * (coff * d), 0, 1, DType::F32 });
    if (r == 4 && spec.compressedAttention) {
        const double di = double(spec.compressedAttention->indexerHeadDim);
        out.push_back({ "indexer keys", di / 4.0, 0.0, 0, 1, std::nullopt });
        out.push_back(
            { "indexer compressor state", 0.0, 2.0 * 8.0 * (2.0 * di), 0, 1, DType::F32 });
    }
}

} // namespace

std::vector<CacheTerm> layerCache(const ModelSpec& spec, const LayerSpec& layer, std::int64_t index)
{
    std::vector<CacheTerm> out;
    const bool mla = spec.attention == AttentionKind::MLA;
    if (spec.kvSharedLayers > 0 && index >= spec.numLayers - spec.kvSharedLayers
        && layer.attends()) {
        return out; // reads an earlier layer's cache
    }
    switch (layer.mixer) {
    case MixerKind::Attention:
        if (mla) {
            addLatent(out, spec);
        } else {
            addKv(out, spec, layer, 0);
        }
        break;
    case MixerKind::Sliding:
        addKv(out, spec, layer, layer.slidingWindow);
        break;
    case MixerKind::Chunked:
        addKv(out, spec, layer, layer.attentionChunk);
        break;
    case MixerKind::SparseMla:
        addLatent(out, spec);
        out.push_back({ "indexer keys", double(spec.mla.indexerHeadDim), 0.0, 0, 1, std::nullopt });
        break;
    case MixerKind::Compressed:
        addCompressed(out, spec, layer);
        break;
    case MixerKind::BlockSparse:
        addKv(out, spec, layer, 0);
        if (spec.blockSparse) {
            out.push_back(
                { "index keys", double(spec.blockSparse->indexDim), 0.0, 0, 1, std::nullopt });
        }
        break;
    case MixerKind::GatedDeltaNet:
        if (const auto& la = spec.linearAttention) {
            const double convDim
                = double(2 * la->keyHeads * la->keyHeadDim + la->valueHeads * la->valueHeadDim);
            out.push_back({ "conv state", 0.0, convDim * double(la->convKernel - 1), 0,
                la->valueHeads, spec.dtype });
            out.push_back({ "recurrent state", 0.0,
                double(la->valueHeads * la->keyHeadDim * la->valueHeadDim), 0, la->valueHeads,
                la->stateDtype });
        }
        break;
    case MixerKind::KimiDelta:
        if (const auto& la = spec.linearAttention) {
            const double width = double(la->valueHeads * la->valueHeadDim);
            out.push_back({ "conv state", 0.0, 3.0 * width * double(la->convKernel - 1), 0,
                la->valueHeads, spec.dtype });
            out.push_back({ "recurrent state", 0.0,
                double(la->valueHeads * la->keyHeadDim * la->valueHeadDim), 0, la->valueHeads,
                la->stateDtype });
        }
        break;
    case MixerKind::Mamba2:
        if (const auto& m = spec.mamba) {
            out.push_back({ "conv state", 0.0, double(m->convChannels() * (m->convKernel - 1)), 0,
                m->numHeads, spec.dtype });
            out.push_back({ "ssm state", 0.0, double(m->numHeads * m->headDim * m->stateSize), 0,
                m->numHeads, m->stateDtype });
        }
        break;
    case MixerKind::Linear:
    case MixerKind::None:
        break;
    }
    return out;
}

double cacheBytes(const std::vector<CacheTerm>& terms, double context, int tp, double kvBytes)
{
    double bytes = 0.0;
    for (const auto& t : terms) {
        const double tokens = t.window > 0 ? std::min(context, double(t.window)) : context;
        const double elements = t.elementsPerToken * tokens + t.elementsPerSequence;
        // Heads split over the TP group; with fewer heads than ranks each rank keeps one head.
        const double perHead = elements / double(std::max<std::int64_t>(t.heads, 1));
        const double headsHere = std::max(1.0, double(t.heads) / double(std::max(tp, 1)));
        const double each = t.dtype ? double(dtypeSize(*t.dtype)) : kvBytes;
        bytes += perHead * std::min(headsHere, double(t.heads)) * each;
    }
    return bytes;
}

std::vector<CacheByKind> cacheByKind(const ModelSpec& spec, double context, double kvBytes)
{
    std::vector<CacheByKind> out;
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        const LayerSpec& layer = spec.layers[i];
        const auto terms = layerCache(spec, layer, std::int64_t(i));
        auto it = std::find_if(
            out.begin(), out.end(), [&](const CacheByKind& c) { return c.kind == layer.mixer; });
        if (it == out.end()) {
            out.push_back({ layer.mixer, 0, 0.0, 0.0, 0.0 });
            it = out.end() - 1;
        }
        it->layers += 1;
        it->bytes += cacheBytes(terms, context, 1, kvBytes);
        for (const auto& t : terms) {
            const double each = t.dtype ? double(dtypeSize(*t.dtype)) : kvBytes;
            if (t.window > 0 && context > double(t.window)) {
                it->fixedBytes += t.elementsPerToken * double(t.window) * each;
            } else if (t.window == 0) {
                it->bytesPerToken += t.elementsPerToken * each;
            }
            it->fixedBytes += t.elementsPerSequence * each;
        }
    }
    return out;
}

} // namespace day0::model
