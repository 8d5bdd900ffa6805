#include "plan/activation_model.h"

#include <algorithm>

namespace day0::plan {

// Activation memory per layer: Korthikanti et al. 2022 ("Reducing Activation Recomputation in
// Large Transformer Models", Table 2), extended to GQA, MLA, SwiGLU and MoE.
//
// Notation (per rank, one micro-batch): T = b·s/cp tokens, h hidden, a heads, t = tp,
// u = t with sequence parallelism else 1 (tensors outside TP regions are replicated without SP),
// d = 1 if dropout masks are kept else 0. Activations are BF16 (2 bytes), masks 1 byte.
//
// Attention block, GQA/MHA with q = a·d_qk, k = kv·d_qk, v = kv·d_v, o = a·d_v:
//   T·[ 2h/u   LayerNorm-1 input
//     + 2h/u   QKV input (LayerNorm output)
//     + 2(q+k)/t  Q and K for QKᵀ
//     + 2v/t   V
//     + 2o/t   attention output = out-projection input
//     + d·h/u  attention dropout mask ]
//   + core attention: none → T·a·S/t·(2 + 3d) (softmax output 2, and with dropout its mask 1 and
//     output 2; S = keys per query), flash → T·a/t·4 (FP32 log-sum-exp), selective → 0.
//   For GPT (q = k = v = o = h, d = 1, u = 1) this is T·h·(5 + 8/t) + 5·a·S·T/t: the paper's
//   attention 11 sbh plus LayerNorm 2 sbh, with 5as²b split by t.
// MLA (DeepSeek-V2/V3) replaces QKV input .. V by: shared latent input 2h/u, q latent c_q
//   (q_a output and normed q_b input) 2·2c_q/u, kv latent c_kv (kv_a output and normed kv_b
//   input) 2·2c_kv/u + RoPE key 2r/u, per-head Q and K 2·2a·d_qk/t, V 2a·d_v/t.
// Dense MLP with width F, g = 2 for SwiGLU (fc1 holds gate and up) else 1:
//   T·[ 2h/u  LayerNorm-2 input + 2h/u fc1 input + 2gF/t fc1 output + 2F/t activation output
//     + d·h/u dropout mask ]
//   GPT (F = 4h, g = 1): T·h·(5 + 16/t); the layer totals T·h·(10 + 24/t) + 5aST/t, the paper's
//   TP row, and with SP (u = t) T·h·34/t + 5aST/t.
// MoE with E experts, top-k, expert width F_e, shared width F_s, e = etp, λ = load factor:
//   rows R = T/t·k·λ·e routed rows land on a rank after the EP all-to-all and ETP all-gather
//   (MoE requires SP when t > 1, so tokens enter the router split by t):
//   T·[ 2h/u LayerNorm-2 input + 2h/u router/expert input + 4E/u FP32 router scores
//     + (2gF_s + 2F_s)/t shared experts + d·h/u dropout ]
//   + R·[ 2h permuted input + 2g·F_e/e fc1 output + 2F_e/e activation + 2h expert output kept
//     for the weighted combine + 4 routing map ]
// Recompute: selective drops the core-attention term (recomputed); full keeps only the layer
// input 2hT/u, plus one layer's "none" activations while it is recomputed.

namespace {

// Recurrent mixers keep, per token: the norm input 2h/u, the projections' input 2h/u, the
// projection outputs, the convolution output, the scan output and its gate, the out-projection
// input; and FP32 states at every chunk boundary of the chunked scan.
//   Gated DeltaNet / KDA (key width K, value width V, value heads n):
//     2(2K + 2V + 2n)/t projections + 2(2K + V)/t conv + 2V/t scan + 2V/t gated norm
//   Mamba-2 (inner width I, groups × state G, heads n):
//     2(2I + 2G + n)/t in_proj + 2(I + 2G)/t conv + 2I/t scan + 2I/t gated norm
//   + 4·state/chunk/t FP32 chunk states.
double recurrentBytes(const LayerShape& s, const ActivationContext& c)
{
    const double t = c.tp;
    const double u = c.sp ? c.tp : 1.0;
    const double h = s.hidden;
    const double k = s.mixerKeyWidth;
    const double v = s.mixerWidth;
    const double n = s.mixerHeads;
    double perToken = 2.0 * h / u + 2.0 * h / u;
    if (s.mixer == model::MixerKind::Mamba2) {
        perToken += 2.0 * (2.0 * v + 2.0 * k + n) / t + 2.0 * (v + 2.0 * k) / t + 4.0 * v / t;
    } else {
        perToken += 2.0 * (2.0 * k + 2.0 * v + 2.0 * n) / t + 2.0 * (2.0 * k + v) / t + 4.0 * v / t;
    }
    if (s.chunkTokens > 0) {
        perToken += 4.0 * s.stateElements / s.chunkTokens / t;
    }
    return c.tokens * perToken;
}

double attentionBytes(const LayerShape& s, const ActivationContext& c)
{
    using model::MixerKind;
    const double t = c.tp;
    const double u = c.sp ? c.tp : 1.0;
    const double d = c.dropout ? 1.0 : 0.0;
    const double h = s.hidden;
    switch (s.mixer) {
    case MixerKind::GatedDeltaNet:
    case MixerKind::KimiDelta:
    case MixerKind::Mamba2:
        return recurrentBytes(s, c);
    case MixerKind::None:
        return 0.0;
    case MixerKind::Linear:
        return c.tokens * (2.0 * h / u + 2.0 * h / u); // norm input and the linear's input
    default:
        break;
    }
    double perToken = 2.0 * h / u + d * h / u;
    if (s.attention == model::AttentionKind::MLA) {
        perToken += 2.0 * h / u; // latent projections' input
        if (s.qLoraRank > 0) {
            perToken += 2.0 * 2.0 * s.qLoraRank / u;
        }
        perToken += 2.0 * 2.0 * s.kvLoraRank / u + 2.0 * s.ropeDim / u;
        perToken += 2.0 * 2.0 * s.heads * s.qkHeadDim / t + 2.0 * s.heads * s.vHeadDim / t;
    } else {
        const double q = s.heads * s.qkHeadDim;
        const double k = s.kvHeads * s.qkHeadDim;
        const double v = s.kvHeads * s.vHeadDim;
        perToken += 2.0 * h / u + 2.0 * (q + k) / t + 2.0 * v / t;
    }
    perToken += 2.0 * s.heads * s.vHeadDim / t; // attention output
    double core = 0.0;
    if (c.recompute == Recompute::None) {
        if (c.flash) {
            core = 4.0 * s.heads / t;
        } else {
            double keys = s.window > 0 ? std::min(c.keys, s.window) : c.keys;
            if (s.selectedKeys > 0) {
                keys = std::min(keys, s.selectedKeys);
            }
            core = s.heads * keys / t * (2.0 + 3.0 * d);
        }
    }
    return c.tokens * (perToken + core);
}

double mlpBytes(const LayerShape& s, const ActivationContext& c)
{
    const double t = c.tp;
    const double u = c.sp ? c.tp : 1.0;
    const double d = c.dropout ? 1.0 : 0.0;
    const double h = s.hidden;
    const double g = s.gated ? 2.0 : 1.0;
    if (s.ffnKind == model::FfnKind::None) {
        return 0.0;
    }
    if (s.ffnKind == model::FfnKind::Linear) {
        return c.tokens * (2.0 * h / u + 2.0 * h / u);
    }
    if (!s.moe) {
        return c.tokens
            * (2.0 * h / u + 2.0 * h / u + 2.0 * g * s.ffn / t + 2.0 * s.ffn / t + d * h / u);
    }
    const double perToken = 2.0 * h / u + 2.0 * h / u + 4.0 * s.experts / u
        + (2.0 * g * s.sharedFfn + 2.0 * s.sharedFfn) / t + d * h / u;
    const double rows = c.tokens * routedRowsPerToken(s, c.tp, c.etp, c.expertLoad);
    const double e = c.etp;
    const double perRow
        = 2.0 * h + 2.0 * g * s.expertFfn / e + 2.0 * s.expertFfn / e + 2.0 * h + 4.0;
    return c.tokens * perToken + rows * perRow;
}

} // namespace

double routedRowsPerToken(const LayerShape& shape, int tp, int etp, double expertLoad)
{
    return shape.topK * expertLoad * double(etp) / double(tp);
}

double layerActivationBytes(const LayerShape& shape, const ActivationContext& ctx)
{
    if (ctx.recompute == Recompute::Full) {
        const double u = ctx.sp ? ctx.tp : 1.0;
        return ctx.tokens * 2.0 * shape.hidden / u;
    }
    return attentionBytes(shape, ctx) + mlpBytes(shape, ctx);
}

double fullRecomputeWorkingSet(const LayerShape& shape, const ActivationContext& ctx)
{
    ActivationContext none = ctx;
    none.recompute = Recompute::None;
    return layerActivationBytes(shape, none);
}

double embeddingActivationBytes(double hidden, const ActivationContext& ctx)
{
    const double u = ctx.sp ? ctx.tp : 1.0;
    return ctx.tokens * 8.0 + (ctx.dropout ? ctx.tokens * hidden / u : 0.0);
}

double outputActivationBytes(double hidden, double vocab, const ActivationContext& ctx)
{
    const double u = ctx.sp ? ctx.tp : 1.0;
    return ctx.tokens * (2.0 * hidden / u + 2.0 * hidden / u + 4.0 * vocab / ctx.tp);
}

double prefillWorkspaceBytes(const LayerShape& s, double tokens, int tp, int etp, double expertLoad)
{
    const double t = tp;
    const double h = s.hidden;
    const double g = s.gated ? 2.0 : 1.0;
    const double stream = 2.0 * h + 2.0 * h; // residual and normed input
    double attn = 0.0;
    const bool recurrent = s.mixer == model::MixerKind::GatedDeltaNet
        || s.mixer == model::MixerKind::KimiDelta || s.mixer == model::MixerKind::Mamba2;
    if (s.mixer == model::MixerKind::None || s.mixer == model::MixerKind::Linear) {
        attn = 2.0 * h;
    } else if (recurrent) {
        // Projection outputs, conv output and scan output of one chunk of rows.
        attn = 2.0 * (2.0 * s.mixerKeyWidth + 3.0 * s.mixerWidth + 2.0 * s.mixerHeads) / t;
    } else if (s.attention == model::AttentionKind::MLA) {
        attn = 2.0 * (s.qLoraRank + s.kvLoraRank + s.ropeDim)
            + 2.0 * s.heads * (2.0 * s.qkHeadDim + 2.0 * s.vHeadDim) / t + 4.0 * s.heads / t;
    } else {
        attn = 2.0 * (s.heads * s.qkHeadDim + s.kvHeads * (s.qkHeadDim + s.vHeadDim)) / t
            + 2.0 * s.heads * s.vHeadDim / t + 4.0 * s.heads / t;
    }
    double mlp = 0.0;
    if (s.ffnKind == model::FfnKind::None || s.ffnKind == model::FfnKind::Linear) {
        mlp = 2.0 * h;
    } else if (!s.moe) {
        mlp = 2.0 * (g + 1.0) * s.ffn / t;
    } else {
        const double rows = routedRowsPerToken(s, tp, etp, expertLoad);
        mlp = 4.0 * s.experts + 2.0 * (g + 1.0) * s.sharedFfn / t
            + rows * (2.0 * h + 2.0 * (g + 1.0) * s.expertFfn / etp + 2.0 * h);
    }
    return tokens * (stream + std::max(attn, mlp));
}

} // namespace day0::plan
