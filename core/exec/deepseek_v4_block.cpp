// DeepSeek-V4 (model_type deepseek_v4) on the reference engine, reading DeepSeek's native
// checkpoint names (family_deepseek_v4.cpp) and recording its captures under the Hugging Face
// module names of its PyTorch twin (plugins/torch/day0_torch_deepseek_v4.py).
//
// Written from transformers' modeling_deepseek_v4.py @ 019760818965c71b0a4d38e95820ee0b6cee4240
// and configuration_deepseek_v4.py @ 015c078164151a049126942989817713e83a8f3e (the facts of
// each piece are given where it is computed):
// - the residual is hc_mult streams, each block wrapped in two hyper-connections
//   (DeepseekV4HyperConnection), the head collapsing them (DeepseekV4HyperHead);
// - attention (DeepseekV4Attention): one K=V head, a sliding window, the compressed entries of
//   a ratio-r compressor (DeepseekV4HCACompressor; ratio 4: the overlapping
//   DeepseekV4CSACompressor with its Lightning indexer choosing index_topk entries per query),
//   a sink per head, the output's RoPE lanes rotated back, a grouped output projection;
// - MoE (DeepseekV4SparseMoeBlock): sqrtsoftplus router, hash-routed first layers (tid2eid),
//   routed_scaling_factor, the shared expert, the SwiGLU clamped at swiglu_limit.
// The compressors keep every position's projections, so the entries of a window are pooled
// when its last token arrives, as HF's cache does across prefill and decode steps. The MTP
// blocks are not run (as for DeepSeek-V3). The float engine emulates the precision plans
// (bf16, fp16, fp8, int8, nvfp4, mxfp4, int4) as deepseek_v4_forward.cpp says; deepseekV4Init
// refuses an override of the router, which stays in fp32.
#include "exec/deepseek_v4.h"
#include "exec/deepseek_v4_check.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace day0::exec::detail {

namespace {

constexpr std::int64_t kCsaRatio = 4; ///< the overlapping compressor with the indexer

std::string blockName(int layer) { return fmt::format("layers.{}", layer); }

} // namespace

std::vector<WeightRequirement> deepseekV4Weights(const model::ModelSpec& spec)
{
    std::vector<WeightRequirement> w;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t d = spec.headDim;
    const std::int64_t heads = spec.numHeads;
    const auto& ca = *spec.compressedAttention;
    const auto& moe = *spec.moe;
    const std::int64_t streams = spec.hyperConnections->streams;
    const std::int64_t mix = (2 + streams) * streams;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        w.push_back({ std::move(name), std::move(shape), false });
    };
    const auto addCompressor = [&](const std::string& c, std::int64_t ratio, std::int64_t width) {
        const std::int64_t coff = ratio == kCsaRatio ? 2 : 1;
        add(c + ".ape", { ratio, coff * width });
        add(c + ".wkv.weight", { coff * width, h });
        add(c + ".wgate.weight", { coff * width, h });
        add(c + ".norm.weight", { width });
    };
    add("embed.weight", { spec.vocabSize, h });
    for (int l = 0; l < int(spec.numLayers); ++l) {
        const model::LayerSpec& layer = spec.layers[std::size_t(l)];
        const std::string p = blockName(l);
        const std::string a = p + ".attn";
        add(p + ".attn_norm.weight", { h });
        add(p + ".ffn_norm.weight", { h });
        for (const char* hc : { ".hc_attn", ".hc_ffn" }) {
            add(p + hc + "_fn", { mix, streams * h });
            add(p + hc + "_base", { mix });
            add(p + hc + "_scale", { 3 });
        }
        add(a + ".attn_sink", { heads });
        add(a + ".wq_a.weight", { ca.qLoraRank, h });
        add(a + ".q_norm.weight", { ca.qLoraRank });
        add(a + ".wq_b.weight", { heads * d, ca.qLoraRank });
        add(a + ".wkv.weight", { d, h });
        add(a + ".kv_norm.weight", { d });
        add(a + ".wo_a.weight", { ca.oGroups * ca.oLoraRank, heads * d / ca.oGroups });
        add(a + ".wo_b.weight", { h, ca.oGroups * ca.oLoraRank });
        if (layer.compressRatio > 0) {
            addCompressor(a + ".compressor", layer.compressRatio, d);
        }
        if (layer.compressRatio == kCsaRatio) {
            add(a + ".indexer.wq_b.weight", { ca.indexerHeads * ca.indexerHeadDim, ca.qLoraRank });
            add(a + ".indexer.weights_proj.weight", { ca.indexerHeads, h });
            addCompressor(a + ".indexer.compressor", kCsaRatio, ca.indexerHeadDim);
        }
        const std::string f = p + ".ffn";
        add(f + ".gate.weight", { moe.numExperts, h });
        if (layer.hashRouted) {
            w.push_back({ f + ".gate.tid2eid", { spec.vocabSize, moe.topK }, false, true });
        } else {
            add(f + ".gate.bias", { moe.numExperts });
        }
        const auto addMlp = [&](const std::string& m, std::int64_t width) {
            add(m + ".w1.weight", { width, h });
            add(m + ".w2.weight", { h, width });
            add(m + ".w3.weight", { width, h });
        };
        for (std::int64_t e = 0; e < moe.numExperts; ++e) {
            addMlp(fmt::format("{}.experts.{}", f, e), moe.expertIntermediate);
        }
        addMlp(f + ".shared_experts", moe.sharedIntermediate);
    }
    add("hc_head_fn", { streams, streams * h });
    add("hc_head_base", { streams });
    add("hc_head_scale", { 1 });
    add("norm.weight", { h });
    add("head.weight", { spec.vocabSize, h });
    return w;
}

std::vector<std::string> deepseekV4Unsupported(const model::ModelSpec& spec)
{
    std::vector<std::string> out;
    if (!spec.compressedAttention || !spec.hyperConnections || !spec.moe) {
        out.emplace_back("a deepseek_v4 spec without its compressed attention, hyper-connections "
                         "or MoE");
        return out;
    }
    const auto& ca = *spec.compressedAttention;
    // Its released format (block FP8 with F8_E8M0 `.scale` tensors, FP4 experts) is dequantised
    // on load (exec/checkpoint_weights.cpp); readDeepseekV4 refuses any other.
    if (ca.ropeDim % 2 != 0 || ca.ropeDim > spec.headDim
        || (ca.indexerHeadDim > 0 && ca.ropeDim > ca.indexerHeadDim)) {
        out.push_back(fmt::format("deepseek_v4 qk_rope_head_dim {} (must be even and fit head_dim "
                                  "{} and index_head_dim {})",
            ca.ropeDim, spec.headDim, ca.indexerHeadDim));
    }
    if (spec.ropeScaling.type != "default" && spec.ropeScaling.type != "yarn") {
        out.push_back(fmt::format("RoPE type '{}' of deepseek_v4's compressed layers (the engine "
                                  "computes default and yarn)",
            spec.ropeScaling.type));
    }
    if (spec.moe->scoring != model::RouterScoring::SqrtSoftplus) {
        out.emplace_back("deepseek_v4 scoring_func other than sqrtsoftplus");
    }
    return out;
}

std::string deepseekV4PlanRefusal(const PrecisionPlan& plan)
{
    const auto router = plan.perOpKind.find(numerics::OpKind::Router);
    if (router != plan.perOpKind.end() && router->second != PrecisionMode::F32) {
        return fmt::format("router={} on deepseek_v4 (its router, like DeepSeek-V3's, runs in "
                           "fp32 under every plan)",
            precisionName(router->second));
    }
    return {};
}

// --- the forward -------------------------------------------------------------------------

Result<std::pair<Rope, Rope>> deepseekV4Ropes(const model::ModelSpec& spec)
{
    const auto& ca = *spec.compressedAttention;
    // configuration_deepseek_v4.py: sliding layers rotate with rope_theta and no scaling; the
    // compressed layers, their compressors and indexer with compress_rope_theta and the YaRN
    // of rope_scaling, attention factor forced to 1 (cos and sin unscaled).
    auto mainRope
        = makeRope(ca.ropeDim, spec.ropeTheta, model::RopeScaling {}, RopeLayout::Interleaved);
    if (!mainRope) {
        return mainRope.error();
    }
    auto compressRope
        = makeRope(ca.ropeDim, ca.compressRopeTheta > 0 ? ca.compressRopeTheta : spec.ropeTheta,
            spec.ropeScaling, RopeLayout::Interleaved);
    if (!compressRope) {
        return compressRope.error();
    }
    compressRope->attentionScaling = 1.0;
    return std::pair<Rope, Rope> { std::move(*mainRope), std::move(*compressRope) };
}

template <typename T>
void deepseekV4SizeLayer(typename DeepseekV4Cache<T>::Layer& c, const model::ModelSpec& spec,
    std::size_t layer, std::int64_t capacity, const Rope& mainRope, const Rope& compressRope)
{
    const auto sizeCompressor
        = [&](typename DeepseekV4Cache<T>::Compressor& k, std::int64_t ratio, std::int64_t width) {
              const std::int64_t coff = ratio == kCsaRatio ? 2 : 1;
              k.ratio = ratio;
              k.width = width;
              k.count = 0;
              k.kv.assign(std::size_t(capacity * coff * width), T(0));
              k.gate.assign(std::size_t(capacity * coff * width), T(0));
              k.entries.assign(std::size_t((capacity / ratio + 1) * width), T(0));
          };
    const std::int64_t ratio = spec.layers[layer].compressRatio;
    c.kv.assign(std::size_t(capacity * spec.headDim), T(0));
    c.rope = ratio > 0 ? &compressRope : &mainRope;
    if (ratio > 0) {
        sizeCompressor(c.compressor, ratio, spec.headDim);
    }
    if (ratio == kCsaRatio) {
        sizeCompressor(c.indexer, ratio, spec.compressedAttention->indexerHeadDim);
    }
}

template void deepseekV4SizeLayer<float>(DeepseekV4Cache<float>::Layer&, const model::ModelSpec&,
    std::size_t, std::int64_t, const Rope&, const Rope&);
template void deepseekV4SizeLayer<double>(DeepseekV4Cache<double>::Layer&, const model::ModelSpec&,
    std::size_t, std::int64_t, const Rope&, const Rope&);

template <typename T> Result<void> Forward<T>::deepseekV4Init()
{
    const auto missing = deepseekV4Unsupported(m_spec);
    if (!missing.empty()) {
        return Error::unsupported(fmt::format("{}", fmt::join(missing, "; ")));
    }
    if (const auto refusal = deepseekV4PlanRefusal(m_plan); !refusal.empty()) {
        return Error::unsupported(refusal);
    }
    auto cache = std::make_shared<DeepseekV4Cache<T>>();
    auto ropes = deepseekV4Ropes(m_spec);
    if (!ropes) {
        return ropes.error();
    }
    cache->mainRope = std::move(ropes->first);
    cache->compressRope = std::move(ropes->second);
    cache->layers.resize(std::size_t(m_spec.numLayers));
    for (std::size_t l = 0; l < cache->layers.size(); ++l) {
        deepseekV4SizeLayer<T>(
            cache->layers[l], m_spec, l, m_capacity, cache->mainRope, cache->compressRope);
    }
    m_v4 = std::move(cache);
    return success();
}

// A compressor's step (DeepseekV4HCACompressor / DeepseekV4CSACompressor): projects the rows
// of x at positions [start, start + n), then pools every window whose last token arrived. Entry
// w pools, channel by channel, softmax(wgate(x) + ape) · wkv(x) over its window's tokens; with
// ratio 4 the projections are 2·width wide and entry w pools window w-1's first halves with
// window w's second halves (2·ratio slots; window 0 has no previous one). The entry is then
// normed and rotated at position w · ratio.
template <typename T>
void deepseekV4Compress(typename DeepseekV4Cache<T>::Compressor& c, const std::string& module,
    const WeightTable& weights, const T* x, std::int64_t n, std::int64_t start, std::int64_t h,
    double eps, const Rope& rope)
{
    const auto w = [&](const std::string& name) {
        return weights.tensors.at(module + name).template data<T>();
    };
    const std::int64_t r = c.ratio;
    const std::int64_t d = c.width;
    const bool overlap = r == kCsaRatio;
    const std::int64_t cw = (overlap ? 2 : 1) * d;
    linear<T>(x, w(".wkv.weight"), nullptr, c.kv.data() + start * cw, n, h, cw);
    linear<T>(x, w(".wgate.weight"), nullptr, c.gate.data() + start * cw, n, h, cw);
    const T* ape = w(".ape");
    const T* norm = w(".norm.weight");
    std::vector<double> logits;
    std::vector<double> values;
    for (std::int64_t p = start; p < start + n; ++p) {
        if ((p + 1) % r != 0) {
            continue;
        }
        const std::int64_t entry = (p + 1) / r - 1;
        const std::int64_t first = entry * r;
        T* out = c.entries.data() + entry * d;
        for (std::int64_t ch = 0; ch < d; ++ch) {
            logits.clear();
            values.clear();
            // The previous window's first halves (ratio 4 only), then this window's slots.
            if (overlap && entry > 0) {
                for (std::int64_t j = 0; j < r; ++j) {
                    const std::int64_t row = first - r + j;
                    logits.push_back(double(c.gate[std::size_t(row * cw + ch)])
                        + double(ape[std::size_t(j * cw + ch)]));
                    values.push_back(double(c.kv[std::size_t(row * cw + ch)]));
                }
            }
            const std::int64_t half = overlap ? d : 0;
            for (std::int64_t j = 0; j < r; ++j) {
                const std::int64_t row = first + j;
                logits.push_back(double(c.gate[std::size_t(row * cw + half + ch)])
                    + double(ape[std::size_t(j * cw + half + ch)]));
                values.push_back(double(c.kv[std::size_t(row * cw + half + ch)]));
            }
            const double top = *std::max_element(logits.begin(), logits.end());
            double sum = 0.0;
            double acc = 0.0;
            for (std::size_t j = 0; j < logits.size(); ++j) {
                const double e = std::exp(logits[j] - top);
                sum += e;
                acc += e * values[j];
            }
            out[ch] = T(acc / sum);
        }
        rmsNorm<T>(out, norm, out, 1, d, eps);
        rotateTail(out, 1, d, first, rope);
        c.count = entry + 1;
    }
}

// The Lightning indexer (DeepseekV4Indexer): each query row at p scores the entries it may
// see (w < (p + 1) / 4) Σ_h weights_proj(x)_h · H^-½ · relu(q_h · k_w) · D^-½ with
// q = wq_b(q latent) rotated at p.
template <typename T>
std::vector<double> deepseekV4IndexScores(const typename DeepseekV4Cache<T>::Compressor& ix,
    const std::string& module, const WeightTable& weights, const model::ModelSpec& spec, const T* x,
    const T* qLatent, std::int64_t n, std::int64_t start, const Rope& rope)
{
    const auto& ca = *spec.compressedAttention;
    const std::int64_t heads = ca.indexerHeads;
    const std::int64_t d = ca.indexerHeadDim;
    std::vector<T> q(std::size_t(n * heads * d));
    std::vector<T> hw(std::size_t(n * heads));
    linear<T>(qLatent, weights.tensors.at(module + ".wq_b.weight").template data<T>(), nullptr,
        q.data(), n, ca.qLoraRank, heads * d);
    linear<T>(x, weights.tensors.at(module + ".weights_proj.weight").template data<T>(), nullptr,
        hw.data(), n, spec.hiddenSize, heads);
    const std::int64_t count = ix.count;
    std::vector<double> scores(std::size_t(n * count), -std::numeric_limits<double>::infinity());
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t p = start + t;
        T* qt = q.data() + t * heads * d;
        rotateTail(qt, heads, d, p, rope);
        const std::int64_t visible = std::min((p + 1) / ix.ratio, count);
        for (std::int64_t e = 0; e < visible; ++e) {
            const T* key = ix.entries.data() + e * d;
            double score = 0.0;
            for (std::int64_t hd = 0; hd < heads; ++hd) {
                double dot = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    dot += double(qt[hd * d + c]) * double(key[c]);
                }
                score += double(hw[std::size_t(t * heads + hd)]) / std::sqrt(double(heads))
                    * std::max(dot, 0.0) / std::sqrt(double(d));
            }
            scores[std::size_t(t * count + e)] = score;
        }
    }
    return scores;
}

// The indexer's choice: for each query row, the top index_topk of the entries it may see by
// deepseekV4IndexScores (ties to the lower id); `selected` gets index_topk ids per row, -1
// where fewer entries are visible.
template <typename T>
void deepseekV4Select(const typename DeepseekV4Cache<T>::Compressor& ix, const std::string& module,
    const WeightTable& weights, const model::ModelSpec& spec, const T* x, const T* qLatent,
    std::int64_t n, std::int64_t start, const Rope& rope, std::vector<std::int64_t>& selected)
{
    const std::int64_t k = spec.compressedAttention->indexerTopK;
    const std::vector<double> scores
        = deepseekV4IndexScores<T>(ix, module, weights, spec, x, qLatent, n, start, rope);
    const std::int64_t count = ix.count;
    selected.assign(std::size_t(n * k), -1);
    std::vector<std::pair<double, std::int64_t>> scored;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t visible = std::min((start + t + 1) / ix.ratio, count);
        scored.clear();
        for (std::int64_t e = 0; e < visible; ++e) {
            scored.emplace_back(scores[std::size_t(t * count + e)], e);
        }
        const auto keep = std::min<std::int64_t>(k, std::int64_t(scored.size()));
        std::partial_sort(
            scored.begin(), scored.begin() + keep, scored.end(), [](const auto& a, const auto& b) {
                return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
        for (std::int64_t j = 0; j < keep; ++j) {
            selected[std::size_t(t * k + j)] = scored[std::size_t(j)].second;
        }
    }
}

template void deepseekV4Compress<float>(DeepseekV4Cache<float>::Compressor&, const std::string&,
    const WeightTable&, const float*, std::int64_t, std::int64_t, std::int64_t, double,
    const Rope&);
template void deepseekV4Compress<double>(DeepseekV4Cache<double>::Compressor&, const std::string&,
    const WeightTable&, const double*, std::int64_t, std::int64_t, std::int64_t, double,
    const Rope&);
template std::vector<double> deepseekV4IndexScores<float>(const DeepseekV4Cache<float>::Compressor&,
    const std::string&, const WeightTable&, const model::ModelSpec&, const float*, const float*,
    std::int64_t, std::int64_t, const Rope&);
template std::vector<double> deepseekV4IndexScores<double>(
    const DeepseekV4Cache<double>::Compressor&, const std::string&, const WeightTable&,
    const model::ModelSpec&, const double*, const double*, std::int64_t, std::int64_t, const Rope&);
template void deepseekV4Select<float>(const DeepseekV4Cache<float>::Compressor&, const std::string&,
    const WeightTable&, const model::ModelSpec&, const float*, const float*, std::int64_t,
    std::int64_t, const Rope&, std::vector<std::int64_t>&);
template void deepseekV4Select<double>(const DeepseekV4Cache<double>::Compressor&,
    const std::string&, const WeightTable&, const model::ModelSpec&, const double*, const double*,
    std::int64_t, std::int64_t, const Rope&, std::vector<std::int64_t>&);
template Result<void> Forward<float>::deepseekV4Init();
template Result<void> Forward<double>::deepseekV4Init();

} // namespace day0::exec::detail
