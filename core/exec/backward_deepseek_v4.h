#pragma once

// Internal to core/exec: DeepSeek-V4's gradient pass (gradient_pass.h deepseekV4Run), by concern:
// backward_deepseek_v4.cpp (the pass, the compressed attention, the parameter names),
// backward_deepseek_v4_hyper.cpp (the hyper-connections), backward_deepseek_v4_moe.cpp (the
// router and the clamped SwiGLU experts).

#include "exec/backward_pass.h"
#include "exec/deepseek_v4.h"
#include "exec/forward.h"
#include "exec/rope.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace day0::exec::detail {

/// What DeepSeek-V4's pass reads beside the parameters: the weights as the forward's helpers
/// take them and the two RoPEs.
struct DeepseekV4Context {
    WeightTable table;
    Rope mainRope;
    Rope compressRope;
};

/// One hyper-connection's forward as its backward reads it (its input streams kept apart).
template <typename T> struct HyperSaved {
    std::vector<T> normed; ///< rms(streams) [n, S·h]
    std::vector<T> mixes; ///< [n, mix]
    HyperMaps maps; ///< pre, post, comb
    std::vector<double> soft; ///< softmax(comb logits) [n, S, S] (before + hc_eps)
    std::vector<double> stages; ///< each Sinkhorn step's input [steps, n, S, S]
    std::int64_t steps = 0;
};

/// The maps of hyper-connection `p` ("layers.3.hc_attn", "hc_head": `head`, pre only) from the
/// streams [n, S, h] (deepseekV4HyperMaps' arithmetic), keeping what the backward reads.
template <typename T>
HyperSaved<T> deepseekV4HyperForward(const ParameterSet<T>& params, const std::string& p,
    const T* streams, std::int64_t n, const model::ModelSpec& spec, bool head);

/// Its backward from the maps' gradients (dpost and dcomb empty for the head): the gradients of
/// fn, base and scale accumulated, the streams' (through the RMS) added to `dstreams`.
template <typename T>
void deepseekV4HyperBackward(ParameterSet<T>& params, const std::string& p, const HyperSaved<T>& m,
    const T* streams, std::int64_t n, const model::ModelSpec& spec, const std::vector<double>& dpre,
    const std::vector<double>& dpost, std::vector<double> dcomb, T* dstreams);

/// The collapse's backward (out[t] = Σ_j pre[t, j] · streams[t, j]): returns dpre from `dout`;
/// pre · dout added to `dstreams`.
template <typename T>
std::vector<double> deepseekV4CollapseBackward(const HyperMaps& m, const T* streams, const T* dout,
    std::int64_t n, std::int64_t s, std::int64_t h, T* dstreams);

/// The expansion's backward (streams'[k] = post[k] · out + Σ_j comb[j, k] · streams[j]): from
/// the new streams' gradient `dnext`, returns the block output's gradient; dpost, dcomb and the
/// old streams' gradient (`dprev`) overwritten.
template <typename T>
std::vector<T> deepseekV4ExpandBackward(const HyperMaps& m, const T* prev, const T* out,
    const T* dnext, std::int64_t n, std::int64_t s, std::int64_t h, std::vector<double>& dpost,
    std::vector<double>& dcomb, std::vector<T>& dprev);

/// What one decoder layer's forward keeps.
template <typename T> struct DeepseekV4Saved {
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
template <typename T> struct DeepseekV4Step {
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

/// The MoE on a.xn2 into a.moeOut (mixtureOfExperts): the forward's routing (deepseekV4Route,
/// recorded as `<router>#topk`), each chosen expert weighted, plus the shared expert.
template <typename T>
void deepseekV4MoeForward(const DeepseekV4Step<T>& st, DeepseekV4Saved<T>& a,
    std::span<const std::int64_t> ids,
    std::vector<std::pair<std::string, numerics::Tensor>>& routing);

/// Its backward from `dout`: the experts' and the shared expert's, the combine weights'
/// gradients through the renormalised sqrtsoftplus scores to the router's logits and weight;
/// the input's added to `dxn2`.
template <typename T>
void deepseekV4MoeBackward(
    const DeepseekV4Step<T>& st, const DeepseekV4Saved<T>& a, const T* dout, T* dxn2);

} // namespace day0::exec::detail
