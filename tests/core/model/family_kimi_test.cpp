// Kimi-K3 (kimi_k3 / kimi_linear text), Kimi-Linear-48B-A3B and the ModelOpt NVFP4 releases of
// Kimi-K2.5 / K2.6: readings, parameter counts by hand against the publishers' figures, the layer
// pattern, tensors against the real K3 shard listing, KV/state footprints, bad input.
// Figures and their sources: research note research note kimi_ct.md (not in the repository) (§3, §4.5, §5), quoted at each test.

#include "base/json_util.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

const char* const kK3 = "configs/frontier/moonshotai--Kimi-K3.json";
const char* const kLinear = "configs/kimi-linear-48b-a3b.json";
const char* const kK26Nvfp4 = "configs/frontier/nvidia--Kimi-K2.6-NVFP4.json";
const char* const kK25Nvfp4 = "configs/frontier-sizes/nvidia--Kimi-K2.5-NVFP4.json";



std::int64_t componentTotal(const ParameterCounts& c, Component component)
{
    for (const auto& entry : c.byComponent) {
        if (entry.component == component) {
            return entry.total;
        }
    }
    return 0;
}

std::int64_t blockBytes(const Block& block)
{
    std::int64_t bytes = 0;
    for (const auto& t : block.tensors) {
        bytes += t.bytes();
    }
    return bytes;
}

nlohmann::json loadJson(const std::string& relative)
{
    auto json = readJsonFile(dataDir() / relative);
    if (!json) {
        ADD_FAILURE() << json.error().message;
        return {};
    }
    return *json;
}

// Reads an edited copy of a config; the error message when it fails.
std::string errorOf(const nlohmann::json& config)
{
    auto spec = readConfig(config, "Kimi-K3.json");
    return spec ? std::string() : spec.error().message;
}


struct Listed {
    DType dtype;
    std::vector<std::int64_t> shape;
};

// tests/data/model/listings/kimi-k3-shard00002-layer1.tsv, with `{e}` expanded to 896 experts.
std::map<std::string, Listed> shardListing(const std::string& prefix, std::int64_t experts)
{
    std::map<std::string, Listed> out;
    std::ifstream in(dataDir() / "listings" / "kimi-k3-shard00002-layer1.tsv");
    EXPECT_TRUE(in.good());
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        if (header) { // name dtype shape
            header = false;
            continue;
        }
        std::istringstream cells(line);
        std::string name, dtype, shape;
        std::getline(cells, name, '\t');
        std::getline(cells, dtype, '\t');
        std::getline(cells, shape, '\t');
        Listed entry { parseDType(dtype).value_or(DType::BF16), {} };
        EXPECT_TRUE(parseDType(dtype).has_value()) << dtype;
        std::string digits;
        for (const char c : shape + ",") {
            if (std::isdigit(static_cast<unsigned char>(c))) {
                digits += c;
            } else if (!digits.empty()) {
                entry.shape.push_back(std::stoll(digits));
                digits.clear();
            }
        }
        const auto brace = name.find("{e}");
        if (brace == std::string::npos) {
            out[prefix + name] = entry;
            continue;
        }
        for (std::int64_t e = 0; e < experts; ++e) {
            out[prefix + name.substr(0, brace) + std::to_string(e) + name.substr(brace + 3)]
                = entry;
        }
    }
    return out;
}

} // namespace

// The Kimi-K3 config: text_config kimi_linear with a nested linear_attn_config, MoonViT-3.
TEST(KimiK3, ReadsEveryKey)
{
    const ModelSpec s = fromData(kK3);
    EXPECT_EQ(s.family, Family::KimiLinear);
    EXPECT_FALSE(s.partial);
    EXPECT_TRUE(s.ignored.empty());
    for (const auto& key : s.keys) {
        EXPECT_NE(key.status, KeyStatus::Unknown) << key.path;
    }
    EXPECT_EQ(s.layout.textPrefix, "language_model.model");
    EXPECT_EQ(s.layout.lmHead, "language_model.lm_head");
    EXPECT_EQ(s.layout.visionPrefix, "vision_tower");
    EXPECT_EQ(s.layout.projectorPrefix, "mm_projector");
    EXPECT_EQ(s.hiddenSize, 7168);
    EXPECT_EQ(s.numLayers, 93);
    EXPECT_EQ(s.vocabSize, 163840);
    EXPECT_EQ(s.hiddenAct, "situ");
    EXPECT_FALSE(s.tieEmbeddings);
    EXPECT_EQ(s.attnResBlockSize, 12);
    EXPECT_EQ(s.numMtpLayers, 0);

    EXPECT_EQ(s.attention, AttentionKind::MLA);
    EXPECT_EQ(s.mla.qLoraRank, 1536);
    EXPECT_EQ(s.mla.kvLoraRank, 512);
    EXPECT_EQ(s.mla.qkNopeHeadDim, 128);
    EXPECT_EQ(s.mla.qkRopeHeadDim, 64);
    EXPECT_EQ(s.mla.vHeadDim, 128);
    EXPECT_TRUE(s.mla.noRope);
    EXPECT_TRUE(s.mla.outputGate);

    ASSERT_TRUE(s.linearAttention.has_value());
    EXPECT_EQ(s.linearAttention->keyHeads, 96);
    EXPECT_EQ(s.linearAttention->valueHeads, 96);
    EXPECT_EQ(s.linearAttention->keyHeadDim, 128);
    EXPECT_EQ(s.linearAttention->valueHeadDim, 128);
    EXPECT_EQ(s.linearAttention->convKernel, 4);
    EXPECT_EQ(s.linearAttention->stateDtype, DType::F32);
    EXPECT_TRUE(s.linearAttention->fullRankGate);
    EXPECT_TRUE(s.linearAttention->paddedALog);

    ASSERT_TRUE(s.moe.has_value());
    EXPECT_EQ(s.moe->numExperts, 896);
    EXPECT_EQ(s.moe->topK, 16);
    EXPECT_EQ(s.moe->expertIntermediate, 3072);
    EXPECT_EQ(s.moe->numSharedExperts, 2);
    EXPECT_EQ(s.moe->sharedIntermediate, 6144);
    EXPECT_EQ(s.moe->latentSize, 3584);
    EXPECT_TRUE(s.moe->latentNorm);
    EXPECT_EQ(s.moe->scoring, RouterScoring::Sigmoid);
    EXPECT_TRUE(s.moe->expertScoreBias);
    EXPECT_TRUE(s.moe->normTopkProb);
    EXPECT_EQ(s.moe->numGroups, 1);
    EXPECT_EQ(s.moe->topkGroup, 1);
    EXPECT_DOUBLE_EQ(s.moe->routedScalingFactor, 1.0);

    // compressed-tensors mxfp4-pack-quantized inside text_config; only the routed experts.
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->method, "compressed-tensors");
    EXPECT_EQ(s.quantization->scheme, QuantScheme::PackedMxfp4);
    EXPECT_EQ(s.quantization->groupSize, 32);
    EXPECT_TRUE(s.quantization->routedExpertsOnly);

    ASSERT_TRUE(s.vision.has_value());
    EXPECT_EQ(s.vision->kind, "moonvit3");
    EXPECT_EQ(s.vision->depth, 27);
    EXPECT_EQ(s.vision->hiddenSize, 1024);
    EXPECT_EQ(s.vision->intermediateSize, 4096);
    EXPECT_EQ(s.vision->numHeads, 12);
    EXPECT_EQ(s.vision->headDim, 128);
    EXPECT_EQ(s.vision->qkvWidth, 3 * 1536);
    EXPECT_TRUE(s.vision->rmsNorm);
    EXPECT_FALSE(s.vision->biases);
    EXPECT_FALSE(s.vision->attentionBias);
    EXPECT_FALSE(s.vision->patchEmbedBias);
    EXPECT_EQ(s.vision->projector, "patchmergerv2");
    EXPECT_EQ(s.vision->outHiddenSize, 7168);
}

// linear_attn_config lists are 1-based: full_attn_layers {4, 8, ..., 92, 93} are the 0-based MLA
// layers 3, 7, ..., 91, 92 (24), the 69 others KDA; layer 0 is a dense KDA layer.
TEST(KimiK3, LayerPattern)
{
    const ModelSpec s = fromData(kK3);
    ASSERT_EQ(s.layers.size(), 93u);
    int mla = 0;
    int kda = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const bool full = (i + 1) % 4 == 0 || i == 92;
        EXPECT_EQ(s.layers[i].mixer, full ? MixerKind::Attention : MixerKind::KimiDelta) << i;
        EXPECT_EQ(s.layers[i].ffn, i == 0 ? FfnKind::Dense : FfnKind::Moe) << i;
        (full ? mla : kda) += 1;
    }
    EXPECT_EQ(mla, 24);
    EXPECT_EQ(kda, 69);
    EXPECT_EQ(s.layers[91].mixer, MixerKind::Attention);
    EXPECT_EQ(s.layers[90].mixer, MixerKind::KimiDelta);
    EXPECT_EQ(s.numMoeLayers(), 92);
}

// Parameters by hand (research note kimi_ct.md (not in the repository) §5.2): H 7168, KDA width P = 96·128, latent L 3584, experts of
// 3072, 896 experts (16 active), vocabulary 163840.
TEST(KimiK3, ParameterCountsByHand)
{
    constexpr std::int64_t H = 7168, P = 96 * 128, D = 128, Hk = 96, K = 4, L = 3584, I = 3072;
    constexpr std::int64_t V = 163840, E = 896, k = 16;
    constexpr std::int64_t kda
        = 3 * P * H + 3 * P * K + D * H + P * D + D + P + Hk * H + P * H + D + H * P;
    static_assert(kda == 443'740'416);
    constexpr std::int64_t mla
        = 1536 * H + 1536 + 96 * 192 * 1536 + 576 * H + 512 + 96 * 256 * 512 + P * H + H * P;
    static_assert(mla == 232'196'096);
    constexpr std::int64_t layerNorms = 6 * H; // 2 norms + 4 AttnRes
    constexpr std::int64_t dense = 3 * 33792 * H;
    constexpr std::int64_t moeShared = E * H + E + 2 * L * H + L + 3 * 6144 * H;
    static_assert(moeShared == 189'927'808);
    constexpr std::int64_t expert = 3 * I * L;
    constexpr std::int64_t embed = V * H;
    constexpr std::int64_t text = 2 * embed + 3 * H + 93 * layerNorms + 69 * kda + 24 * mla + dense
        + 92 * (moeShared + E * expert);
    static_assert(text == 2'779'484'478'208);
    constexpr std::int64_t tower = 602112 + 64 * 64 * 1024
        + 27 * (2 * 1024 + 4608 * 1024 + 1024 * 1536 + 2 * 4096 * 1024) + 1024;
    constexpr std::int64_t projector = 4096 * 4096 + 7168 * 4096 + 7168;
    static_assert(tower == 401'214'464 && projector == 46'144'512);
    constexpr std::int64_t activeNoEmbed = embed + 3 * H + 93 * layerNorms + 69 * kda + 24 * mla
        + dense + 92 * (moeShared + k * expert);
    static_assert(activeNoEmbed == 104'189'614'848);

    const ParameterCounts c = buildLayerGraph(fromData(kK3)).countParameters();
    EXPECT_EQ(c.mainModel, text);
    EXPECT_EQ(c.vision, tower + projector);
    EXPECT_EQ(c.total, text + tower + projector);
    EXPECT_EQ(c.total, 2'779'931'837'184);
    EXPECT_EQ(c.embedding, embed);
    EXPECT_EQ(c.lmHead, embed);
    EXPECT_EQ(c.activeWithoutEmbedding, activeNoEmbed);
    EXPECT_EQ(c.mtp, 0);
    EXPECT_EQ(componentTotal(c, Component::Residual), 93 * 4 * H + 2 * H);
    EXPECT_EQ(componentTotal(c, Component::SharedExperts), 92 * 3 * 6144 * H);
    // Routed experts plus the latent projections (the routed path, not per-expert).
    EXPECT_EQ(componentTotal(c, Component::RoutedExperts), 92 * (E * expert + 2 * L * H));

    // "Kimi K3: Open Frontier Intelligence" (arXiv 2607.24653) Table 1: 2.78T total, 104.2B
    // activated. 2.78T holds with or without the tower (2.7795T / 2.7799T); 104.2B is the active
    // count without the input embedding, with lm_head, without vision (research note kimi_ct.md (not in the repository) §5.2: with the
    // embedding 105.36B, without lm_head too 103.02B, with vision 104.64B).
    expectNear(c.mainModel, 2.78e12, 0.0005, "Kimi-K3 2.78T (text)");
    expectNear(c.total, 2.78e12, 0.0005, "Kimi-K3 2.78T (with vision)");
    expectNear(c.activeWithoutEmbedding, 104.2e9, 0.0005, "Kimi-K3 104.2B activated");
}

// Layer 1 of the real shard model-00002-of-000096, name by name, shape and dtype; and its bytes:
// data start 818,704 + layer 1 = the file's 16,990,911,504 bytes.
TEST(KimiK3, Layer1EqualsRealShardListing)
{
    const LayerGraph g = buildLayerGraph(fromData(kK3));
    const Block* layer1 = g.findBlock("language_model.model.layers.1");
    ASSERT_NE(layer1, nullptr);
    const auto listing = shardListing("language_model.model.layers.1.", 896);
    EXPECT_EQ(listing.size(), 28u + 896u * 6u);
    ASSERT_EQ(layer1->tensors.size(), listing.size());
    for (const auto& t : layer1->tensors) {
        const auto it = listing.find(t.name);
        ASSERT_NE(it, listing.end()) << t.name << " is not in the shard";
        EXPECT_EQ(t.dtype, it->second.dtype) << t.name;
        EXPECT_EQ(t.shape, it->second.shape) << t.name;
    }
    constexpr std::int64_t perExpert = 17'547'264; // w1, w2, w3: packed + scales
    EXPECT_EQ(blockBytes(*layer1), 1'267'744'256 + 896 * perExpert);
    EXPECT_EQ(818'704 + blockBytes(*layer1), 16'990'911'504);
    EXPECT_EQ(layer1->topK, 16);
    EXPECT_EQ(layer1->numExperts, 896);
}

// The rest of the graph: MLA with its output gate, the dense layer, model-level tensors, the
// tower; the totals of research note kimi_ct.md (not in the repository) §3.9.
TEST(KimiK3, TensorsCountsAndBytes)
{
    const LayerGraph g = buildLayerGraph(fromData(kK3));
    const std::string p = "language_model.model.";
    const DType bf16 = DType::BF16;
    expectTensor(g, p + "embed_tokens.weight", { 163840, 7168 }, bf16);
    expectTensor(g, p + "norm.weight", { 7168 }, bf16);
    expectTensor(g, p + "output_attn_res_norm.weight", { 7168 }, bf16);
    expectTensor(g, p + "output_attn_res_proj.weight", { 1, 7168 }, bf16);
    expectTensor(g, "language_model.lm_head.weight", { 163840, 7168 }, bf16);
    EXPECT_EQ(g.findTensor(p + "output_attn_res_proj.weight")->component, Component::Residual);

    const std::string mla = p + "layers.92.self_attn.";
    expectTensor(g, mla + "q_a_proj.weight", { 1536, 7168 }, bf16);
    expectTensor(g, mla + "q_a_layernorm.weight", { 1536 }, bf16);
    expectTensor(g, mla + "q_b_proj.weight", { 96 * 192, 1536 }, bf16);
    expectTensor(g, mla + "kv_a_proj_with_mqa.weight", { 576, 7168 }, bf16);
    expectTensor(g, mla + "kv_a_layernorm.weight", { 512 }, bf16);
    expectTensor(g, mla + "kv_b_proj.weight", { 96 * 256, 512 }, bf16);
    expectTensor(g, mla + "g_proj.weight", { 12288, 7168 }, bf16);
    expectTensor(g, mla + "o_proj.weight", { 7168, 12288 }, bf16);
    EXPECT_EQ(g.findTensor(mla + "q_conv1d.weight"), nullptr);
    EXPECT_EQ(g.findTensor(mla + "k_proj.k_scale"), nullptr);

    const std::string l0 = p + "layers.0.";
    expectTensor(g, l0 + "mlp.gate_proj.weight", { 33792, 7168 }, bf16);
    expectTensor(g, l0 + "mlp.down_proj.weight", { 7168, 33792 }, bf16);
    expectTensor(g, l0 + "self_attn.A_log", { 128 }, DType::F32);
    expectTensor(g, l0 + "self_attn.q_conv1d.weight", { 12288, 1, 4 }, DType::F32);
    expectTensor(g, l0 + "self_attention_res_proj.weight", { 1, 7168 }, bf16);
    EXPECT_EQ(g.findTensor(l0 + "block_sparse_moe.gate.weight"), nullptr);
    EXPECT_FALSE(g.findTensor(l0 + "self_attn.A_log")->altDtype.has_value());

    const std::string moe = p + "layers.92.block_sparse_moe.";
    expectTensor(g, moe + "experts.895.w2.weight_packed", { 3584, 1536 }, DType::U8);
    expectTensor(g, moe + "experts.895.w2.weight_scale", { 3584, 96 }, DType::U8);
    expectTensor(g, moe + "routed_expert_up_proj.weight", { 7168, 3584 }, bf16);
    EXPECT_EQ(g.findTensor(moe + "experts.0.w1.weight_shape"), nullptr);
    // An MXFP4 weight holds two parameters per byte; its E8M0 scales none.
    EXPECT_EQ(g.findTensor(moe + "experts.0.w1.weight_packed")->params(), 3072 * 3584);
    EXPECT_EQ(g.findTensor(moe + "experts.0.w1.weight_scale")->params(), 0);

    // MoonViT-3: no biases, RMSNorm, qkv 3·1536, patchmergerv2 (post_norm, no pre_norm).
    expectTensor(g, "vision_tower.patch_embed.proj.weight", { 1024, 3, 14, 14 }, bf16);
    expectTensor(g, "vision_tower.patch_embed.pos_emb.weight", { 64, 64, 1024 }, bf16);
    expectTensor(g, "vision_tower.encoder.blocks.26.norm0.weight", { 1024 }, bf16);
    expectTensor(g, "vision_tower.encoder.blocks.26.wqkv.weight", { 4608, 1024 }, bf16);
    expectTensor(g, "vision_tower.encoder.blocks.0.wo.weight", { 1024, 1536 }, bf16);
    expectTensor(g, "vision_tower.encoder.blocks.0.mlp.fc0.weight", { 4096, 1024 }, bf16);
    expectTensor(g, "vision_tower.encoder.blocks.0.mlp.fc1.weight", { 1024, 4096 }, bf16);
    expectTensor(g, "vision_tower.encoder.final_layernorm.weight", { 1024 }, bf16);
    expectTensor(g, "mm_projector.proj.0.weight", { 4096, 4096 }, bf16);
    expectTensor(g, "mm_projector.proj.2.weight", { 7168, 4096 }, bf16);
    expectTensor(g, "mm_projector.post_norm.weight", { 7168 }, bf16);
    for (const char* absent :
        { "vision_tower.patch_embed.proj.bias", "vision_tower.encoder.blocks.0.norm0.bias",
            "vision_tower.encoder.blocks.0.wqkv.bias", "vision_tower.encoder.blocks.0.mlp.fc0.bias",
            "mm_projector.pre_norm.weight", "mm_projector.proj.0.bias" }) {
        EXPECT_EQ(g.findTensor(absent), nullptr) << absent;
    }

    std::size_t vision = 0;
    for (const auto& block : g.blocks) {
        if (block.kind == BlockKind::VisionPatchEmbed || block.kind == BlockKind::VisionBlock
            || block.kind == BlockKind::VisionMerger) {
            vision += block.tensors.size();
        }
    }
    EXPECT_EQ(vision, 168u);
    // 5 model-level, 93 × 6 norms/AttnRes, 69 × 14 KDA, 24 × 8 MLA, 3 dense, 92 × (8 + 896 × 6).
    EXPECT_EQ(
        g.tensorCount(), 5u + 93u * 6u + 69u * 14u + 24u * 8u + 3u + 92u * (8u + 896u * 6u) + 168u);
    EXPECT_EQ(g.tensorCount(), 497'220u);
    // 1.56 TB (research note kimi_ct.md (not in the repository) §3.9; a public note: "a 1.56 TB load").
    EXPECT_EQ(totalBytes(g), 1'560'860'324'864);
}

// KV/state (research note kimi_ct.md (not in the repository) §3.10): MLA keeps kv_lora_rank + qk_rope_head_dim = 576 elements per token
// (NoPE keeps the shared key slice); KDA keeps 3 conv states 12288 × 3 in BF16 (221,184 B) and
// an F32 recurrent state 96 × 128 × 128 (6,291,456 B) per sequence.
TEST(KimiK3, CacheFootprint)
{
    const ModelSpec s = fromData(kK3);
    const auto mla = layerCache(s, s.layers[3], 3);
    ASSERT_EQ(mla.size(), 1u);
    EXPECT_EQ(mla[0].elementsPerToken, 576.0);
    EXPECT_EQ(cacheBytes(mla, 1.0, 1, 2.0), 1152.0);

    const auto kda = layerCache(s, s.layers[1], 1);
    ASSERT_EQ(kda.size(), 2u);
    EXPECT_EQ(kda[0].what, "conv state");
    EXPECT_EQ(cacheBytes({ kda[0] }, 1e6, 1, 2.0), 221'184.0);
    EXPECT_EQ(kda[1].what, "recurrent state");
    EXPECT_EQ(cacheBytes({ kda[1] }, 1e6, 1, 2.0), 6'291'456.0);
    // Fixed per sequence: the same at one token and a million.
    EXPECT_EQ(cacheBytes(kda, 1.0, 1, 2.0), 6'512'640.0);

    double kdaFixed = 0.0;
    double mlaPerToken = 0.0;
    for (const auto& kind : cacheByKind(s, 1.0, 2.0)) {
        if (kind.kind == MixerKind::KimiDelta) {
            EXPECT_EQ(kind.layers, 69);
            kdaFixed = kind.fixedBytes;
        } else if (kind.kind == MixerKind::Attention) {
            EXPECT_EQ(kind.layers, 24);
            mlaPerToken = kind.bytesPerToken;
        }
    }
    EXPECT_EQ(kdaFixed, 449'372'160.0); // 69 layers, per sequence
    EXPECT_EQ(mlaPerToken, 27'648.0); // 24 layers × 576 × 2 B
}

// Kimi-Linear-48B-A3B (research note kimi_ct.md (not in the repository) §5.3): H 2304, 20 KDA (32 heads of 128, low-rank gate) and 7
// MLA layers without q_lora (q_proj), 256 experts of 1024 (8 active), one shared, dense layer 0.
TEST(KimiLinear48B, PatternTensorsAndCounts)
{
    const ModelSpec s = fromData(kLinear);
    EXPECT_EQ(s.family, Family::KimiLinear);
    EXPECT_TRUE(s.ignored.empty());
    EXPECT_EQ(s.layout.textPrefix, "model");
    EXPECT_EQ(s.layout.lmHead, "lm_head");
    EXPECT_FALSE(s.vision.has_value());
    EXPECT_FALSE(s.quantization.has_value());
    EXPECT_EQ(s.attnResBlockSize, 0);
    EXPECT_EQ(s.mla.qLoraRank, 0);
    EXPECT_TRUE(s.mla.noRope);
    EXPECT_FALSE(s.mla.outputGate);
    ASSERT_TRUE(s.linearAttention.has_value());
    EXPECT_FALSE(s.linearAttention->fullRankGate);
    EXPECT_FALSE(s.linearAttention->paddedALog);
    ASSERT_EQ(s.layers.size(), 27u);
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const bool full = i == 3 || i == 7 || i == 11 || i == 15 || i == 19 || i == 23 || i == 26;
        EXPECT_EQ(s.layers[i].mixer, full ? MixerKind::Attention : MixerKind::KimiDelta) << i;
        EXPECT_EQ(s.layers[i].ffn, i == 0 ? FfnKind::Dense : FfnKind::Moe) << i;
    }

    constexpr std::int64_t H = 2304, P = 32 * 128, D = 128, Hk = 32, V = 163840, E = 256, k = 8;
    constexpr std::int64_t kda
        = 3 * P * H + 3 * P * 4 + D * H + P * D + Hk + P + Hk * H + D * H + P * D + D + H * P;
    static_assert(kda == 39'514'272);
    constexpr std::int64_t mla = 32 * 192 * H + 576 * H + 512 + 32 * 256 * 512 + H * P;
    static_assert(mla == 29'114'880);
    constexpr std::int64_t moeShared = E * H + E + 3 * 1024 * H;
    constexpr std::int64_t expert = 3 * 1024 * H;
    constexpr std::int64_t base = 2 * H * 27 + H + 20 * kda + 7 * mla + 3 * 9216 * H;
    constexpr std::int64_t total = 2 * V * H + base + 26 * (moeShared + E * expert);
    constexpr std::int64_t activeNoEmbed = V * H + base + 26 * (moeShared + k * expert);
    static_assert(total == 49'122'681'728 && activeNoEmbed == 3'106'972'544);

    const LayerGraph g = buildLayerGraph(s);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.activeWithoutEmbedding, activeNoEmbed);
    // Published: "3B activated parameters and 48B total parameters" (the Kimi Linear paper's
    // abstract, Moonshot AI; the name says A3B). They do not reproduce at 3%: 49.12B total,
    // 48.37B without embedding and lm_head; 3.107B active without the input embedding. The
    // publisher's convention cannot be pinned down from round figures; both round to them.
    EXPECT_EQ(std::llround(double(c.total - c.embedding - c.lmHead) / 1e9), 48);
    EXPECT_EQ(std::llround(double(c.activeWithoutEmbedding) / 1e9), 3);

    const std::string p = "model.layers.";
    expectTensor(g, "model.embed_tokens.weight", { V, H }, DType::BF16);
    expectTensor(g, "lm_head.weight", { V, H }, DType::BF16);
    expectTensor(g, p + "0.self_attn.g_a_proj.weight", { 128, H }, DType::BF16);
    expectTensor(g, p + "0.self_attn.g_b_proj.weight", { P, 128 }, DType::BF16);
    expectTensor(g, p + "0.self_attn.A_log", { 1, 1, 32, 1 }, DType::F32);
    expectTensor(g, p + "0.self_attn.k_conv1d.weight", { P, 1, 4 }, DType::F32);
    // Kimi-Linear's small KDA tensors may be stored in BF16 too (not verified on a header).
    EXPECT_EQ(g.findTensor(p + "0.self_attn.A_log")->altDtype, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "0.self_attn.g_proj.weight"), nullptr);
    expectTensor(g, p + "3.self_attn.q_proj.weight", { 6144, H }, DType::BF16);
    expectTensor(g, p + "3.self_attn.o_proj.weight", { H, 4096 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "3.self_attn.q_a_proj.weight"), nullptr);
    EXPECT_EQ(g.findTensor(p + "3.self_attn.g_proj.weight"), nullptr);
    expectTensor(g, p + "0.mlp.up_proj.weight", { 9216, H }, DType::BF16);
    expectTensor(g, p + "26.block_sparse_moe.gate.weight", { E, H }, DType::BF16);
    expectTensor(g, p + "26.block_sparse_moe.gate.e_score_correction_bias", { E }, DType::F32);
    expectTensor(
        g, p + "26.block_sparse_moe.shared_experts.down_proj.weight", { H, 1024 }, DType::BF16);
    expectTensor(g, p + "26.block_sparse_moe.experts.255.w1.weight", { 1024, H }, DType::BF16);
    expectTensor(g, p + "26.block_sparse_moe.experts.255.w2.weight", { H, 1024 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "1.block_sparse_moe.routed_expert_down_proj.weight"), nullptr);
    EXPECT_EQ(g.findTensor(p + "1.mlp_res_norm.weight"), nullptr);
    // embed, norm, lm_head; 27 × 2 norms; 20 × 15 KDA (g_a and g_b); 7 × 5 MLA; 3 dense; 26 ×
    // (router 2, shared 3, 256 × 3).
    EXPECT_EQ(g.tensorCount(), 3u + 54u + 300u + 35u + 3u + 26u * (5u + 768u));

    // State (research note kimi_ct.md (not in the repository) §5.3): conv 3 · 4096 · 3 BF16 + recurrent 32 · 128 · 128 F32 per layer.
    const auto state = layerCache(s, s.layers[0], 0);
    EXPECT_EQ(cacheBytes(state, 1.0, 1, 2.0), 2'170'880.0);
    EXPECT_EQ(layerCache(s, s.layers[3], 3)[0].elementsPerToken, 576.0);
}

// Kimi-K2.6-NVFP4 (ModelOpt, quant_method modelopt at the top level, hf_quant_config.json beside
// it): DeepseekV3 text with MoonViT. The exclude list leaves exactly the routed experts of layers
// 1..60 to NVFP4 (research note kimi_ct.md (not in the repository) §4.5).
TEST(KimiK26Nvfp4, OnlyRoutedExpertsOfLayers1To60)
{
    const ModelSpec s = fromData(kK26Nvfp4);
    EXPECT_EQ(s.family, Family::DeepseekV3);
    EXPECT_TRUE(s.ignored.empty());
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->method, "modelopt");
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(s.quantization->groupSize, 16);
    EXPECT_EQ(s.quantization->kvCacheDtype, DType::F8E4M3);
    EXPECT_EQ(s.quantization->excludePatterns.size(), 124u);
    EXPECT_FALSE(s.quantization->routedExpertsOnly);
    ASSERT_TRUE(s.vision.has_value());
    EXPECT_EQ(s.vision->kind, "moonvit");
    EXPECT_EQ(s.vision->projector, "patchmerger");

    const LayerGraph g = buildLayerGraph(s);
    const std::string p = "language_model.model.layers.";
    const std::string e = p + "1.mlp.experts.0.";
    expectTensor(g, e + "gate_proj.weight", { 2048, 3584 }, DType::U8);
    expectTensor(g, e + "gate_proj.weight_scale", { 2048, 448 }, DType::F8E4M3);
    expectTensor(g, e + "gate_proj.weight_scale_2", {}, DType::F32);
    expectTensor(g, e + "gate_proj.input_scale", {}, DType::F32);
    expectTensor(g, e + "down_proj.weight", { 7168, 1024 }, DType::U8);
    expectTensor(g, e + "down_proj.weight_scale", { 7168, 128 }, DType::F8E4M3);
    expectTensor(g, p + "60.mlp.experts.383.up_proj.weight", { 2048, 3584 }, DType::U8);
    EXPECT_EQ(g.findTensor(e + "gate_proj.weight")->params(), 2048 * 7168);
    // Excluded: layer 0 whole (layers.0*), every self_attn and shared expert, lm_head, tower.
    expectTensor(g, p + "0.mlp.gate_proj.weight", { 18432, 7168 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "0.mlp.gate_proj.weight_scale"), nullptr);
    expectTensor(g, p + "1.mlp.shared_experts.up_proj.weight", { 2048, 7168 }, DType::BF16);
    expectTensor(g, p + "60.self_attn.kv_b_proj.weight", { 16384, 512 }, DType::BF16);
    expectTensor(g, "language_model.lm_head.weight", { 163840, 7168 }, DType::BF16);
    expectTensor(g, "mm_projector.proj.0.weight", { 4608, 4608 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.blocks.0.wqkv.bias", { 3456 }, DType::BF16);
    // The FP8 KV cache's scales on every MLA layer, named after k_proj / v_proj.
    expectTensor(g, p + "0.self_attn.k_proj.k_scale", {}, DType::F32);
    expectTensor(g, p + "60.self_attn.v_proj.v_scale", {}, DType::F32);
    // BF16 in the K2.5-NVFP4 listing; not verified for K2.6, so F32 is accepted too.
    const TensorSpec* bias = g.findTensor(p + "1.mlp.gate.e_score_correction_bias");
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(bias->dtype, DType::BF16);
    EXPECT_EQ(bias->altDtype, DType::F32);
    // 3 + 61·2 norms + 61·7 MLA + 61·2 KV scales + 3 dense + 60·(router 2 + 384·3·4 + shared 3)
    // + 335 MoonViT (research note kimi_ct.md (not in the repository) §4.5: 277,792, derived; no index seen).
    EXPECT_EQ(g.tensorCount(), 277'792u);

    // The same logical parameters as Kimi-K2.5's INT4 release (the text tower is Kimi-K2's).
    const ParameterCounts c = g.countParameters();
    const ParameterCounts k25 = buildLayerGraph(bundled("kimi-k2.5")).countParameters();
    EXPECT_EQ(c.total, k25.total);
    EXPECT_EQ(c.activeWithoutEmbedding, k25.activeWithoutEmbedding);
}

// Kimi-K2.5-NVFP4 (no hf_quant_config.json here): its exclude list names only self_attn, lm_head
// and the tower, so dense layer 0 and the shared experts are NVFP4 too. A public listing of the
// checkpoint has 278,341 tensors: 3 + 61·2 + 61·7 + 61·2 + 12 + 60·(2 + 384·3·4 + 3·4) + 335.
TEST(KimiK25Nvfp4, MatchesListingCount)
{
    const ModelSpec s = fromData(kK25Nvfp4);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(s.quantization->kvCacheDtype, DType::F8E4M3);
    const LayerGraph g = buildLayerGraph(s);
    const std::string p = "language_model.model.layers.";
    expectTensor(g, p + "0.mlp.down_proj.weight", { 7168, 9216 }, DType::U8);
    expectTensor(g, p + "0.mlp.down_proj.weight_scale", { 7168, 1152 }, DType::F8E4M3);
    expectTensor(g, p + "5.mlp.shared_experts.gate_proj.weight", { 2048, 3584 }, DType::U8);
    expectTensor(g, p + "5.self_attn.q_b_proj.weight", { 64 * 192, 1536 }, DType::BF16);
    expectTensor(g, p + "5.mlp.gate.e_score_correction_bias", { 384 }, DType::BF16);
    EXPECT_EQ(g.tensorCount(), 278'341u);
}

// Bad input: the layer lists must cover every layer exactly once (naming the layer); unmodelled
// values of structural keys and unknown keys are errors naming the file, key and value.
TEST(KimiK3, RejectsWhatItDoesNotModel)
{
    const nlohmann::json k3 = loadJson(kK3);
    ASSERT_TRUE(errorOf(k3).empty()) << errorOf(k3);
    auto edited = [&](const auto& edit) {
        nlohmann::json copy = k3;
        edit(copy);
        return errorOf(copy);
    };
    auto la = [](nlohmann::json& c) -> nlohmann::json& {
        return c["text_config"]["linear_attn_config"];
    };

    // Layer 4 in both lists.
    std::string err = edited([&](nlohmann::json& c) { la(c)["kda_layers"].push_back(4); });
    EXPECT_TRUE(contains(err, "Kimi-K3.json (text_config.linear_attn_config)")) << err;
    EXPECT_TRUE(contains(err, "'kda_layers' lists layer 4")) << err;
    // Layer 93 in neither.
    err = edited([&](nlohmann::json& c) { la(c)["full_attn_layers"].erase(23); });
    EXPECT_TRUE(contains(err, "leave out layer 93 (0-based 92)")) << err;
    // 0-based by mistake.
    err = edited([&](nlohmann::json& c) { la(c)["kda_layers"][0] = 0; });
    EXPECT_TRUE(contains(err, "'kda_layers' holds layer 0, but the lists are 1-based")) << err;
    err = edited([&](nlohmann::json& c) { la(c)["full_attn_layers"].push_back(94); });
    EXPECT_TRUE(contains(err, "holds layer 94")) << err;
    err = edited([&](nlohmann::json& c) { la(c).erase("kda_layers"); });
    EXPECT_TRUE(contains(err, "'kda_layers' is missing")) << err;
    // A key of linear_attn_config Day0 does not know.
    err = edited([&](nlohmann::json& c) { la(c)["num_kv_heads"] = 8; });
    EXPECT_TRUE(contains(err, "text_config.linear_attn_config.num_kv_heads")) << err;

    err = edited([](nlohmann::json& c) { c["text_config"]["moe_layer_freq"] = 2; });
    EXPECT_TRUE(contains(err, "'moe_layer_freq' is 2")) << err;
    err = edited([](nlohmann::json& c) { c["text_config"]["hidden_act"] = "gelu"; });
    EXPECT_TRUE(contains(err, "'hidden_act' is \"gelu\"")) << err;
    err = edited([](nlohmann::json& c) { c["text_config"]["topk_method"] = "greedy"; });
    EXPECT_TRUE(contains(err, "'topk_method' is \"greedy\"")) << err;
    err = edited([](nlohmann::json& c) { c["text_config"]["num_nextn_predict_layers"] = 1; });
    EXPECT_TRUE(contains(err, "text_config.num_nextn_predict_layers (1 MTP layers")) << err;
    err = edited([](nlohmann::json& c) { c["text_config"]["layer_types"] = { "kda" }; });
    EXPECT_TRUE(contains(err, "text_config.layer_types")) << err;
    err = edited([](nlohmann::json& c) {
        c["text_config"]["latent_moe_use_norm"] = true;
        c["text_config"].erase("routed_expert_hidden_size");
    });
    EXPECT_TRUE(contains(err, "'latent_moe_use_norm' is true")) << err;
    err = edited([](nlohmann::json& c) { c["vision_config"]["mm_projector_type"] = "mlp"; });
    EXPECT_TRUE(contains(err, "Kimi-K3.json (vision_config): 'mm_projector_type' is \"mlp\""))
        << err;
    err = edited([](nlohmann::json& c) { c["vision_config"]["norm_type"] = "batchnorm"; });
    EXPECT_TRUE(contains(err, "'norm_type' is \"batchnorm\"")) << err;
    err = edited([](nlohmann::json& c) { c.erase("vision_config"); });
    EXPECT_TRUE(contains(err, "'vision_config' must be an object")) << err;
}

// MoonViT-3 keys: their K2.5 defaults (no keys) keep the K2.5 tower; set on K3 they are honoured.
TEST(KimiK3, VisionKeysChangeTheTower)
{
    nlohmann::json k3 = loadJson(kK3);
    auto& v = k3["vision_config"];
    v["norm_type"] = "layernorm";
    v["attn_bias"] = true;
    v["mm_projector_type"] = "patchmerger";
    v.erase("qkv_hidden_size");
    v["vt_num_attention_heads"] = 16;
    auto spec = readConfig(k3, "Kimi-K3.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const LayerGraph g = buildLayerGraph(*spec);
    expectTensor(g, "vision_tower.encoder.blocks.0.norm0.bias", { 1024 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.blocks.0.wqkv.weight", { 3072, 1024 }, DType::BF16);
    expectTensor(g, "vision_tower.encoder.blocks.0.wo.bias", { 1024 }, DType::BF16);
    EXPECT_EQ(g.findTensor("vision_tower.encoder.blocks.0.mlp.fc0.bias"), nullptr);
    EXPECT_EQ(g.findTensor("vision_tower.patch_embed.proj.bias"), nullptr);
    expectTensor(g, "mm_projector.pre_norm.bias", { 1024 }, DType::BF16);
    EXPECT_EQ(g.findTensor("mm_projector.post_norm.weight"), nullptr);

    // Kimi-K2.5's tower does not read the K3 keys: there they are unknown structure.
    nlohmann::json k26 = loadJson(kK26Nvfp4);
    k26["vision_config"]["norm_type"] = "rmsnorm";
    auto unknown = readConfig(k26, "Kimi-K2.6.json");
    ASSERT_FALSE(unknown.ok());
    EXPECT_TRUE(contains(unknown.error().message, "vision_config.norm_type"))
        << unknown.error().message;
}

// ModelOpt lists the excluded modules twice; lists that disagree are an error.
TEST(KimiK26Nvfp4, ExcludeListsMustAgree)
{
    const nlohmann::json config = loadJson(kK26Nvfp4);
    nlohmann::json hfQuant
        = loadJson("configs/frontier/nvidia--Kimi-K2.6-NVFP4.hf_quant_config.json");
    hfQuant["quantization"]["exclude_modules"].erase(1); // "language_model.model.layers.0*"
    ReadOptions options;
    options.hfQuantConfig = &hfQuant;
    options.hfQuantOrigin = "hf_quant_config.json";
    auto spec = readConfig(config, "config.json", options);
    ASSERT_FALSE(spec.ok());
    EXPECT_TRUE(contains(spec.error().message, "'exclude_modules' differs"))
        << spec.error().message;
    EXPECT_TRUE(contains(spec.error().message, "language_model.model.layers.0*"))
        << spec.error().message;
}
