// DeepSeek-V4's gradient pass (gradient_pass.h, issue #25): the forward of deepseek_v4_forward.cpp
// and deepseek_v4_block.cpp over the prompt's tokens, keeping what the backward reads, then the
// reverse of each op. The residual is hc_mult streams: each block's two hyper-connections (the
// maps from the RMS-normalised streams: pre and post through their sigmoids, comb through its
// softmax and the Sinkhorn steps, each step's input kept) collapse the streams into its input and
// expand its output back; hc_head collapses them before the final norm. Attention: the q latent,
// its norm, wq_b, the per-head weightless RMS and RoPE; the one K=V head (kv_norm, RoPE); the keys
// of a query its window of K=V plus the compressed entries it may see (ratio 4: those its
// Lightning indexer chose), a sink per head; the output's rope lanes rotated back, the grouped
// wo_a, wo_b. The compressor's entries get their gradient through their RoPE, norm and the
// softmax pooling of wkv(x) by wgate(x) + ape. The indexer's choice is discrete: no gradient
// reaches its weights (zero, present), as in the twin's autograd (its top-k indices carry none).
// MoE: the sqrtsoftplus router's scores of the chosen experts (by score + bias, or tid2eid on the
// hash-routed layers: there the choice is a table lookup, but the chosen scores still weight the
// experts, so the router's weight gets a gradient there too, as in the twin) renormalised times
// routed_scaling_factor; the clamped SwiGLU experts and shared expert. The selection bias and
// tid2eid get none (untrainableParameter). The forward's own helpers (deepseek_v4.h) compute the
// compressors' entries, the indexer's choice and the routing, so the choices are the engine's.
// Parameters keep the native checkpoint names the engine reads (layers.3.attn.wq_a.weight);
// checkpointGradients renames them to the twin's HF names (deepseekV4HfName).
#include "exec/backward_ops.h"
#include "exec/deepseek_v4.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::exec::detail {

/// What DeepSeek-V4's pass reads beside the parameters: the weights as the forward's helpers
/// take them and the two RoPEs.
struct DeepseekV4Context {
    WeightTable table;
    Rope mainRope;
    Rope compressRope;
};

namespace {

constexpr std::int64_t kCsaRatio = 4;

double sigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// One hyper-connection's forward as its backward reads it (its input streams kept apart).
template <typename T> struct HyperSaved {
    std::vector<T> normed; ///< rms(streams) [n, S·h]
    std::vector<T> mixes; ///< [n, mix]
    HyperMaps maps; ///< pre, post, comb
    std::vector<double> soft; ///< softmax(comb logits) [n, S, S] (before + hc_eps)
    std::vector<double> stages; ///< each Sinkhorn step's input [steps, n, S, S]
    std::int64_t steps = 0;
};

/// Whether Sinkhorn step `i` normalises rows (else columns): columns, then rows and columns.
bool sinkhornRows(std::int64_t i) { return i % 2 == 1; }

/// Divides each line (rows or columns) of the S×S matrix c by its sum + eps.
void normaliseLines(double* c, std::int64_t s, bool rows, double eps)
{
    for (std::int64_t a = 0; a < s; ++a) {
        double sum = 0.0;
        for (std::int64_t b = 0; b < s; ++b) {
            sum += rows ? c[a * s + b] : c[b * s + a];
        }
        for (std::int64_t b = 0; b < s; ++b) {
            (rows ? c[a * s + b] : c[b * s + a]) /= sum + eps;
        }
    }
}

/// Its backward: `dc` (the output's gradient) becomes the input's, from the input `c`.
void normaliseLinesBackward(const double* c, double* dc, std::int64_t s, bool rows, double eps)
{
    for (std::int64_t a = 0; a < s; ++a) {
        double sum = 0.0;
        double dot = 0.0;
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            sum += c[i];
        }
        const double denom = sum + eps;
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            dot += dc[i] * c[i];
        }
        for (std::int64_t b = 0; b < s; ++b) {
            const std::int64_t i = rows ? a * s + b : b * s + a;
            dc[i] = dc[i] / denom - dot / (denom * denom);
        }
    }
}

/// The maps of hyper-connection `p` (deepseekV4HyperMaps' arithmetic) with what the backward
/// needs. `head`: hc_head (pre only).
template <typename T>
HyperSaved<T> hyperForward(const ParameterSet<T>& params, const std::string& p, const T* streams,
    std::int64_t n, const model::ModelSpec& spec, bool head)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t s = hc.streams;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* fn = params.value(p + "_fn");
    const T* base = params.value(p + "_base");
    const T* scale = params.value(p + "_scale");
    HyperSaved<T> m;
    m.normed.resize(std::size_t(n * s * h));
    rmsNorm<T>(streams, nullptr, m.normed.data(), n, s * h, spec.normEps);
    m.mixes.resize(std::size_t(n * mix));
    linear<T>(m.normed.data(), fn, nullptr, m.mixes.data(), n, s * h, mix);
    m.maps.pre.resize(std::size_t(n * s));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            m.maps.pre[std::size_t(t * s + j)]
                = sigmoidOf(double(m.mixes[std::size_t(t * mix + j)]) * double(scale[0])
                      + double(base[j]))
                + hc.eps;
        }
    }
    if (head) {
        return m;
    }
    m.steps = 2 * std::max<std::int64_t>(hc.sinkhornIters, 1) - 1;
    m.maps.post.resize(std::size_t(n * s));
    m.maps.comb.resize(std::size_t(n * s * s));
    m.soft.resize(std::size_t(n * s * s));
    m.stages.resize(std::size_t(m.steps * n * s * s));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = m.mixes.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            m.maps.post[std::size_t(t * s + j)]
                = 2.0 * sigmoidOf(double(row[s + j]) * double(scale[1]) + double(base[s + j]));
        }
        double* soft = m.soft.data() + t * s * s;
        double* c = m.maps.comb.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double top = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                soft[j * s + k] = double(row[i]) * double(scale[2]) + double(base[i]);
                top = std::max(top, soft[j * s + k]);
            }
            double sum = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                soft[j * s + k] = std::exp(soft[j * s + k] - top);
                sum += soft[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                soft[j * s + k] /= sum;
                c[j * s + k] = soft[j * s + k] + hc.eps;
            }
        }
        for (std::int64_t i = 0; i < m.steps; ++i) {
            std::copy_n(c, s * s, m.stages.data() + (i * n + t) * s * s);
            normaliseLines(c, s, sinkhornRows(i), hc.eps);
        }
    }
    return m;
}

/// The backward of hyperForward from the maps' gradients (dpost, dcomb empty for the head):
/// the gradients of fn, base and scale accumulated, the streams' (through the RMS) added to
/// `dstreams`.
template <typename T>
void hyperBackward(ParameterSet<T>& params, const std::string& p, const HyperSaved<T>& m,
    const T* streams, std::int64_t n, const model::ModelSpec& spec, const std::vector<double>& dpre,
    const std::vector<double>& dpost, std::vector<double> dcomb, T* dstreams)
{
    const auto& hc = *spec.hyperConnections;
    const std::int64_t s = hc.streams;
    const std::int64_t h = spec.hiddenSize;
    const bool head = dpost.empty();
    const std::int64_t mix = head ? s : (2 + s) * s;
    const T* scale = params.value(p + "_scale");
    T* dbase = params.grad(p + "_base");
    T* dscale = params.grad(p + "_scale");
    std::vector<T> dmix(std::size_t(n * mix), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        const T* row = m.mixes.data() + t * mix;
        T* drow = dmix.data() + t * mix;
        for (std::int64_t j = 0; j < s; ++j) {
            // pre = σ(z) + eps, z = mix·scale₀ + base.
            const double sg = m.maps.pre[std::size_t(t * s + j)] - hc.eps;
            const double dz = dpre[std::size_t(t * s + j)] * sg * (1.0 - sg);
            drow[j] = T(dz * double(scale[0]));
            dscale[0] += T(dz * double(row[j]));
            dbase[j] += T(dz);
        }
        if (head) {
            continue;
        }
        for (std::int64_t j = 0; j < s; ++j) {
            // post = 2σ(z).
            const double sg = m.maps.post[std::size_t(t * s + j)] / 2.0;
            const double dz = dpost[std::size_t(t * s + j)] * 2.0 * sg * (1.0 - sg);
            drow[s + j] = T(dz * double(scale[1]));
            dscale[1] += T(dz * double(row[s + j]));
            dbase[s + j] += T(dz);
        }
        double* dc = dcomb.data() + t * s * s;
        for (std::int64_t i = m.steps - 1; i >= 0; --i) {
            normaliseLinesBackward(
                m.stages.data() + (i * n + t) * s * s, dc, s, sinkhornRows(i), hc.eps);
        }
        // comb₀ = softmax over k of z + eps.
        const double* soft = m.soft.data() + t * s * s;
        for (std::int64_t j = 0; j < s; ++j) {
            double dot = 0.0;
            for (std::int64_t k = 0; k < s; ++k) {
                dot += soft[j * s + k] * dc[j * s + k];
            }
            for (std::int64_t k = 0; k < s; ++k) {
                const std::int64_t i = 2 * s + j * s + k;
                const double dz = soft[j * s + k] * (dc[j * s + k] - dot);
                drow[i] = T(dz * double(scale[2]));
                dscale[2] += T(dz * double(row[i]));
                dbase[i] += T(dz);
            }
        }
    }
    std::vector<T> dnormed(std::size_t(n * s * h));
    linearBackward<T>(m.normed.data(), params.value(p + "_fn"), dmix.data(), dnormed.data(),
        params.grad(p + "_fn"), nullptr, n, s * h, mix, false);
    rmsNormBackward<T>(streams, nullptr, dnormed.data(), dstreams, nullptr, n, s * h, spec.normEps);
}

/// The collapse's backward (out[t] = Σ_j pre[t, j] · streams[t, j]): dpre from `dout`, and
/// pre · dout added to `dstreams`.
template <typename T>
std::vector<double> collapseBackward(const HyperMaps& m, const T* streams, const T* dout,
    std::int64_t n, std::int64_t s, std::int64_t h, T* dstreams)
{
    std::vector<double> dpre(std::size_t(n * s), 0.0);
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            const T* st = streams + (t * s + j) * h;
            T* dst = dstreams + (t * s + j) * h;
            const double pre = m.pre[std::size_t(t * s + j)];
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dot += double(dout[t * h + c]) * double(st[c]);
                dst[c] += T(pre * double(dout[t * h + c]));
            }
            dpre[std::size_t(t * s + j)] = dot;
        }
    }
    return dpre;
}

/// What one decoder layer's forward keeps.
template <typename T> struct V4Layer {
    std::vector<T> streamsIn; ///< the streams before the attention's hyper-connection
    std::vector<T> streamsMid; ///< before the MoE's
    HyperSaved<T> attnHc, ffnHc;
    std::vector<T> x1, xn1, x2, xn2; ///< the collapsed inputs and their norms
    std::vector<T> attnOut, moeOut;
    // Attention.
    std::vector<T> qa, qan, qb, q; ///< q latent, its norm, wq_b's output, q roped [n, H·d]
    std::vector<T> kvp; ///< wkv's output [n, d]
    std::vector<T> keys; ///< K=V roped [n, d], then the compressor's entries [m, d]
    std::int64_t entries = 0;
    typename DeepseekV4Cache<T>::Compressor compressor;
    std::vector<std::int64_t> keyStart; ///< [n + 1]: query t's keys keyIdx[keyStart[t]...)
    std::vector<std::int64_t> keyIdx;
    std::vector<double> probs; ///< [Σ_t heads · keys of t]
    std::vector<double> sinkProbs; ///< [n, heads]
    std::vector<T> attn; ///< the output rotated back, wo_a's input [n, H·d]
    std::vector<T> low; ///< wo_a's output, wo_b's input [n, groups · rank]
    // MoE.
    std::vector<std::int64_t> chosen; ///< [n, k]
    std::vector<double> weights; ///< [n, k]
    std::vector<double> logits; ///< the router's [n, experts]
    std::vector<T> g, u, act, y; ///< each (token, choice)'s expert: [n·k, I] and y [n·k, h]
    std::vector<T> sharedG, sharedU, sharedAct;

    [[nodiscard]] std::int64_t bytes() const
    {
        std::size_t count = streamsIn.size() + streamsMid.size() + x1.size() + xn1.size()
            + x2.size() + xn2.size() + attnOut.size() + moeOut.size() + qa.size() + qan.size()
            + qb.size() + q.size() + kvp.size() + keys.size() + compressor.kv.size()
            + compressor.gate.size() + attn.size() + low.size() + g.size() + u.size() + act.size()
            + y.size() + sharedG.size() + sharedU.size() + sharedAct.size();
        for (const auto* hc : { &attnHc, &ffnHc }) {
            count += hc->normed.size() + hc->mixes.size();
        }
        std::size_t wide = probs.size() + sinkProbs.size() + weights.size() + logits.size();
        for (const auto* hc : { &attnHc, &ffnHc }) {
            wide += hc->maps.pre.size() + hc->maps.post.size() + hc->maps.comb.size()
                + hc->soft.size() + hc->stages.size();
        }
        return std::int64_t(count * sizeof(T) + wide * sizeof(double)
            + (keyIdx.size() + chosen.size()) * sizeof(std::int64_t));
    }
};

/// What the layer functions read: the spec, parameters, the forward's weight table and RoPEs.
template <typename T> struct V4Step {
    const model::ModelSpec& spec;
    ParameterSet<T>& p;
    const DeepseekV4Context& ctx;
    std::int64_t n = 0;
    int layer = 0;

    [[nodiscard]] std::string name(const std::string& leaf) const
    {
        return fmt::format("layers.{}{}", layer, leaf);
    }
    [[nodiscard]] const T* w(const std::string& leaf) const { return p.value(name(leaf)); }
    [[nodiscard]] T* dw(const std::string& leaf) const { return p.grad(name(leaf)); }
    [[nodiscard]] const Rope& rope() const
    {
        return spec.layers[std::size_t(layer)].compressRatio > 0 ? ctx.compressRope : ctx.mainRope;
    }
};

// --- attention ---------------------------------------------------------------------------

/// The keys of query t (deepseek_v4_forward.cpp keysOf): its window of K=V, then the entries
/// it may see (ratio 4: those chosen), as rows of V4Layer::keys.
template <typename T>
void collectKeys(const V4Step<T>& st, V4Layer<T>& a, const std::vector<std::int64_t>& selected)
{
    const auto& layer = st.spec.layers[std::size_t(st.layer)];
    const std::int64_t k = st.spec.compressedAttention->indexerTopK;
    a.keyStart.assign(1, 0);
    a.keyIdx.clear();
    for (std::int64_t t = 0; t < st.n; ++t) {
        for (std::int64_t j = std::max<std::int64_t>(0, t - layer.slidingWindow + 1); j <= t; ++j) {
            a.keyIdx.push_back(j);
        }
        if (layer.compressRatio == kCsaRatio) {
            for (std::int64_t i = 0; i < k; ++i) {
                if (selected[std::size_t(t * k + i)] >= 0) {
                    a.keyIdx.push_back(st.n + selected[std::size_t(t * k + i)]);
                }
            }
        } else if (layer.compressRatio > 0) {
            const std::int64_t visible = std::min((t + 1) / layer.compressRatio, a.entries);
            for (std::int64_t e = 0; e < visible; ++e) {
                a.keyIdx.push_back(st.n + e);
            }
        }
        a.keyStart.push_back(std::int64_t(a.keyIdx.size()));
    }
}

/// Softmax attention of each query over its keys with the head's sink (attendQuery), the
/// probabilities kept; the output's rope lanes rotated back into a.attn.
template <typename T> void attend(const V4Step<T>& st, V4Layer<T>& a)
{
    const std::int64_t heads = st.spec.numHeads;
    const std::int64_t d = st.spec.headDim;
    const double scale = 1.0 / std::sqrt(double(d));
    const T* sinks = st.w(".attn.attn_sink");
    a.probs.assign(std::size_t(heads * a.keyStart.back()), 0.0);
    a.sinkProbs.assign(std::size_t(st.n * heads), 0.0);
    a.attn.assign(std::size_t(st.n * heads * d), T(0));
    for (std::int64_t t = 0; t < st.n; ++t) {
        const std::int64_t first = a.keyStart[std::size_t(t)];
        const std::int64_t count = a.keyStart[std::size_t(t + 1)] - first;
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            const T* qh = a.q.data() + (t * heads + hd) * d;
            double* p = a.probs.data() + first * heads + hd * count;
            double top = double(sinks[hd]);
            for (std::int64_t k = 0; k < count; ++k) {
                const T* key = a.keys.data() + a.keyIdx[std::size_t(first + k)] * d;
                double dot = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    dot += double(qh[c]) * double(key[c]);
                }
                p[k] = dot * scale;
                top = std::max(top, p[k]);
            }
            double sum = std::exp(double(sinks[hd]) - top);
            const double sink = sum;
            for (std::int64_t k = 0; k < count; ++k) {
                p[k] = std::exp(p[k] - top);
                sum += p[k];
            }
            a.sinkProbs[std::size_t(t * heads + hd)] = sink / sum;
            T* o = a.attn.data() + (t * heads + hd) * d;
            for (std::int64_t c = 0; c < d; ++c) {
                double acc = 0.0;
                for (std::int64_t k = 0; k < count; ++k) {
                    acc += p[k]
                        * double(a.keys[std::size_t(a.keyIdx[std::size_t(first + k)] * d + c)]);
                }
                o[c] = T(acc / sum);
            }
            for (std::int64_t k = 0; k < count; ++k) {
                p[k] /= sum;
            }
        }
        rotateTail(a.attn.data() + t * heads * d, heads, d, t, st.rope(), -1.0);
    }
}

/// The attention's forward on a.xn1 into a.attnOut (deepseek_v4_forward.cpp attentionStep).
template <typename T>
void v4AttentionForward(const V4Step<T>& st, V4Layer<T>& a,
    std::vector<std::pair<std::string, numerics::Tensor>>& routing)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t heads = spec.numHeads;
    const std::int64_t d = spec.headDim;
    const std::int64_t ratio = spec.layers[std::size_t(st.layer)].compressRatio;
    const Rope& rope = st.rope();
    a.qa.resize(std::size_t(n * ca.qLoraRank));
    linear<T>(a.xn1.data(), st.w(".attn.wq_a.weight"), nullptr, a.qa.data(), n, h, ca.qLoraRank);
    a.qan.resize(a.qa.size());
    rmsNorm<T>(
        a.qa.data(), st.w(".attn.q_norm.weight"), a.qan.data(), n, ca.qLoraRank, spec.normEps);
    a.qb.resize(std::size_t(n * heads * d));
    linear<T>(
        a.qan.data(), st.w(".attn.wq_b.weight"), nullptr, a.qb.data(), n, ca.qLoraRank, heads * d);
    a.q.resize(a.qb.size());
    rmsNorm<T>(a.qb.data(), nullptr, a.q.data(), n * heads, d, spec.normEps);
    a.kvp.resize(std::size_t(n * d));
    linear<T>(a.xn1.data(), st.w(".attn.wkv.weight"), nullptr, a.kvp.data(), n, h, d);
    std::vector<T> kv(a.kvp.size());
    rmsNorm<T>(a.kvp.data(), st.w(".attn.kv_norm.weight"), kv.data(), n, d, spec.normEps);
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(a.q.data() + t * heads * d, heads, d, t, rope);
        rotateTail(kv.data() + t * d, 1, d, t, rope);
    }
    const auto sizeCompressor
        = [&](typename DeepseekV4Cache<T>::Compressor& c, std::int64_t width) {
              const std::int64_t coff = ratio == kCsaRatio ? 2 : 1;
              c.ratio = ratio;
              c.width = width;
              c.count = 0;
              c.kv.assign(std::size_t(n * coff * width), T(0));
              c.gate.assign(std::size_t(n * coff * width), T(0));
              c.entries.assign(std::size_t((n / ratio + 1) * width), T(0));
          };
    a.entries = 0;
    std::vector<std::int64_t> selected;
    if (ratio > 0) {
        sizeCompressor(a.compressor, d);
        deepseekV4Compress<T>(a.compressor, st.name(".attn.compressor"), st.ctx.table, a.xn1.data(),
            n, 0, h, spec.normEps, rope);
        a.entries = a.compressor.count;
    }
    if (ratio == kCsaRatio) {
        typename DeepseekV4Cache<T>::Compressor indexer;
        sizeCompressor(indexer, ca.indexerHeadDim);
        deepseekV4Compress<T>(indexer, st.name(".attn.indexer.compressor"), st.ctx.table,
            a.xn1.data(), n, 0, h, spec.normEps, rope);
        deepseekV4Select<T>(indexer, st.name(".attn.indexer"), st.ctx.table, spec, a.xn1.data(),
            a.qan.data(), n, 0, rope, selected);
        routing.emplace_back(
            fmt::format("model.layers.{}.self_attn.compressor.indexer#topk", st.layer),
            numerics::Tensor::fromInts({ n, ca.indexerTopK }, selected));
    }
    a.keys.assign(std::size_t((n + a.entries) * d), T(0));
    std::copy(kv.begin(), kv.end(), a.keys.begin());
    std::copy_n(a.compressor.entries.begin(), a.entries * d, a.keys.begin() + n * d);
    collectKeys(st, a, selected);
    attend(st, a);
    // The grouped output projection: group g's heads through its block of wo_a, then wo_b.
    const std::int64_t groups = ca.oGroups;
    const std::int64_t rank = ca.oLoraRank;
    const std::int64_t in = heads * d / groups;
    const T* woA = st.w(".attn.wo_a.weight");
    a.low.assign(std::size_t(n * groups * rank), T(0));
    std::vector<T> slice(std::size_t(n * in));
    std::vector<T> part(std::size_t(n * rank));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(a.attn.data() + t * heads * d + g * in, in, slice.data() + t * in);
        }
        linear<T>(slice.data(), woA + g * rank * in, nullptr, part.data(), n, in, rank);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(part.data() + t * rank, rank, a.low.data() + (t * groups + g) * rank);
        }
    }
    a.attnOut.resize(std::size_t(n * h));
    linear<T>(
        a.low.data(), st.w(".attn.wo_b.weight"), nullptr, a.attnOut.data(), n, groups * rank, h);
}

/// The compressor's backward from its entries' gradients `dentries` [m, d] (their RoPE, norm and
/// the softmax pooling, recomputed from the kept projections): wkv's, wgate's, ape's and the
/// norm's gradients accumulated, the input's added to `dxn1`.
template <typename T>
void compressorBackward(const V4Step<T>& st, const V4Layer<T>& a, std::vector<T> dentries, T* dxn1)
{
    const auto& c = a.compressor;
    const std::int64_t r = c.ratio;
    const std::int64_t d = c.width;
    const bool overlap = r == kCsaRatio;
    const std::int64_t cw = (overlap ? 2 : 1) * d;
    const std::string m = ".attn.compressor";
    const T* ape = st.w(m + ".ape");
    T* dape = st.dw(m + ".ape");
    std::vector<T> dkv(std::size_t(st.n * cw), T(0));
    std::vector<T> dgate(std::size_t(st.n * cw), T(0));
    std::vector<T> pooled(static_cast<std::size_t>(d));
    std::vector<T> dpooled(static_cast<std::size_t>(d));
    std::vector<std::vector<double>> probs(static_cast<std::size_t>(d));
    std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(d));
    for (std::int64_t entry = 0; entry < a.entries; ++entry) {
        const std::int64_t first = entry * r;
        // The pooled entry before its norm, as deepseekV4Compress computes it.
        for (std::int64_t ch = 0; ch < d; ++ch) {
            auto& idx = slots[std::size_t(ch)];
            idx.clear();
            if (overlap && entry > 0) {
                for (std::int64_t j = 0; j < r; ++j) {
                    idx.push_back((first - r + j) * cw + ch);
                    idx.push_back(j * cw + ch);
                }
            }
            const std::int64_t half = overlap ? d : 0;
            for (std::int64_t j = 0; j < r; ++j) {
                idx.push_back((first + j) * cw + half + ch);
                idx.push_back(j * cw + half + ch);
            }
            auto& p = probs[std::size_t(ch)];
            p.clear();
            double top = -std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < idx.size(); i += 2) {
                p.push_back(double(c.gate[std::size_t(idx[i])]) + double(ape[idx[i + 1]]));
                top = std::max(top, p.back());
            }
            double sum = 0.0;
            double acc = 0.0;
            for (std::size_t i = 0; i < p.size(); ++i) {
                p[i] = std::exp(p[i] - top);
                sum += p[i];
                acc += p[i] * double(c.kv[std::size_t(idx[2 * i])]);
            }
            for (double& v : p) {
                v /= sum;
            }
            pooled[std::size_t(ch)] = T(acc / sum);
        }
        T* de = dentries.data() + entry * d;
        rotateTail(de, 1, d, first, st.rope(), -1.0);
        std::fill(dpooled.begin(), dpooled.end(), T(0));
        rmsNormBackward<T>(pooled.data(), st.w(m + ".norm.weight"), de, dpooled.data(),
            st.dw(m + ".norm.weight"), 1, d, st.spec.normEps);
        for (std::int64_t ch = 0; ch < d; ++ch) {
            const auto& idx = slots[std::size_t(ch)];
            const auto& p = probs[std::size_t(ch)];
            const double dp = double(dpooled[std::size_t(ch)]);
            const double mean = double(pooled[std::size_t(ch)]);
            for (std::size_t i = 0; i < p.size(); ++i) {
                const double v = double(c.kv[std::size_t(idx[2 * i])]);
                const double dl = p[i] * (v - mean) * dp;
                dkv[std::size_t(idx[2 * i])] += T(p[i] * dp);
                dgate[std::size_t(idx[2 * i])] += T(dl);
                dape[idx[2 * i + 1]] += T(dl);
            }
        }
    }
    const std::int64_t h = st.spec.hiddenSize;
    linearBackward<T>(a.xn1.data(), st.w(m + ".wkv.weight"), dkv.data(), dxn1,
        st.dw(m + ".wkv.weight"), nullptr, st.n, h, cw, true);
    linearBackward<T>(a.xn1.data(), st.w(m + ".wgate.weight"), dgate.data(), dxn1,
        st.dw(m + ".wgate.weight"), nullptr, st.n, h, cw, true);
}

/// The attention's backward from `dout` [n, h]: every weight's gradient accumulated (the
/// indexer's stay zero), the input's added to `dxn1`.
template <typename T>
void v4AttentionBackward(const V4Step<T>& st, const V4Layer<T>& a, const T* dout, T* dxn1)
{
    const auto& spec = st.spec;
    const auto& ca = *spec.compressedAttention;
    const std::int64_t n = st.n;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t heads = spec.numHeads;
    const std::int64_t d = spec.headDim;
    const std::int64_t groups = ca.oGroups;
    const std::int64_t rank = ca.oLoraRank;
    const std::int64_t in = heads * d / groups;
    const Rope& rope = st.rope();
    std::vector<T> dlow(a.low.size());
    linearBackward<T>(a.low.data(), st.w(".attn.wo_b.weight"), dout, dlow.data(),
        st.dw(".attn.wo_b.weight"), nullptr, n, groups * rank, h, false);
    std::vector<T> dattn(a.attn.size());
    std::vector<T> slice(std::size_t(n * in));
    std::vector<T> dslice(std::size_t(n * in));
    std::vector<T> dpart(std::size_t(n * rank));
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(a.attn.data() + t * heads * d + g * in, in, slice.data() + t * in);
            std::copy_n(dlow.data() + (t * groups + g) * rank, rank, dpart.data() + t * rank);
        }
        linearBackward<T>(slice.data(), st.w(".attn.wo_a.weight") + g * rank * in, dpart.data(),
            dslice.data(), st.dw(".attn.wo_a.weight") + g * rank * in, nullptr, n, in, rank, false);
        for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(dslice.data() + t * in, in, dattn.data() + t * heads * d + g * in);
        }
    }
    // The output was rotated back (−θ): its transpose rotates forward.
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dattn.data() + t * heads * d, heads, d, t, rope, 1.0);
    }
    const double scale = 1.0 / std::sqrt(double(d));
    std::vector<T> dq(a.q.size(), T(0));
    std::vector<double> dkeys(a.keys.size(), 0.0);
    T* dsinks = st.dw(".attn.attn_sink");
    std::vector<double> dp;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t first = a.keyStart[std::size_t(t)];
        const std::int64_t count = a.keyStart[std::size_t(t + 1)] - first;
        dp.assign(std::size_t(count), 0.0);
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            const T* qh = a.q.data() + (t * heads + hd) * d;
            const T* dctx = dattn.data() + (t * heads + hd) * d;
            const double* p = a.probs.data() + first * heads + hd * count;
            double dot = 0.0;
            for (std::int64_t k = 0; k < count; ++k) {
                const T* key = a.keys.data() + a.keyIdx[std::size_t(first + k)] * d;
                double v = 0.0;
                for (std::int64_t c = 0; c < d; ++c) {
                    v += double(dctx[c]) * double(key[c]);
                }
                dp[std::size_t(k)] = v;
                dot += p[k] * v;
            }
            // The sink joins the softmax with no value: ∂L/∂sink = −p_sink · Σ_k p_k dp_k.
            dsinks[hd] += T(-a.sinkProbs[std::size_t(t * heads + hd)] * dot);
            T* dqh = dq.data() + (t * heads + hd) * d;
            for (std::int64_t k = 0; k < count; ++k) {
                const std::int64_t row = a.keyIdx[std::size_t(first + k)];
                const T* key = a.keys.data() + row * d;
                double* dkey = dkeys.data() + row * d;
                const double dl = p[k] * (dp[std::size_t(k)] - dot) * scale;
                for (std::int64_t c = 0; c < d; ++c) {
                    dqh[c] += T(dl * double(key[c]));
                    dkey[c] += dl * double(qh[c]) + p[k] * double(dctx[c]);
                }
            }
        }
    }
    // q: RoPE, the per-head weightless RMS, wq_b, q_norm, wq_a.
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dq.data() + t * heads * d, heads, d, t, rope, -1.0);
    }
    std::vector<T> dqb(a.qb.size(), T(0));
    rmsNormBackward<T>(
        a.qb.data(), nullptr, dq.data(), dqb.data(), nullptr, n * heads, d, spec.normEps);
    std::vector<T> dqan(a.qan.size());
    linearBackward<T>(a.qan.data(), st.w(".attn.wq_b.weight"), dqb.data(), dqan.data(),
        st.dw(".attn.wq_b.weight"), nullptr, n, ca.qLoraRank, heads * d, false);
    std::vector<T> dqa(a.qa.size(), T(0));
    rmsNormBackward<T>(a.qa.data(), st.w(".attn.q_norm.weight"), dqan.data(), dqa.data(),
        st.dw(".attn.q_norm.weight"), n, ca.qLoraRank, spec.normEps);
    linearBackward<T>(a.xn1.data(), st.w(".attn.wq_a.weight"), dqa.data(), dxn1,
        st.dw(".attn.wq_a.weight"), nullptr, n, h, ca.qLoraRank, true);
    // K=V: RoPE, kv_norm, wkv.
    std::vector<T> dkv(std::size_t(n * d));
    for (std::int64_t i = 0; i < n * d; ++i) {
        dkv[std::size_t(i)] = T(dkeys[std::size_t(i)]);
    }
    for (std::int64_t t = 0; t < n; ++t) {
        rotateTail(dkv.data() + t * d, 1, d, t, rope, -1.0);
    }
    std::vector<T> dkvp(a.kvp.size(), T(0));
    rmsNormBackward<T>(a.kvp.data(), st.w(".attn.kv_norm.weight"), dkv.data(), dkvp.data(),
        st.dw(".attn.kv_norm.weight"), n, d, spec.normEps);
    linearBackward<T>(a.xn1.data(), st.w(".attn.wkv.weight"), dkvp.data(), dxn1,
        st.dw(".attn.wkv.weight"), nullptr, n, h, d, true);
    if (a.entries > 0) {
        std::vector<T> dentries(std::size_t(a.entries * d));
        for (std::int64_t i = 0; i < a.entries * d; ++i) {
            dentries[std::size_t(i)] = T(dkeys[std::size_t(n * d + i)]);
        }
        compressorBackward(st, a, std::move(dentries), dxn1);
    }
}

// --- MoE ---------------------------------------------------------------------------------

/// The clamped SwiGLU `m` (deepseekV4ClampedMlp) on `rows` rows of x, keeping g and u as
/// projected and act = silu(min(g, L)) · clamp(u, −L, L).
template <typename T>
void clampedMlpForward(const V4Step<T>& st, const std::string& m, const T* x, std::int64_t rows,
    std::int64_t width, T* g, T* u, T* act, T* out)
{
    const std::int64_t h = st.spec.hiddenSize;
    const double limit = st.spec.swigluLimit;
    linear<T>(x, st.w(m + ".w1.weight"), nullptr, g, rows, h, width);
    linear<T>(x, st.w(m + ".w3.weight"), nullptr, u, rows, h, width);
    for (std::int64_t i = 0; i < rows * width; ++i) {
        T gi = g[i];
        T ui = u[i];
        if (limit > 0) {
            gi = std::min(gi, T(limit));
            ui = std::clamp(ui, T(-limit), T(limit));
        }
        act[i] = gi / (T(1) + std::exp(-gi)) * ui;
    }
    linear<T>(act, st.w(m + ".w2.weight"), nullptr, out, rows, width, h);
}

/// Its backward from `dout`: SwiGLU's on the clamped values (swigluBackward), no gradient where
/// a clamp bites (torch.clamp passes it at the bound), the weights' gradients accumulated and
/// the input's added to `dx`.
template <typename T>
void clampedMlpBackward(const V4Step<T>& st, const std::string& m, const T* x, std::int64_t rows,
    std::int64_t width, const T* g, const T* u, const T* act, const T* dout, T* dx)
{
    const std::int64_t h = st.spec.hiddenSize;
    const double limit = st.spec.swigluLimit;
    const std::size_t count = std::size_t(rows * width);
    std::vector<T> dact(count);
    linearBackward<T>(act, st.w(m + ".w2.weight"), dout, dact.data(), st.dw(m + ".w2.weight"),
        nullptr, rows, width, h, false);
    std::vector<T> gc(g, g + count);
    std::vector<T> uc(u, u + count);
    if (limit > 0) {
        for (std::size_t i = 0; i < count; ++i) {
            gc[i] = std::min(gc[i], T(limit));
            uc[i] = std::clamp(uc[i], T(-limit), T(limit));
        }
    }
    std::vector<T> dg(count);
    std::vector<T> du(count);
    swigluBackward<T>(gc.data(), uc.data(), dact.data(), dg.data(), du.data(), std::int64_t(count));
    if (limit > 0) {
        for (std::size_t i = 0; i < count; ++i) {
            dg[i] = g[i] > T(limit) ? T(0) : dg[i];
            du[i] = u[i] < T(-limit) || u[i] > T(limit) ? T(0) : du[i];
        }
    }
    linearBackward<T>(x, st.w(m + ".w1.weight"), dg.data(), dx, st.dw(m + ".w1.weight"), nullptr,
        rows, h, width, true);
    linearBackward<T>(x, st.w(m + ".w3.weight"), du.data(), dx, st.dw(m + ".w3.weight"), nullptr,
        rows, h, width, true);
}

/// The MoE on a.xn2 into a.moeOut (mixtureOfExperts): the forward's routing (deepseekV4Route),
/// each chosen expert weighted, plus the shared expert.
template <typename T>
void v4MoeForward(const V4Step<T>& st, V4Layer<T>& a, std::span<const std::int64_t> ids,
    std::vector<std::pair<std::string, numerics::Tensor>>& routing)
{
    const auto& moe = *st.spec.moe;
    const std::int64_t n = st.n;
    const std::int64_t h = st.spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = moe.topK;
    const std::int64_t width = moe.expertIntermediate;
    deepseekV4Route<T>(st.ctx.table, st.spec, st.layer, ids, a.xn2.data(), n, a.chosen, a.weights);
    std::vector<T> logits(std::size_t(n * e));
    linear<T>(a.xn2.data(), st.w(".ffn.gate.weight"), nullptr, logits.data(), n, h, e);
    a.logits.assign(logits.begin(), logits.end());
    routing.emplace_back(fmt::format("model.layers.{}.mlp.gate#topk", st.layer),
        numerics::Tensor::fromInts({ n, k }, a.chosen));
    a.g.resize(std::size_t(n * k * width));
    a.u.resize(a.g.size());
    a.act.resize(a.g.size());
    a.y.resize(std::size_t(n * k * h));
    std::vector<double> acc(std::size_t(n * h), 0.0);
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int64_t row = t * k + j;
            clampedMlpForward(st, fmt::format(".ffn.experts.{}", a.chosen[std::size_t(row)]),
                a.xn2.data() + t * h, 1, width, a.g.data() + row * width, a.u.data() + row * width,
                a.act.data() + row * width, a.y.data() + row * h);
            for (std::int64_t c = 0; c < h; ++c) {
                acc[std::size_t(t * h + c)]
                    += a.weights[std::size_t(row)] * double(a.y[std::size_t(row * h + c)]);
            }
        }
    }
    const std::int64_t shared = moe.sharedIntermediate;
    a.sharedG.resize(std::size_t(n * shared));
    a.sharedU.resize(a.sharedG.size());
    a.sharedAct.resize(a.sharedG.size());
    a.moeOut.resize(std::size_t(n * h));
    clampedMlpForward(st, ".ffn.shared_experts", a.xn2.data(), n, shared, a.sharedG.data(),
        a.sharedU.data(), a.sharedAct.data(), a.moeOut.data());
    for (std::int64_t i = 0; i < n * h; ++i) {
        a.moeOut[std::size_t(i)] = T(acc[std::size_t(i)] + double(a.moeOut[std::size_t(i)]));
    }
}

/// The MoE's backward from `dout`: the experts' and the shared expert's, the combine weights'
/// gradients through the renormalised sqrtsoftplus scores to the router's logits and weight;
/// the input's added to `dxn2`.
template <typename T>
void v4MoeBackward(const V4Step<T>& st, const V4Layer<T>& a, const T* dout, T* dxn2)
{
    const auto& moe = *st.spec.moe;
    const std::int64_t n = st.n;
    const std::int64_t h = st.spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const std::int64_t k = moe.topK;
    const std::int64_t width = moe.expertIntermediate;
    clampedMlpBackward(st, ".ffn.shared_experts", a.xn2.data(), n, moe.sharedIntermediate,
        a.sharedG.data(), a.sharedU.data(), a.sharedAct.data(), dout, dxn2);
    std::vector<double> dweight(std::size_t(n * k), 0.0);
    std::vector<T> dy(static_cast<std::size_t>(h));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int64_t row = t * k + j;
            double dot = 0.0;
            for (std::int64_t c = 0; c < h; ++c) {
                dy[std::size_t(c)] = T(a.weights[std::size_t(row)] * double(dout[t * h + c]));
                dot += double(dout[t * h + c]) * double(a.y[std::size_t(row * h + c)]);
            }
            dweight[std::size_t(row)] = dot;
            clampedMlpBackward(st, fmt::format(".ffn.experts.{}", a.chosen[std::size_t(row)]),
                a.xn2.data() + t * h, 1, width, a.g.data() + row * width, a.u.data() + row * width,
                a.act.data() + row * width, dy.data(), dxn2 + t * h);
        }
    }
    // w_j = r · s_j / (Σ_i s_i + 1e-20) over the chosen (a hash table may name an expert twice:
    // each choice adds its share), s = sqrt(softplus(z)), ∂s/∂z = σ(z) / (2s).
    const double r = moe.routedScalingFactor;
    std::vector<T> dlogits(std::size_t(n * e), T(0));
    std::vector<double> ds(static_cast<std::size_t>(e));
    std::vector<double> score(static_cast<std::size_t>(e));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t i = 0; i < e; ++i) {
            score[std::size_t(i)] = std::sqrt(softplus(a.logits[std::size_t(t * e + i)]));
        }
        std::fill(ds.begin(), ds.end(), 0.0);
        double sum = 0.0;
        double weighted = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = std::size_t(a.chosen[std::size_t(t * k + j)]);
            sum += score[ex];
            weighted += dweight[std::size_t(t * k + j)] * score[ex];
        }
        const double denom = sum + 1e-20;
        for (std::int64_t j = 0; j < k; ++j) {
            const auto ex = std::size_t(a.chosen[std::size_t(t * k + j)]);
            const double dw = dweight[std::size_t(t * k + j)];
            ds[ex] += moe.normTopkProb ? r * (dw / denom - weighted / (denom * denom)) : r * dw;
        }
        for (std::int64_t i = 0; i < e; ++i) {
            const double s = score[std::size_t(i)];
            if (ds[std::size_t(i)] != 0.0 && s > 0.0) {
                // softplus' (torch's threshold 20: the identity above it, slope 1).
                const double z = a.logits[std::size_t(t * e + i)];
                const double slope = z > 20.0 ? 1.0 : sigmoidOf(z);
                dlogits[std::size_t(t * e + i)] = T(ds[std::size_t(i)] * slope / (2.0 * s));
            }
        }
    }
    linearBackward<T>(a.xn2.data(), st.w(".ffn.gate.weight"), dlogits.data(), dxn2,
        st.dw(".ffn.gate.weight"), nullptr, n, h, e, true);
}

/// The expansion's backward (streams'[k] = post[k] · out + Σ_j comb[j, k] · streams[j]): from
/// the new streams' gradient `dnext`, the block output's gradient, dpost, dcomb and the old
/// streams' gradient (overwriting `dprev`).
template <typename T>
std::vector<T> expandBackward(const HyperMaps& m, const T* prev, const T* out, const T* dnext,
    std::int64_t n, std::int64_t s, std::int64_t h, std::vector<double>& dpost,
    std::vector<double>& dcomb, std::vector<T>& dprev)
{
    std::vector<T> dout(std::size_t(n * h), T(0));
    dpost.assign(std::size_t(n * s), 0.0);
    dcomb.assign(std::size_t(n * s * s), 0.0);
    dprev.assign(std::size_t(n * s * h), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        const double* c = m.comb.data() + t * s * s;
        for (std::int64_t k = 0; k < s; ++k) {
            const T* dk = dnext + (t * s + k) * h;
            const double post = m.post[std::size_t(t * s + k)];
            double dp = 0.0;
            for (std::int64_t ch = 0; ch < h; ++ch) {
                dp += double(dk[ch]) * double(out[t * h + ch]);
                dout[std::size_t(t * h + ch)] += T(post * double(dk[ch]));
            }
            dpost[std::size_t(t * s + k)] = dp;
            for (std::int64_t j = 0; j < s; ++j) {
                const T* pj = prev + (t * s + j) * h;
                T* dj = dprev.data() + (t * s + j) * h;
                double dc = 0.0;
                for (std::int64_t ch = 0; ch < h; ++ch) {
                    dc += double(dk[ch]) * double(pj[ch]);
                    dj[ch] += T(c[j * s + k] * double(dk[ch]));
                }
                dcomb[std::size_t(t * s * s + j * s + k)] = dc;
            }
        }
    }
    return dout;
}

} // namespace

// --- the pass ----------------------------------------------------------------------------

std::string deepseekV4HfName(const std::string& native)
{
    static const std::map<std::string, std::string> top {
        { "embed.weight", "model.embed_tokens.weight" }, { "head.weight", "lm_head.weight" },
        { "norm.weight", "model.norm.weight" }, { "hc_head_fn", "model.hc_head.hc_fn" },
        { "hc_head_base", "model.hc_head.hc_base" }, { "hc_head_scale", "model.hc_head.hc_scale" }
    };
    if (const auto it = top.find(native); it != top.end()) {
        return it->second;
    }
    if (!native.starts_with("layers.")) {
        return native;
    }
    const auto dot = native.find('.', 7);
    const std::string prefix = "model." + native.substr(0, dot);
    std::string rest = native.substr(dot + 1);
    static const std::pair<const char*, const char*> moved[] {
        { "attn_norm.", "input_layernorm." },
        { "ffn_norm.", "post_attention_layernorm." },
        { "hc_attn_", "attn_hc." },
        { "hc_ffn_", "ffn_hc." },
        { "attn.indexer.compressor.", "self_attn.compressor.indexer.compressor." },
        { "attn.indexer.", "self_attn.compressor.indexer." },
        { "attn.attn_sink", "self_attn.sinks" },
        { "attn.", "self_attn." },
        { "ffn.gate.bias", "mlp.gate.e_score_correction_bias" },
        { "ffn.", "mlp." },
    };
    for (const auto& [from, to] : moved) {
        if (rest.starts_with(from)) {
            rest = to + rest.substr(std::string_view(from).size());
            break;
        }
    }
    static const std::map<std::string, std::string> leaves { { "wq_a", "q_a_proj" },
        { "q_norm", "q_a_norm" }, { "wq_b", "q_b_proj" }, { "wkv", "kv_proj" },
        { "wo_a", "o_a_proj" }, { "wo_b", "o_b_proj" }, { "wgate", "gate_proj" },
        { "ape", "position_bias" }, { "w1", "gate_proj" }, { "w2", "down_proj" },
        { "w3", "up_proj" } };
    std::vector<std::string> pieces;
    for (std::size_t at = 0;;) {
        const auto next = rest.find('.', at);
        pieces.push_back(rest.substr(at, next == std::string::npos ? next : next - at));
        if (next == std::string::npos) {
            break;
        }
        at = next + 1;
    }
    bool compressor = false;
    for (auto& piece : pieces) {
        compressor = compressor || piece == "compressor";
        if (const auto it = leaves.find(piece); it != leaves.end()) {
            piece = it->second;
        }
    }
    // The compressors' norm is their kv_norm; the attention's own kv_norm keeps its name.
    if (pieces.size() >= 2 && compressor && pieces[pieces.size() - 2] == "norm") {
        pieces[pieces.size() - 2] = "kv_norm";
    }
    return fmt::format("{}.{}", prefix, fmt::join(pieces, "."));
}

template <typename T>
Result<void> GradientPass<T>::deepseekV4Init(const std::map<std::string, numerics::Tensor>& weights)
{
    if (!m_rounded.empty()) {
        return Error::unsupported("gradients of deepseek_v4 with rounded layers (the emulated "
                                  "backward of its hyper-connections, compressors and router "
                                  "is not modelled)");
    }
    auto ctx = std::make_shared<DeepseekV4Context>();
    auto ropes = deepseekV4Ropes(m_spec);
    if (!ropes) {
        return ropes.error();
    }
    ctx->mainRope = std::move(ropes->first);
    ctx->compressRope = std::move(ropes->second);
    // The forward's helpers read a WeightTable: the tensors the pass computes with.
    for (const auto& [name, value] : m_p.values) {
        (void)value;
        const auto converted = m_converted.find(name);
        ctx->table.tensors.emplace(
            name, converted != m_converted.end() ? converted->second : weights.at(name));
    }
    m_v4 = std::move(ctx);
    return success();
}

template <typename T>
Result<GradientResult> GradientPass<T>::deepseekV4Run(
    std::span<const std::int64_t> ids, std::span<const std::int64_t> targets)
{
    using numerics::Tensor;
    const std::int64_t n = std::int64_t(ids.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t s = m_spec.hyperConnections->streams;
    const std::int64_t vocab = m_spec.vocabSize;
    const int layers = int(m_spec.numLayers);
    std::vector<T> x(std::size_t(n * h));
    DAY0_TRY(embedding<T>(ids, m_p.value("embed.weight"), vocab, h, x.data()));
    std::vector<T> streams(std::size_t(n * s * h));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            std::copy_n(x.data() + t * h, h, streams.data() + (t * s + j) * h);
        }
    }
    std::vector<V4Layer<T>> saved(static_cast<std::size_t>(layers));
    m_routing.clear();
    if (m_progress != nullptr) {
        m_progress->setTotal(2 * m_spec.numLayers);
        m_progress->setStage("forward");
    }
    for (int l = 0; l < layers; ++l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        V4Step<T> st { m_spec, m_p, *m_v4, n, l };
        auto& a = saved[std::size_t(l)];
        a.streamsIn = streams;
        a.attnHc = hyperForward(m_p, st.name(".hc_attn"), streams.data(), n, m_spec, false);
        a.x1.resize(std::size_t(n * h));
        deepseekV4Collapse(a.attnHc.maps, streams.data(), n, s, h, a.x1.data());
        a.xn1.resize(a.x1.size());
        rmsNorm<T>(a.x1.data(), st.w(".attn_norm.weight"), a.xn1.data(), n, h, m_spec.normEps);
        v4AttentionForward(st, a, m_routing);
        deepseekV4Expand(a.attnHc.maps, streams.data(), a.attnOut.data(), n, s, h);
        a.streamsMid = streams;
        a.ffnHc = hyperForward(m_p, st.name(".hc_ffn"), streams.data(), n, m_spec, false);
        a.x2.resize(std::size_t(n * h));
        deepseekV4Collapse(a.ffnHc.maps, streams.data(), n, s, h, a.x2.data());
        a.xn2.resize(a.x2.size());
        rmsNorm<T>(a.x2.data(), st.w(".ffn_norm.weight"), a.xn2.data(), n, h, m_spec.normEps);
        v4MoeForward(st, a, ids, m_routing);
        deepseekV4Expand(a.ffnHc.maps, streams.data(), a.moeOut.data(), n, s, h);
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    // The head: hc_head collapses the streams, then norm and head.
    const auto headHc = hyperForward(m_p, std::string("hc_head"), streams.data(), n, m_spec, true);
    std::vector<T> finalIn(std::size_t(n * h));
    deepseekV4Collapse(headHc.maps, streams.data(), n, s, h, finalIn.data());
    std::vector<T> xf(finalIn.size());
    rmsNorm<T>(finalIn.data(), m_p.value("norm.weight"), xf.data(), n, h, m_spec.normEps);
    std::vector<T> logits(std::size_t(n * vocab));
    linear<T>(xf.data(), m_p.value("head.weight"), nullptr, logits.data(), n, h, vocab);

    GradientResult result;
    std::int64_t kept = 0;
    for (const auto& a : saved) {
        kept += a.bytes();
    }
    result.keptBytes = kept
        + std::int64_t((streams.size() + finalIn.size() + xf.size() + logits.size()) * sizeof(T));
    std::vector<T> dlogits(logits.size());
    auto loss = crossEntropyOf(logits, targets, dlogits, result.counted);
    if (!loss) {
        return loss.error();
    }
    result.loss = *loss;
    result.logits = Tensor::zeros({ n, vocab }, computeType<T>());
    std::copy(logits.begin(), logits.end(), result.logits.template data<T>());

    // Backward.
    DAY0_TRY(m_acts.recordAndInject("lm_head", dlogits.data(), { n, vocab }));
    std::vector<T> dxf(std::size_t(n * h));
    linearBackward<T>(xf.data(), m_p.value("head.weight"), dlogits.data(), dxf.data(),
        m_p.grad("head.weight"), nullptr, n, h, vocab, false);
    DAY0_TRY(m_acts.recordAndInject("model.norm", dxf.data(), { n, h }));
    std::vector<T> dfinal(std::size_t(n * h), T(0));
    rmsNormBackward<T>(finalIn.data(), m_p.value("norm.weight"), dxf.data(), dfinal.data(),
        m_p.grad("norm.weight"), n, h, m_spec.normEps);
    std::vector<T> dstreams(streams.size(), T(0));
    const auto dpreHead
        = collapseBackward(headHc.maps, streams.data(), dfinal.data(), n, s, h, dstreams.data());
    hyperBackward(m_p, std::string("hc_head"), headHc, streams.data(), n, m_spec, dpreHead, {}, {},
        dstreams.data());
    if (m_progress != nullptr) {
        m_progress->setStage("backward");
    }
    std::vector<double> dpost;
    std::vector<double> dcomb;
    std::vector<T> dprev;
    for (int l = layers - 1; l >= 0; --l) {
        if (m_stop.stop_requested()) {
            return Error::cancelled();
        }
        V4Step<T> st { m_spec, m_p, *m_v4, n, l };
        const auto& a = saved[std::size_t(l)];
        const std::string anchor = fmt::format("model.layers.{}", l);
        DAY0_TRY(m_acts.recordAndInject(anchor, dstreams.data(), { n, s, h }));
        // The MoE's hyper-connection and block.
        auto dmoe = expandBackward(a.ffnHc.maps, a.streamsMid.data(), a.moeOut.data(),
            dstreams.data(), n, s, h, dpost, dcomb, dprev);
        m_acts.record(anchor + ".mlp", dmoe.data(), { n, h });
        m_acts.record(anchor + ".mlp.shared_experts", dmoe.data(), { n, h });
        std::vector<T> dxn(std::size_t(n * h), T(0));
        v4MoeBackward(st, a, dmoe.data(), dxn.data());
        m_acts.record(anchor + ".post_attention_layernorm", dxn.data(), { n, h });
        std::vector<T> dx(std::size_t(n * h), T(0));
        rmsNormBackward<T>(a.x2.data(), st.w(".ffn_norm.weight"), dxn.data(), dx.data(),
            st.dw(".ffn_norm.weight"), n, h, m_spec.normEps);
        auto dpre
            = collapseBackward(a.ffnHc.maps, a.streamsMid.data(), dx.data(), n, s, h, dprev.data());
        hyperBackward(m_p, st.name(".hc_ffn"), a.ffnHc, a.streamsMid.data(), n, m_spec, dpre, dpost,
            dcomb, dprev.data());
        dstreams.swap(dprev);
        // The attention's.
        auto dattn = expandBackward(a.attnHc.maps, a.streamsIn.data(), a.attnOut.data(),
            dstreams.data(), n, s, h, dpost, dcomb, dprev);
        m_acts.record(anchor + ".self_attn", dattn.data(), { n, h });
        std::fill(dxn.begin(), dxn.end(), T(0));
        v4AttentionBackward(st, a, dattn.data(), dxn.data());
        m_acts.record(anchor + ".input_layernorm", dxn.data(), { n, h });
        std::fill(dx.begin(), dx.end(), T(0));
        rmsNormBackward<T>(a.x1.data(), st.w(".attn_norm.weight"), dxn.data(), dx.data(),
            st.dw(".attn_norm.weight"), n, h, m_spec.normEps);
        dpre
            = collapseBackward(a.attnHc.maps, a.streamsIn.data(), dx.data(), n, s, h, dprev.data());
        hyperBackward(m_p, st.name(".hc_attn"), a.attnHc, a.streamsIn.data(), n, m_spec, dpre,
            dpost, dcomb, dprev.data());
        dstreams.swap(dprev);
        if (m_progress != nullptr) {
            m_progress->advance();
        }
    }
    // Every stream started as the embedding.
    std::vector<T> dembed(std::size_t(n * h), T(0));
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < s; ++j) {
            for (std::int64_t c = 0; c < h; ++c) {
                dembed[std::size_t(t * h + c)] += dstreams[std::size_t((t * s + j) * h + c)];
            }
        }
    }
    DAY0_TRY(m_acts.recordAndInject("model.embed_tokens", dembed.data(), { n, h }));
    T* dtable = m_p.grad("embed.weight");
    for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t c = 0; c < h; ++c) {
            dtable[ids[std::size_t(t)] * h + c] += dembed[std::size_t(t * h + c)];
        }
    }
    for (auto& [name, grad] : m_p.grads) {
        Tensor t = Tensor::zeros(m_p.shapes[name], computeType<T>());
        std::copy(grad.begin(), grad.end(), t.template data<T>());
        result.parameters.emplace(name, std::move(t));
    }
    result.activations = std::move(m_acts.list);
    result.routing = std::move(m_routing);
    return result;
}

#define DAY0_GRADIENT_DEEPSEEK_V4(T)                                                               \
    template Result<void> GradientPass<T>::deepseekV4Init(                                         \
        const std::map<std::string, numerics::Tensor>&);                                           \
    template Result<GradientResult> GradientPass<T>::deepseekV4Run(                                \
        std::span<const std::int64_t>, std::span<const std::int64_t>);

DAY0_GRADIENT_DEEPSEEK_V4(float)
DAY0_GRADIENT_DEEPSEEK_V4(double)

#undef DAY0_GRADIENT_DEEPSEEK_V4

} // namespace day0::exec::detail
