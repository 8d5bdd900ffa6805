// DeepSeek-V4 (`deepseek_v4`): DeepSeek-V4-Pro and -Flash, sgl-project's -FP8 re-packs and
// nvidia's -NVFP4 releases. Reader, checkpoint layout and text tower.
//
// Where the facts come from (research note deepseekv4_glm5.md, its sources S1–S13):
// - Module structure, shapes and the meaning of every config key: DeepSeek's reference
//   `inference/model.py` (deepseek-ai/DeepSeek-V4-Flash @ 60d8d70770c6776ff598c94bb586a859a38244f1;
//   ModelArgs, Compressor, Indexer, Attention, Gate, MoE, Block, MTPBlock, Transformer):
//   `compress_ratios` has one entry per main block and per MTP block (MTPBlock is built with
//   layer_id = n_layers + j); r = 0 sliding window only, r = 4 an overlapping compressor
//   (coff 2) and the Lightning indexer, r = 128 a non-overlapping compressor; `n_shared_experts`
//   is asserted to be 1; hash-routed blocks (`layer_id < n_hash_layers`) replace the gate bias
//   by `tid2eid` [V, K]; the MTP block reuses the model's embed and head.
// - Names: DeepSeek's native checkpoint names, not HF's (`embed.weight`, `head.weight`,
//   `layers.{i}.attn.wq_a.weight` + `.scale`, `layers.{i}.ffn.experts.{e}.w1`, `mtp.0.*`): the
//   82 key patterns of the real DeepSeek-V4-Flash model.safetensors.index.json (public sglang
//   test file, search index id 59666332480; copied to tests/data/model/listings/
//   deepseek-v4-flash-key-patterns.txt), whose 69,187 keys this graph reproduces.
// - Storage dtypes (tensor listings of the Pro and Flash shards, index ids 56365743648,
//   61664379779): FP8 E4M3 weights with F8_E8M0 `.scale` per 128×128 block; routed experts
//   (expert_dtype "fp4") I8 [out, in/2] with F8_E8M0 `.scale` per 32 inputs; BF16 embed, head,
//   norms, gate weight, compressor wkv/wgate, indexer weights_proj; F32 attn_sink, ape, gate
//   bias and every hyper-connection tensor; I64 tid2eid; wo_a is FP8 in the checkpoint.
// - sgl-project -FP8 (config without expert_dtype, model_type "deepseek_ref"): FP8 experts;
//   their scale dtype (E8M0) is inferred, no listing seen.
// - nvidia -NVFP4 (ModelOpt "dsv4-nvfp4-experts"; listings index ids 56313109031,
//   60796105929): the experts of every main block are NVFP4 (U8 weight, F8_E4M3 weight_scale
//   per 16, F32 weight_scale_2 and input_scale); attention, shared experts and the whole MTP
//   block keep the original format, so the MTP experts stay FP4.

#include "model/config_families.h"
#include "model/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::model::detail {

namespace {

using R = ParallelRole;

constexpr std::int64_t kFp4Group = 32; ///< model.py fp4_block_size
constexpr std::int64_t kCsaRatio = 4; ///< overlapping compressor + indexer
constexpr std::int64_t kHcScales = 3; ///< hc_*_scale: pre, post, comb

std::string str(std::int64_t v) { return std::to_string(v); }

Result<void> readCompressedAttention(JsonReader& r, ModelSpec& spec)
{
    CompressedAttentionSpec ca;
    ca.qLoraRank = r.requirePositive("q_lora_rank");
    ca.ropeDim = r.requirePositive("qk_rope_head_dim");
    ca.oGroups = r.requirePositive("o_groups");
    ca.oLoraRank = r.requirePositive("o_lora_rank");
    ca.compressRopeTheta = r.numberOr("compress_rope_theta", 0.0);
    ca.indexerHeads = r.intOr("index_n_heads", 0);
    ca.indexerHeadDim = r.intOr("index_head_dim", 0);
    ca.indexerTopK = r.intOr("index_topk", 0);
    const std::int64_t window = r.requirePositive("sliding_window");
    const std::int64_t blocks = spec.numLayers + spec.numMtpLayers;
    if (r.ok() && !r.has("compress_ratios")) {
        r.fail("compress_ratios", "is missing (one ratio per block: 0, 4 or 128)");
    }
    const auto ratios = intArrayOr(r, "compress_ratios");
    if (r.ok() && std::int64_t(ratios.size()) != blocks) {
        r.fail("compress_ratios",
            fmt::format("has {} entries but the model has {} blocks ({} num_hidden_layers + {} "
                        "num_nextn_predict_layers)",
                ratios.size(), blocks, spec.numLayers, spec.numMtpLayers));
    }
    // model.py builds the overlapping compressor and the indexer for ratio 4 and the plain
    // compressor for any other positive ratio (128 published; `day0 shrink` scales it down);
    // intArrayOr refuses negative entries.
    const bool csa = std::find(ratios.begin(), ratios.end(), kCsaRatio) != ratios.end();
    if (r.ok() && csa && (ca.indexerHeads <= 0 || ca.indexerHeadDim <= 0)) {
        r.fail("index_n_heads",
            "and 'index_head_dim' must be positive: ratio-4 blocks have an "
            "indexer");
    }
    if (r.ok() && spec.numHeads % ca.oGroups != 0) {
        r.fail("o_groups",
            fmt::format("({}) must divide 'num_attention_heads' ({})", ca.oGroups, spec.numHeads));
    }
    if (r.ok() && ca.ropeDim > spec.headDim) {
        r.fail("qk_rope_head_dim",
            fmt::format("({}) exceeds 'head_dim' ({})", ca.ropeDim, spec.headDim));
    }
    if (!r.ok()) {
        return r.error();
    }
    for (std::int64_t i = 0; i < blocks; ++i) {
        LayerSpec& layer = i < spec.numLayers ? spec.layers[std::size_t(i)]
                                              : spec.mtpLayers[std::size_t(i - spec.numLayers)];
        layer.mixer = MixerKind::Compressed;
        layer.compressRatio = ratios[std::size_t(i)];
        layer.slidingWindow = window;
    }
    spec.compressedAttention = ca;
    return success();
}

Result<void> readV4Moe(JsonReader& r, ModelSpec& spec)
{
    MoeSpec moe;
    moe.numExperts = r.requirePositive("n_routed_experts");
    moe.topK = r.requirePositive("num_experts_per_tok");
    moe.expertIntermediate = r.requirePositive("moe_intermediate_size");
    moe.numSharedExperts = r.intOr("n_shared_experts", 1);
    const std::string scoring
        = stringOneOf(r, "scoring_func", { "sqrtsoftplus", "sigmoid", "softmax" }, "sqrtsoftplus");
    // noaux_tc: the gate's bias steers the top-k choice (model.py Gate); it is the only method.
    (void)stringOneOf(r, "topk_method", { "noaux_tc" }, "noaux_tc");
    moe.normTopkProb = r.boolOr("norm_topk_prob", true);
    moe.routedScalingFactor = r.numberOr("routed_scaling_factor", 1.0);
    moe.numHashLayers = r.intOr("num_hash_layers", 0);
    spec.swigluLimit = r.numberOr("swiglu_limit", 0.0);
    if (r.ok() && moe.numSharedExperts != 1) {
        r.fail("n_shared_experts",
            fmt::format("is {}; DeepSeek-V4 has exactly one shared expert (model.py asserts it)",
                moe.numSharedExperts));
    }
    if (r.ok() && moe.topK > moe.numExperts) {
        r.fail("num_experts_per_tok",
            fmt::format("({}) exceeds 'n_routed_experts' ({})", moe.topK, moe.numExperts));
    }
    if (r.ok() && (moe.numHashLayers < 0 || moe.numHashLayers > spec.numLayers)) {
        r.fail("num_hash_layers",
            fmt::format("({}) must be between 0 and num_hidden_layers ({})", moe.numHashLayers,
                spec.numLayers));
    }
    if (!r.ok()) {
        return r.error();
    }
    moe.sharedIntermediate = moe.expertIntermediate;
    moe.expertScoreBias = true;
    moe.scoring = scoring == "sqrtsoftplus" ? RouterScoring::SqrtSoftplus
        : scoring == "sigmoid"              ? RouterScoring::Sigmoid
                                            : RouterScoring::Softmax;
    for (std::int64_t i = 0; i < spec.numLayers; ++i) {
        spec.layers[std::size_t(i)].ffn = FfnKind::Moe;
        // model.py Gate: hash routing for layer_id < n_hash_layers; MTP blocks (layer_id ≥ L)
        // never are.
        spec.layers[std::size_t(i)].hashRouted = i < moe.numHashLayers;
    }
    for (auto& layer : spec.mtpLayers) {
        layer.ffn = FfnKind::Moe;
    }
    spec.moe = moe;
    return success();
}

// The checkpoint's FP8 `.scale` tensors are F8_E8M0 (scale_fmt ue8m0); `expert_dtype` "fp4"
// packs the routed experts, absent keeps them FP8 (sgl-project's re-pack).
Result<void> readV4Quantization(
    const ConfigInput& input, const std::string& expertDtype, ModelSpec& spec)
{
    DAY0_TRY(readQuantizationOf(input, spec));
    if (!spec.quantization) {
        if (!expertDtype.empty()) {
            return Error::badInput(fmt::format("{}: 'expert_dtype' is \"{}\" but there is no "
                                               "quantization_config (FP4 experts come with the "
                                               "FP8 format)",
                input.text.origin, expertDtype));
        }
        return success();
    }
    QuantizationSpec& q = *spec.quantization;
    if (q.method != "fp8" || q.scheme != QuantScheme::BlockFp8) {
        return Error::badInput(fmt::format("{} (quantization_config): quant_method \"{}\" ({}); "
                                           "Day0 models DeepSeek-V4 checkpoints in block FP8",
            input.text.origin, q.method, quantSchemeName(q.scheme)));
    }
    if (q.format != "ue8m0") {
        return Error::badInput(fmt::format("{} (quantization_config): 'scale_fmt' is \"{}\"; "
                                           "Day0 models DeepSeek-V4's \"ue8m0\" scales (F8_E8M0 "
                                           "`.scale` tensors)",
            input.text.origin, q.format));
    }
    q.scaleSuffix = "scale";
    q.scaleDtype = DType::F8E8M0;
    if (expertDtype == "fp4") {
        q.expertScheme = QuantScheme::Fp4Block;
        q.expertGroupSize = kFp4Group;
    }
    return success();
}

// --- graph -------------------------------------------------------------------------------

// How the routed experts under `experts` ("layers.3.ffn.experts") are stored.
struct ExpertStorage {
    bool quantized = false;
    QuantScheme scheme = QuantScheme::BlockFp8;
    std::int64_t groupSize = 0;
};

ExpertStorage expertStorage(const ModelSpec& s, const std::string& experts)
{
    if (!s.quantization) {
        return {};
    }
    const QuantizationSpec& q = *s.quantization;
    if (q.mixedScheme) {
        const bool covered
            = std::any_of(q.mixedModules.begin(), q.mixedModules.end(), [&](const std::string& m) {
                  return experts == m
                      || (experts.size() > m.size() && experts.compare(0, m.size(), m) == 0
                          && experts[m.size()] == '.');
              });
        if (covered) {
            return { true, *q.mixedScheme, q.mixedGroupSize };
        }
    }
    if (q.expertScheme) {
        return { true, *q.expertScheme, q.expertGroupSize };
    }
    return { true, q.scheme, q.groupSize };
}

// Compressor of a CSA/HCA block or of the indexer: learned position bias, BF16 kv and gate
// projections (model.py: "wkv and wgate in the checkpoint is stored in bf16"), RMSNorm.
void addCompressor(GraphBuilder& b, const std::string& c, std::int64_t ratio, std::int64_t width)
{
    const ModelSpec& s = b.spec();
    const std::int64_t coff = ratio == kCsaRatio ? 2 : 1; // the r = 4 compressor overlaps
    b.tensor(c + ".ape", { ratio, coff * width }, DType::F32, R::Replicated, Component::Attention);
    LinearOptions bf16 { R::Replicated, Component::Attention };
    bf16.quantizable = false;
    b.linear(c + ".wkv", coff * width, s.hiddenSize, bf16);
    b.linear(c + ".wgate", coff * width, s.hiddenSize, bf16);
    b.norm(c + ".norm", width);
}

void addAttention(GraphBuilder& b, const std::string& a, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const CompressedAttentionSpec& ca = *s.compressedAttention;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t heads = s.numHeads;
    const std::int64_t d = s.headDim;
    const Component c = Component::Attention;
    b.tensor(a + ".attn_sink", { heads }, DType::F32, R::ColumnParallel, c);
    b.linear(a + ".wq_a", ca.qLoraRank, h, { R::Replicated, c });
    b.norm(a + ".q_norm", ca.qLoraRank);
    b.linear(a + ".wq_b", heads * d, ca.qLoraRank, { R::ColumnParallel, c });
    // One K=V vector per token, shared by every head.
    b.linear(a + ".wkv", d, h, { R::Replicated, c });
    b.norm(a + ".kv_norm", d);
    // Grouped low-rank output: wo_a is [groups·rank, heads·d/groups], one block per group.
    b.linear(
        a + ".wo_a", ca.oGroups * ca.oLoraRank, heads * d / ca.oGroups, { R::ColumnParallel, c });
    b.linear(a + ".wo_b", h, ca.oGroups * ca.oLoraRank, { R::RowParallel, c });
    if (layer.compressRatio > 0) {
        addCompressor(b, a + ".compressor", layer.compressRatio, d);
    }
    if (layer.compressRatio == kCsaRatio) {
        // The indexer reads the block's q_norm(wq_a(x)); its keys come from its own compressor.
        const std::string ix = a + ".indexer";
        b.linear(
            ix + ".wq_b", ca.indexerHeads * ca.indexerHeadDim, ca.qLoraRank, { R::Replicated, c });
        LinearOptions weights { R::Replicated, c };
        weights.quantizable = false;
        b.linear(ix + ".weights_proj", ca.indexerHeads, h, weights);
        addCompressor(b, ix + ".compressor", kCsaRatio, ca.indexerHeadDim);
    }
}

// Hyper-connection maps: fn [rows, streams·H], base [rows], scale [scales]; no ".weight".
void addHyperConnection(
    GraphBuilder& b, const std::string& p, std::int64_t rows, std::int64_t scales)
{
    const ModelSpec& s = b.spec();
    const std::int64_t streams = s.hyperConnections->streams;
    b.tensor(p + "_fn", { rows, streams * s.hiddenSize }, DType::F32, R::Replicated,
        Component::Residual);
    b.tensor(p + "_base", { rows }, DType::F32, R::Replicated, Component::Residual);
    b.tensor(p + "_scale", { scales }, DType::F32, R::Replicated, Component::Residual);
}

void addExperts(GraphBuilder& b, const std::string& experts)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    const std::int64_t w = moe.expertIntermediate;
    const ExpertStorage storage = expertStorage(s, experts);
    b.reserve(std::size_t(moe.numExperts) * 3 * 4);
    std::string module; // reused: Pro builds ~70k expert names
    const auto add = [&](std::size_t stem, const char* name, std::int64_t out, std::int64_t in,
                         ParallelRole role, std::int32_t expert) {
        module.resize(stem);
        module.append(name);
        LinearOptions o { role, Component::RoutedExperts };
        o.expert = expert;
        if (storage.quantized) {
            b.quantizedLinear(module, out, in, o, storage.scheme, storage.groupSize);
        } else {
            o.quantized = 0;
            b.linear(module, out, in, o);
        }
    };
    for (std::int64_t e = 0; e < moe.numExperts; ++e) {
        module.assign(experts).append(".").append(str(e)).append(".");
        const std::size_t stem = module.size();
        const auto expert = static_cast<std::int32_t>(e);
        // w1 gate and w3 up [I, H], w2 down [H, I].
        add(stem, "w1", w, h, R::ColumnParallel, expert);
        add(stem, "w2", h, w, R::RowParallel, expert);
        add(stem, "w3", w, h, R::ColumnParallel, expert);
    }
}

void addFfn(GraphBuilder& b, const std::string& f, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const MoeSpec& moe = *s.moe;
    const std::int64_t h = s.hiddenSize;
    b.tensor(f + ".gate.weight", { moe.numExperts, h }, s.dtype, R::Replicated, Component::Router);
    if (layer.hashRouted) {
        b.tensor(f + ".gate.tid2eid", { s.vocabSize, moe.topK }, DType::I64, R::Replicated,
            Component::Router);
        b.last().lookupTable = true;
    } else {
        b.tensor(f + ".gate.bias", { moe.numExperts }, DType::F32, R::Replicated, Component::Router,
            TensorKind::Bias);
    }
    addExperts(b, f + ".experts");
    const std::string sh = f + ".shared_experts";
    const std::int64_t w = moe.sharedIntermediate;
    b.linear(sh + ".w1", w, h, { R::ColumnParallel, Component::SharedExperts });
    b.linear(sh + ".w2", h, w, { R::RowParallel, Component::SharedExperts });
    b.linear(sh + ".w3", w, h, { R::ColumnParallel, Component::SharedExperts });
}

// One block (`layers.{i}.` or `mtp.{j}.`): attention, two norms, two hyper-connections, MoE.
void addBlock(GraphBuilder& b, const std::string& p, const LayerSpec& layer)
{
    const ModelSpec& s = b.spec();
    const std::int64_t streams = s.hyperConnections->streams;
    const std::int64_t mix = (2 + streams) * streams; // pre, post and the streams² comb map
    addAttention(b, p + "attn", layer);
    b.norm(p + "attn_norm", s.hiddenSize);
    b.norm(p + "ffn_norm", s.hiddenSize);
    addHyperConnection(b, p + "hc_attn", mix, kHcScales);
    addHyperConnection(b, p + "hc_ffn", mix, kHcScales);
    addFfn(b, p + "ffn", layer);
}

} // namespace

Result<void> readDeepseekV4(const ConfigInput& input, ModelSpec& spec)
{
    const Section& text = input.text;
    JsonReader r = text.reader();
    spec.hiddenSize = r.requirePositive("hidden_size");
    spec.numLayers = r.requirePositive("num_hidden_layers");
    spec.numHeads = r.requirePositive("num_attention_heads");
    spec.headDim = r.requirePositive("head_dim");
    spec.vocabSize = r.requirePositive("vocab_size");
    // One K=V vector per token: the key is informational (model.py has no such argument).
    spec.numKvHeads = r.intOr("num_key_value_heads", 1);
    spec.maxPositions = r.intOr("max_position_embeddings", 0);
    spec.normEps = r.numberOr("rms_norm_eps", 1e-6);
    spec.hiddenAct = stringOneOf(r, "hidden_act", { "silu" }, "silu");
    boolMustBe(r, "attention_bias", false);
    spec.numMtpLayers = r.intOr("num_nextn_predict_layers", 0);
    // Absent or null: FP8 experts like every other Linear (sgl-project's re-pack, -Base).
    const std::string expertDtype
        = r.has("expert_dtype") ? stringOneOf(r, "expert_dtype", { "fp4" }, "") : "";
    HyperConnectionSpec hc;
    hc.streams = r.requirePositive("hc_mult");
    hc.sinkhornIters = r.intOr("hc_sinkhorn_iters", 20);
    hc.eps = r.numberOr("hc_eps", 1e-6);
    if (r.ok() && spec.numKvHeads != 1) {
        r.fail("num_key_value_heads",
            fmt::format("is {}; DeepSeek-V4 keeps one K=V vector per token", spec.numKvHeads));
    }
    if (r.ok() && spec.numMtpLayers < 0) {
        r.fail("num_nextn_predict_layers", "must not be negative");
    }
    if (!r.ok()) {
        return r.error();
    }
    spec.layers.assign(std::size_t(spec.numLayers), LayerSpec {});
    spec.mtpLayers.assign(std::size_t(spec.numMtpLayers), LayerSpec {});
    DAY0_TRY(readCompressedAttention(r, spec));
    DAY0_TRY(readV4Moe(r, spec));
    spec.hyperConnections = hc;
    spec.attention = AttentionKind::MQA;
    spec.attentionSinks = true;
    spec.intermediateSize = 0; // every block is MoE
    for (const char* key : { "routed_scaling_factor", "swiglu_limit" }) {
        if (!text.object.contains(key)) {
            spec.warnings.push_back(fmt::format("{}: '{}' is absent (sgl-project's reduced "
                                                "config); the forward uses its default, which "
                                                "the DeepSeek-V4 releases do not",
                text.origin, key));
        }
    }
    DAY0_TRY(readRope(text, spec));
    if (!text.object.contains("partial_rotary_factor")) {
        // RoPE on the last qk_rope_head_dim dims of each head (HF: 64 / 512).
        spec.partialRotaryFactor = double(spec.compressedAttention->ropeDim) / double(spec.headDim);
    }
    DAY0_TRY(readV4Quantization(input, expertDtype, spec));
    // DeepSeek's native names: no "model." prefix, the output head is `head`.
    spec.layout.textPrefix.clear();
    spec.layout.lmHead = "head";
    return success();
}

void addDeepseekV4TextTower(GraphBuilder& b)
{
    const ModelSpec& s = b.spec();
    const std::int64_t h = s.hiddenSize;
    const std::int64_t streams = s.hyperConnections->streams;

    b.begin("embed", BlockKind::Embedding);
    b.tensor("embed.weight", { s.vocabSize, h }, s.dtype, R::VocabParallel, Component::Embedding);

    for (std::int64_t i = 0; i < s.numLayers; ++i) {
        const std::string p = "layers." + str(i);
        b.begin(p, BlockKind::Decoder, static_cast<std::int32_t>(i), true);
        addBlock(b, p + ".", s.layers[std::size_t(i)]);
    }

    // The head first folds the streams into one (hc_head_*, parameters of the model itself),
    // then norms; both belong to this block.
    b.begin("norm", BlockKind::FinalNorm);
    addHyperConnection(b, "hc_head", streams, 1);
    b.norm("norm", h);

    if (!s.tieEmbeddings) {
        // model.py: "lm_head in the checkpoint is stored in bf16".
        b.begin("head", BlockKind::LmHead);
        b.tensor("head.weight", { s.vocabSize, h }, s.dtype, R::VocabParallel, Component::LmHead);
    }

    for (std::int64_t j = 0; j < s.numMtpLayers; ++j) {
        // MTPBlock: x = e_proj(enorm(embed(ids))) + h_proj(hnorm(h)), a block, then the shared
        // head with its own hc_head_* and norm; no embed or head of its own.
        const std::int64_t index = s.numLayers + j;
        const std::string p = "mtp." + str(j);
        b.begin(p, BlockKind::Mtp, static_cast<std::int32_t>(index), true);
        addBlock(b, p + ".", s.mtpLayers[std::size_t(j)]);
        b.linear(p + ".e_proj", h, h, { R::Replicated, Component::Mtp });
        b.linear(p + ".h_proj", h, h, { R::Replicated, Component::Mtp });
        b.norm(p + ".enorm", h);
        b.norm(p + ".hnorm", h);
        b.norm(p + ".norm", h);
        addHyperConnection(b, p + ".hc_head", streams, 1);
    }
}

} // namespace day0::model::detail
