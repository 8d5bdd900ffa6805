#include "exec/op_check.h"

#include "exec/deepseek_v4.h"
#include "exec/dsa_indexer.h"
#include "exec/emulated_ops.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/op_check_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::exec {

using numerics::OpKind;

Result<OpCheckReport> runOpCheck(const model::ModelSpec& spec, const OpCheckOptions& options,
    Progress& progress, std::stop_token stop)
{
    if (options.table == nullptr) {
        return Error::internal("runOpCheck: no tolerance table");
    }
    if (options.target.isF64()) {
        return Error::badInput(
            "opcheck compares a target against fp64; give a target precision other than fp64");
    }
    if (options.tokens < 1) {
        return Error::badInput("--tokens must be at least 1");
    }
    const bool clamped = spec.hiddenAct == "swiglu_oai" || spec.hiddenAct == "swigluoai";
    // Nemotron-H: relu2, not gated (relu2Op below); its layers have no RoPE.
    const bool nemotronH = spec.family == model::Family::NemotronH;
    // Kimi-K3's SiTU-GLU has a row of its own (situGluOp).
    const bool situ = spec.family == model::Family::KimiLinear && spec.hiddenAct == "situ";
    auto act = clamped || nemotronH || situ ? Result<Activation>(Activation::QuickGelu)
                                            : parseActivation(spec.hiddenAct);
    if (!act) {
        return act.error();
    }
    const bool mla = spec.attention == model::AttentionKind::MLA;
    const bool llama4 = spec.family == model::Family::Llama4;
    const bool gemma4 = spec.family == model::Family::Gemma4;
    const bool v4 = spec.family == model::Family::DeepseekV4 && spec.compressedAttention;
    // Gemma-4: the sliding layers' RoPE here, the full layers' (proportional) below.
    // DeepSeek-V4: its compressed layers' (compress_rope_theta with the config's YaRN).
    auto rope = gemma4 ? detail::gemma4Rope(spec, false)
        : v4
        ? makeRope(spec.compressedAttention->ropeDim, spec.compressedAttention->compressRopeTheta,
            spec.ropeScaling, RopeLayout::Interleaved)
        : makeRope(mla ? spec.mla.qkRopeHeadDim
                       : std::int64_t(double(spec.headDim) * spec.partialRotaryFactor),
            spec.ropeTheta, spec.ropeScaling,
            mla || llama4 ? RopeLayout::Interleaved : RopeLayout::RotateHalf);
    if (!rope) {
        return rope.error();
    }
    OpCheckReport report;
    report.model = spec.name;
    report.precision = options.target.describe();
    report.table = options.table->label();
    report.missing = unsupportedFeatures(spec);
    if (v4) {
        if (const auto refusal = detail::deepseekV4PlanRefusal(options.target); !refusal.empty()) {
            report.missing.push_back(refusal);
        }
    }
    detail::OpChecker c(spec, options);
    const auto weights = detail::opCheckLinearWeights(spec);
    progress.setTotal(std::int64_t(weights.size()) + 7);
    if (options.backend != nullptr) {
        report.backend = options.backend->name();
        report.device = options.backend->device();
        report.coverage = backendCoverage(spec, *options.backend);
    }
    const auto step = [&]() -> Result<void> {
        DAY0_TRY(c.status());
        progress.advance();
        return stop.stop_requested() ? Result<void>(Error::cancelled()) : success();
    };
    c.embedding();
    DAY0_TRY(step());
    c.rmsNormOp("rms_norm", options.tokens, spec.hiddenSize, "native");
    if (options.backend != nullptr) {
        c.rmsNormResidualOp(options.tokens, spec.hiddenSize);
    }
    DAY0_TRY(step());
    if (spec.qkNorm) {
        c.rmsNormOp("qk_norm (per head)", options.tokens * spec.numHeads, spec.headDim,
            "composed of rms_norm per head");
    }
    if (spec.qkNormAcrossHeads) {
        c.rmsNormOp("q_norm (across heads)", options.tokens, spec.numHeads * spec.headDim,
            "rms_norm over the whole projection");
    }
    for (const auto& [module, req] : weights) {
        c.linearOp(module, req.shape[1], req.shape[0],
            module == "lm_head" || (v4 && module == "head") ? OpKind::Logits : OpKind::Linear);
        DAY0_TRY(step());
    }
    const bool qwen3Vl
        = spec.family == model::Family::Qwen3Vl || spec.family == model::Family::Qwen3VlMoe;
    if (qwen3Vl) {
        setInterleavedMrope(*rope, spec.ropeScaling.mropeSection);
    }
    const bool mrope = !rope->pairComponent.empty();
    // Kimi-Linear's mla_use_nope: its only attention layers rotate nothing.
    if (!nemotronH && !(mla && spec.mla.noRope)) {
        c.rope(*rope, mla ? spec.numHeads : spec.numKvHeads, rope->rotaryDim,
            qwen3Vl ? "rope (M-RoPE t/h/w, interleaved)"
                    : (mrope ? "rope (M-RoPE t/h/w sections)"
                             : (gemma4    ? "rope (sliding layers, default, rotate-half)"
                                     : v4 ? "rope (compressed layers, yarn, interleaved; the "
                                            "engine rotates the trailing lanes)"
                                          : std::string())),
            mrope);
    }
    if (gemma4) {
        auto full = detail::gemma4Rope(spec, true);
        if (!full) {
            return full.error();
        }
        c.rope(*full, spec.numKvHeads, full->rotaryDim,
            fmt::format("rope (full layers, {}: {} of {} rotate-half pairs turn)",
                spec.ropeScaling.type,
                std::count_if(
                    full->invFreq.begin(), full->invFreq.end(), [](double f) { return f != 0.0; }),
                full->invFreq.size()));
    }
    DAY0_TRY(step());
    if (mla) {
        const std::int64_t qk = spec.mla.qkNopeHeadDim + spec.mla.qkRopeHeadDim;
        double scale = 1.0 / std::sqrt(double(qk));
        if (spec.ropeScaling.type == "yarn" && spec.ropeScaling.mscaleAllDim > 0.0) {
            const double m = yarnMscale(spec.ropeScaling.factor, spec.ropeScaling.mscaleAllDim);
            scale *= m * m;
        }
        c.attentionOp(spec.numHeads, spec.numHeads, qk, spec.mla.vHeadDim, scale, "attention (MLA)",
            "composed of linear, rms_norm, rope (interleaved), attention");
        if (spec.mla.indexerHeads > 0) {
            // DSA: the indexer's norm, rotation and scores, then MLA over the keys it keeps, with
            // a top-k of a quarter of the rows so that the check drops keys.
            const auto& m = spec.mla;
            c.layerNormOp(
                "dsa indexer k_norm (layer_norm)", options.tokens, m.indexerHeadDim, 1e-6);
            Rope indexerRope = *rope;
            indexerRope.layout
                = m.indexerRopeInterleave ? RopeLayout::Interleaved : RopeLayout::RotateHalf;
            c.rope(indexerRope, m.indexerHeads, m.indexerHeadDim,
                fmt::format("dsa indexer rope ({}, first {} lanes)",
                    m.indexerRopeInterleave ? "interleaved pairs" : "rotate-half", rope->rotaryDim),
                false);
            const std::int64_t used = std::max<std::int64_t>(1, options.tokens / 4);
            const auto kept = c.dsaIndexerOp(m.indexerHeads, m.indexerHeadDim, used);
            c.attentionOp(spec.numHeads, spec.numHeads, qk, m.vHeadDim, scale,
                fmt::format(
                    "attention (MLA, DSA top-{}; checked with top-{})", m.indexerTopK, used),
                "native (GEMM per head, selected-key mask)", true, 0, 0, false, kept);
        }
    } else {
        const std::string kind
            = spec.numKvHeads == spec.numHeads ? "MHA" : (spec.numKvHeads == 1 ? "MQA" : "GQA");
        // Gemma-4 scales q·k by 1: its q_norm / k_norm stand for the 1/sqrt(d).
        const double qkScale = gemma4 ? 1.0 : 1.0 / std::sqrt(double(spec.headDim));
        c.attentionOp(spec.numHeads, spec.numKvHeads, spec.headDim, spec.headDim, qkScale,
            fmt::format("attention ({}{})", kind, gemma4 ? ", scale 1" : ""),
            "native (GEMM per head)");
        if (gemma4) {
            for (const auto& layer : spec.layers) {
                if (layer.mixer == model::MixerKind::Sliding) {
                    continue;
                }
                const std::int64_t d = spec.headDimOf(layer);
                const std::int64_t kv = spec.kvHeadsOf(layer);
                c.attentionOp(spec.headsOf(layer), kv, d, d, 1.0,
                    fmt::format("attention (full layers: head width {}, {} KV heads{}, scale 1)", d,
                        kv, layer.sharedKv ? ", keys as values" : ""),
                    "native (GEMM per head)");
                break;
            }
            c.unitNormOp(spec.numKvHeads, spec.headDim, "v_norm (weightless RMS, per head)");
        }
        std::int64_t chunk = 0;
        std::int64_t window = 0;
        bool nope = false;
        for (const auto& layer : spec.layers) {
            chunk = std::max(chunk, layer.attentionChunk);
            window = std::max(window, layer.slidingWindow);
            nope = nope || !layer.rope;
        }
        if (spec.attentionSinks) {
            c.attentionOp(spec.numHeads, spec.numKvHeads, spec.headDim, spec.headDim,
                1.0 / std::sqrt(double(spec.headDim)),
                fmt::format("attention ({}, learned sinks)", kind),
                "native (GEMM per head, sink logit in the softmax)", true, 0, 0, true);
        }
        if (window > 0) {
            // As for chunks, the mask is checked with a window inside the rows.
            const std::int64_t used = std::max<std::int64_t>(1, options.tokens / 4);
            c.attentionOp(spec.numHeads, spec.numKvHeads, spec.headDim, spec.headDim, qkScale,
                fmt::format("attention ({}, sliding window {}{}; checked with window {})", kind,
                    window, spec.attentionSinks ? ", learned sinks" : "", used),
                "native (GEMM per head, window mask)", true, 0, used, spec.attentionSinks);
        }
        if (chunk > 0) {
            // The mask, not the chunk length, is what is checked: chunks of a quarter of the rows
            // put several chunk boundaries inside the check.
            const std::int64_t used = std::max<std::int64_t>(1, options.tokens / 4);
            c.attentionOp(spec.numHeads, spec.numKvHeads, spec.headDim, spec.headDim,
                1.0 / std::sqrt(double(spec.headDim)),
                fmt::format("attention ({}, chunked {}; checked with chunk {})", kind, chunk, used),
                "native (GEMM per head, chunk mask)", true, used);
        }
        if (spec.qkL2Norm) {
            c.unitNormOp(spec.numHeads, spec.headDim);
        }
        if (spec.blockSparse) {
            // MiniMax-M3's MSA (minimax_m3_block.cpp): the index heads' norm and rotation, the
            // block selection with blocks of a quarter of the rows, then one KV group's
            // attention over its kept blocks.
            const auto& bs = *spec.blockSparse;
            c.rmsNormOp("msa index q/k norm (per head)", options.tokens * bs.indexHeads,
                bs.indexDim, "composed of rms_norm per head");
            c.rope(*rope, bs.indexHeads, bs.indexDim,
                fmt::format("msa index rope (rotate-half, first {} lanes)", rope->rotaryDim));
            const std::int64_t block = std::max<std::int64_t>(1, options.tokens / 4);
            const std::int64_t topK = std::min<std::int64_t>(bs.topKBlocks, 2);
            const auto kept = c.msaSelectionOp(bs.indexHeads, bs.indexDim, block, topK);
            const std::int64_t group = spec.numHeads / spec.numKvHeads;
            c.attentionOp(group, 1, spec.headDim, spec.headDim, qkScale,
                fmt::format("attention (MSA, top-{} blocks of {}; checked with top-{} of {})",
                    bs.topKBlocks, bs.blockSize, topK, block),
                "native (GEMM per head, selected-key mask)", true, 0, 0, false, kept);
        }
        if (nope && spec.attnTemperatureScale > 0.0) {
            c.temperatureOp(spec.numHeads, spec.headDim);
        }
    }
    if (spec.linearAttention && detail::isQwenNext(spec)) {
        c.gatedDeltaNetOps(*spec.linearAttention, spec.attentionOutputGate);
    }
    if (spec.linearAttention && spec.family == model::Family::KimiLinear) {
        c.kimiDeltaOps(*spec.linearAttention);
    }
    if (spec.attnResBlockSize > 0) {
        // The output mix: one sealed block per attn_res_block_size layers, the embedding first
        // (kimi_attn_res.cpp; Kimi-K3: 8).
        c.attnResOp(1 + (spec.numLayers - 1) / spec.attnResBlockSize);
    }
    DAY0_TRY(step());
    if (v4) {
        c.deepseekV4Ops();
    } else if (nemotronH) {
        c.relu2Op(spec.moe ? spec.moe->expertIntermediate : spec.intermediateSize,
            "relu2 activation (relu(x)², not gated)");
        c.mamba2Ops();
    } else if (situ) {
        c.situGluOp(spec.intermediateSize);
    } else if (clamped) {
        c.clampedSwiglu(
            spec.moe ? spec.moe->expertIntermediate : spec.intermediateSize, spec.swigluLimit);
    } else {
        // Every-layer-MoE models (Qwen3.5-MoE) have no dense MLP: the experts' width.
        c.gatedActivation(spec.intermediateSize > 0 || !spec.moe ? spec.intermediateSize
                                                                 : spec.moe->expertIntermediate,
            *act);
    }
    DAY0_TRY(step());
    if (spec.moe && !v4) {
        const std::string kind = spec.moe->scoring == model::RouterScoring::Sigmoid
            ? (spec.moe->numGroups > 1 ? "sigmoid, group-limited" : "sigmoid")
            : "softmax";
        c.router(fmt::format("router ({}{}{}{})", kind,
            spec.moe->expertScoreBias ? ", e_score_correction_bias" : "",
            spec.moe->routerBias ? ", linear bias" : "",
            gemma4 ? ", top-k renormalised then per_expert_scale" : ""));
        if (gemma4) {
            c.unitNormOp(1, spec.hiddenSize, "router norm (weightless RMS)");
        }
    }
    if (spec.finalLogitSoftcap > 0.0) {
        c.softCapOp(std::min<std::int64_t>(spec.vocabSize, 4096), spec.finalLogitSoftcap);
    }
    DAY0_TRY(step());
    // Gemma-4's vision tower (vision_gemma4.cpp): its norms, its rotary over x and y (each a
    // rotate-half over half the head: checked as one over heads of half the width), its
    // unmasked attention with scaling 1 and its gated GELU-tanh MLP. Its linears are rows of
    // their own (opCheckLinearWeights). Qwen3.5's tower is not computed: no rows.
    if (spec.vision && report.missing.empty() && gemma4 && spec.vision->kind == "gemma4") {
        const auto& v = *spec.vision;
        c.rmsNormOp("vision rms_norm (sandwich norms, q_norm / k_norm per head)", options.tokens,
            v.hiddenSize, "native");
        c.unitNormOp(v.numKvHeads, v.headDim, "vision v_norm (weightless RMS, per head)");
        c.unitNormOp(1, v.hiddenSize, "embed_vision pre-projection norm (weightless RMS)");
        Rope half;
        half.rotaryDim = v.headDim / 2;
        for (std::int64_t i = 0; i < v.headDim / 4; ++i) {
            half.invFreq.push_back(1.0 / std::pow(100.0, double(2 * i) / double(v.headDim / 2)));
        }
        c.rope(half, 2 * v.numHeads, v.headDim / 2,
            "vision rope (2-D: x on the first half of each head, y on the second)");
        c.attentionOp(v.numHeads, v.numKvHeads, v.headDim, v.headDim, 1.0,
            "vision attention (full, per image, scaling 1)", "native (GEMM per head, no mask)",
            false);
        auto vact = parseActivation(v.hiddenAct);
        if (!vact) {
            return vact.error();
        }
        c.gatedActivation(
            v.intermediateSize, *vact, fmt::format("vision gated activation ({})", v.hiddenAct));
    }
    if (spec.vision && report.missing.empty() && !gemma4 && !detail::isQwenNext(spec)) {
        const auto& v = *spec.vision;
        const std::int64_t hd = v.hiddenSize / std::max<std::int64_t>(v.numHeads, 1);
        if (v.kind == "qwen2_5_vl") {
            c.rmsNormOp("vision rms_norm", options.tokens, v.hiddenSize, "native");
        } else {
            c.layerNormOp("vision layer_norm", options.tokens, v.hiddenSize, 1e-6);
        }
        Rope vrope;
        vrope.rotaryDim = hd;
        for (int part = 0; part < 2; ++part) {
            for (std::int64_t i = 0; i < hd / 4; ++i) {
                vrope.invFreq.push_back(1.0 / std::pow(10000.0, double(2 * i) / double(hd / 2)));
                vrope.pairComponent.push_back(part);
            }
        }
        c.rope(vrope, v.numHeads, hd, "vision rope (2-D rows/columns)", true);
        c.attentionOp(v.numHeads, v.numHeads, hd, hd, 1.0 / std::sqrt(double(hd)),
            v.kind == "qwen2_5_vl" ? "vision attention (full / per window)"
                                   : "vision attention (full, per image)",
            "native (GEMM per head, no mask)", false);
        auto vact = parseActivation(v.hiddenAct);
        if (!vact) {
            return vact.error();
        }
        if (v.kind == "qwen2_5_vl") {
            c.gatedActivation(v.intermediateSize, *vact,
                fmt::format("vision gated activation ({})", v.hiddenAct));
        } else {
            c.activationOp(
                v.intermediateSize, *vact, fmt::format("vision activation ({})", v.hiddenAct));
        }
        c.activationOp(v.hiddenSize * v.spatialMergeSize * v.spatialMergeSize, Activation::Gelu,
            "merger activation (gelu, erf)");
    }
    report.rows = c.take();
    for (const auto& r : report.rows) {
        report.passCount += r.verdict.status == numerics::VerdictStatus::Pass ? 1 : 0;
        report.warnCount += r.verdict.status == numerics::VerdictStatus::Warn ? 1 : 0;
        report.failCount += r.verdict.status == numerics::VerdictStatus::Fail ? 1 : 0;
    }
    return report;
}

} // namespace day0::exec
