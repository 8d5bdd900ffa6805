#pragma once

// Internal to core/exec: DeepSeek-V4's forward pieces (deepseek_v4_block.cpp,
// deepseek_v4_forward.cpp), shared by Forward's DeepSeek-V4 path.

#include "exec/forward.h"
#include "exec/rope.h"
#include "model/model_spec.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace day0::exec::detail {

/// What the engine does not compute of a DeepSeek-V4 spec, each named (empty: it runs).
std::vector<std::string> deepseekV4Unsupported(const model::ModelSpec& spec);

/// What a DeepSeek-V4 forward keeps between steps, per layer: the K=V of every position and,
/// for compressed layers, every position's compressor (and indexer) projections and the
/// entries pooled so far.
template <typename T> struct DeepseekV4Cache {
    struct Compressor {
        std::int64_t ratio = 0;
        std::int64_t width = 0; ///< entry width (head_dim, or index_head_dim for the indexer)
        std::vector<T> kv; ///< [capacity, coff · width]
        std::vector<T> gate; ///< [capacity, coff · width]
        std::vector<T> entries; ///< [capacity / ratio, width]
        std::int64_t count = 0; ///< entries pooled so far
    };
    struct Layer {
        std::vector<T> kv; ///< [capacity, head_dim]
        Compressor compressor;
        Compressor indexer;
        const Rope* rope = nullptr;
    };
    std::vector<Layer> layers;
    Rope mainRope; ///< sliding layers: rope_theta, no scaling
    Rope compressRope; ///< compressed layers and their entries: compress_rope_theta with YaRN
};

/// The twin's (HF) parameter name of a native DeepSeek-V4 tensor ("layers.3.attn.wq_a.weight" →
/// "model.layers.3.self_attn.q_a_proj.weight"; plugins/torch/day0_torch_deepseek_v4.py hf_name).
std::string deepseekV4HfName(const std::string& native);

/// The sliding layers' RoPE (rope_theta, unscaled) and the compressed layers' (compress_rope_theta
/// with rope_scaling's YaRN, cos and sin unscaled), both interleaved on the trailing lanes.
Result<std::pair<Rope, Rope>> deepseekV4Ropes(const model::ModelSpec& spec);

/// Sizes layer `layer`'s cache for `capacity` tokens (zeros) and points it at its RoPE.
template <typename T>
void deepseekV4SizeLayer(typename DeepseekV4Cache<T>::Layer& c, const model::ModelSpec& spec,
    std::size_t layer, std::int64_t capacity, const Rope& mainRope, const Rope& compressRope);

/// How a DeepSeek-V4 step emulates a precision plan on the float engine (deepseek_v4_forward.cpp
/// says what is rounded where); a null pointer where one is taken: the fp32/fp64 reference.
struct DeepseekV4Rounding {
    const PrecisionPlan& plan;
    /// The projections' weights rounded for a mode, once each (Forward's m_rounded).
    std::map<std::pair<std::string, int>, std::vector<float>>& weights;
};

/// What deepseekV4Init refuses of a precision plan on DeepSeek-V4 (empty: it runs): overrides
/// of the ops it keeps in fp32 (router).
std::string deepseekV4PlanRefusal(const PrecisionPlan& plan);

/// The maps of one hyper-connection (DeepseekV4HyperConnection) for each row.
struct HyperMaps {
    std::vector<double> pre; ///< [n, S]
    std::vector<double> post; ///< [n, S]
    std::vector<double> comb; ///< [n, S, S], comb[j][k]: stream j's share in new stream k
};

/// The maps of hyper-connection `p` ("layers.3.hc_attn", "hc_head": `head`) from the streams
/// [n, S, h] (deepseek_v4_forward.cpp). Row-local: any rows of the streams may be passed.
template <typename T>
HyperMaps deepseekV4HyperMaps(const WeightTable& w, const std::string& p, const T* streams,
    std::int64_t n, std::int64_t s, std::int64_t h, const model::ModelSpec& spec, bool head);

/// out[t] = Σ_j pre[t, j] · streams[t, j].
template <typename T>
void deepseekV4Collapse(
    const HyperMaps& m, const T* streams, std::int64_t n, std::int64_t s, std::int64_t h, T* out);

/// streams[t, k] ← post[t, k] · out[t] + Σ_j comb[t, j, k] · streams[t, j].
template <typename T>
void deepseekV4Expand(
    const HyperMaps& m, T* streams, const T* out, std::int64_t n, std::int64_t s, std::int64_t h);

/// The attention of layer `layer` on every row of the step x [n, hidden] into out [n, hidden].
/// The query heads and output groups are those `weights` holds (wq_b's rows, wo_a's groups):
/// with a tensor-parallel rank's slices, out gets that rank's partial wo_b sums.
template <typename T>
void deepseekV4Attention(const WeightTable& weights, const model::ModelSpec& spec, int layer,
    typename DeepseekV4Cache<T>::Layer& cache, const T* x, std::int64_t n, std::int64_t start,
    Taps<T>& taps, T* out, const DeepseekV4Rounding* rounding = nullptr);

/// The router of layer `layer` (sqrtsoftplus scores; top-k of score + bias, or tid2eid of the
/// token on hash layers): k experts and weights per row of x [n, hidden] (`ids`: the rows'
/// tokens).
template <typename T>
void deepseekV4Route(const WeightTable& weights, const model::ModelSpec& spec, int layer,
    std::span<const std::int64_t> ids, const T* x, std::int64_t n,
    std::vector<std::int64_t>& chosen, std::vector<double>& routeWeights);

/// The clamped SwiGLU MLP `m` (w1 gate, w3 up, w2 down; `width` the rows of w1 it holds) on
/// x [n, h] into out [n, h]; with a slice of w1/w3 rows and w2 columns, a partial sum.
/// `rounding` (null: the reference) emulates decoder layer `layer`'s precision.
template <typename T>
void deepseekV4ClampedMlp(const WeightTable& w, const std::string& m, const T* x, T* out,
    std::int64_t n, std::int64_t h, std::int64_t width, double limit,
    const DeepseekV4Rounding* rounding = nullptr, int layer = -1);

/// A compressor's step (deepseek_v4_block.cpp): projects x [n, hidden] at positions
/// [start, start + n) and pools the windows that close.
template <typename T>
void deepseekV4Compress(typename DeepseekV4Cache<T>::Compressor& c, const std::string& module,
    const WeightTable& weights, const T* x, std::int64_t n, std::int64_t start, std::int64_t h,
    double eps, const Rope& rope);

/// The Lightning indexer's choice (deepseek_v4_block.cpp): index_topk entry ids per row of
/// the step, -1 where fewer are visible.
template <typename T>
void deepseekV4Select(const typename DeepseekV4Cache<T>::Compressor& ix, const std::string& module,
    const WeightTable& weights, const model::ModelSpec& spec, const T* x, const T* qLatent,
    std::int64_t n, std::int64_t start, const Rope& rope, std::vector<std::int64_t>& selected);

// Interleaved RoPE on the last rope.rotaryDim lanes of each of `heads` vectors of `width`
// (HF apply_rotary_pos_emb: pairs (2i, 2i+1) of the trailing slice); sign -1 rotates back.
template <typename T>
void rotateTail(T* x, std::int64_t heads, std::int64_t width, std::int64_t position,
    const Rope& rope, double sign = 1.0)
{
    const std::int64_t pairs = rope.rotaryDim / 2;
    const std::int64_t base = width - rope.rotaryDim;
    for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = double(position) * rope.invFreq[std::size_t(i)];
        const T c = T(std::cos(angle));
        const T s = T(sign * std::sin(angle));
        for (std::int64_t hd = 0; hd < heads; ++hd) {
            T* v = x + hd * width + base + 2 * i;
            const T a = v[0];
            const T b = v[1];
            v[0] = a * c - b * s;
            v[1] = b * c + a * s;
        }
    }
}

} // namespace day0::exec::detail
