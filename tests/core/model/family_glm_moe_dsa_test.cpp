// GLM-5 (glm_moe_dsa): the real configs of GLM-5, GLM-5.1, GLM-5.2, zai-org GLM-5-FP8 and nvidia
// GLM-5-NVFP4 (tests/data/model/configs/frontier*/): reading, hand counts against the tech
// report, tensors per block kind and quantised release, the KV cache per token.

#include "base/file_util.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

const char* const kGlm5 = "configs/frontier/zai-org--GLM-5.json";
const char* const kGlm51 = "configs/frontier-sizes/zai-org--GLM-5.1.json";
const char* const kGlm52 = "configs/frontier-sizes/zai-org--GLM-5.2.json";
const char* const kGlm5Fp8 = "configs/frontier-sizes/zai-org--GLM-5-FP8.json";
const char* const kGlm5Nvfp4 = "configs/frontier-sizes/nvidia--GLM-5-NVFP4.json";




// The config `relative` with `key` replaced (null erases it), read as "glm.json".
Result<ModelSpec> with(const char* relative, const std::string& key, const std::string& value)
{
    auto json = readJsonFile(dataDir() / relative);
    EXPECT_TRUE(json.ok());
    if (value == "erase") {
        json->erase(key);
    } else {
        (*json)[key] = nlohmann::json::parse(value);
    }
    return readConfig(*json, "glm.json");
}

std::size_t blockTensors(const LayerGraph& g, const std::string& anchor)
{
    const Block* block = g.findBlock(anchor);
    return block == nullptr ? 0 : block->tensors.size();
}

// GLM-5 from its config: V 154880, H 6144, 78 layers (3 dense) + MTP 78, 64 heads, q_lora 2048,
// kv_lora 512, nope 192, rope 64, v 256, indexer 32 × 128, 256 experts of 2048, top-8, one
// shared expert, dense width 12288.
constexpr std::int64_t V = 154880, H = 6144, nH = 64, qr = 2048, kvr = 512, nope = 192, rope = 64,
                       vd = 256, hI = 32, dI = 128, E = 256, I = 2048, K = 8, Id = 12288;
constexpr std::int64_t mla = qr * H + qr + nH * (nope + rope) * qr + (kvr + rope) * H + kvr
    + nH * (nope + vd) * kvr + H * nH * vd;
constexpr std::int64_t indexer = hI * dI * qr + dI * H + 2 * dI + hI * H;
constexpr std::int64_t expert = 3 * H * I;
constexpr std::int64_t moe = E * expert + expert + E * H + E; // experts, shared, gate, bias
constexpr std::int64_t moeActive = K * expert + expert + E * H + E;
constexpr std::int64_t dense = 3 * H * Id;
constexpr std::int64_t norms = 2 * H;
constexpr std::int64_t top = 2 * V * H + H;
constexpr std::int64_t mtpGlue = 2 * H + H * 2 * H + H; // enorm, hnorm, eh_proj, shared_head.norm
static_assert(mla == 165'022'208);
static_assert(indexer == 9'371'904);
static_assert(moe == 9'702'998'272 && moeActive == 341'311'744);

} // namespace

// GLM-5 (and GLM-5.1, the same config but for transformers_version). Published: "744B total,
// 40B activated" (GLM-5 tech report, arXiv:2602.15763, table quoted by glennklockwood.com), and
// the Hub's "754B" (huggingface.co/collections/zai-org/glm-5). 744B is the main model (MTP
// excluded); 754B counts the MTP layer too; 40B is reproduced with embed_tokens and lm_head both
// excluded (39.88B; the report does not state its convention, GLM-4.5's "32B" is counted so).
TEST(GlmMoeDsa, Glm5CountsByHand)
{
    constexpr std::int64_t layerDense = mla + indexer + norms + dense;
    constexpr std::int64_t layerMoe = mla + indexer + norms + moe;
    constexpr std::int64_t total = 3 * layerDense + 75 * layerMoe + top;
    static_assert(total == 743'911'218'432);
    constexpr std::int64_t mtp = layerMoe + mtpGlue;
    static_assert(total + mtp == 753'864'139'008);
    constexpr std::int64_t core = 3 * layerDense + 75 * (mla + indexer + norms + moeActive) + H;
    static_assert(core == 39'881'563'392);

    for (const char* file : { kGlm5, kGlm51 }) {
        const LayerGraph g = buildLayerGraph(fromData(file));
        const ParameterCounts c = g.countParameters();
        EXPECT_EQ(c.mainModel, total) << file;
        EXPECT_EQ(c.mtp, mtp) << file;
        EXPECT_EQ(c.total, total + mtp) << file;
        EXPECT_EQ(c.active - c.embedding - c.lmHead, core) << file;
        expectNear(c.mainModel, 744e9, 0.005, "GLM-5 total");
        expectNear(c.total, 754e9, 0.005, "GLM-5 with MTP");
        expectNear(c.active - c.embedding - c.lmHead, 40e9, 0.03, "GLM-5 active");
        // Derived from the rules (no real index seen): 59,870 tensors; the MTP layer's 791 is
        // the published count (vllm-ascend's GLM-5 notes).
        EXPECT_EQ(c.tensors, 59'870) << file;
        EXPECT_EQ(blockTensors(g, "model.layers.78"), 791u) << file;
        EXPECT_EQ(totalBytes(g), 1'507'728'316'928) << file;
    }
}

// GLM-5.2: indexers only on the 21 "full" layers {0, 1, 2, 6, 10, …, 74} and the MTP layer.
// Hub: "753B" (huggingface.co/collections/zai-org/glm-52), which counts the MTP layer.
TEST(GlmMoeDsa, Glm52SharesIndexers)
{
    constexpr std::int64_t total
        = 3 * (mla + norms + dense) + 75 * (mla + norms + moe) + 21 * indexer + top;
    static_assert(total == 743'377'019'904);
    constexpr std::int64_t mtp = mla + indexer + norms + moe + mtpGlue;
    static_assert(total + mtp == 753'329'940'480);

    const ModelSpec s = fromData(kGlm52);
    ASSERT_EQ(s.layers.size(), 78u);
    int full = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const bool indexed = i < 3 || (i >= 6 && (i - 2) % 4 == 0);
        EXPECT_EQ(s.layers[i].mixer, indexed ? MixerKind::SparseMla : MixerKind::Attention) << i;
        EXPECT_EQ(s.layers[i].ffn, i < 3 ? FfnKind::Dense : FfnKind::Moe) << i;
        full += indexed ? 1 : 0;
    }
    EXPECT_EQ(full, 21);
    ASSERT_EQ(s.mtpLayers.size(), 1u);
    EXPECT_EQ(s.mtpLayers[0].mixer, MixerKind::SparseMla);
    EXPECT_TRUE(s.warnings.empty());

    const LayerGraph g = buildLayerGraph(s);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, total);
    EXPECT_EQ(c.total, total + mtp);
    EXPECT_EQ(c.active - c.embedding - c.lmHead, 39'347'364'864);
    expectNear(c.total, 753e9, 0.005, "GLM-5.2 with MTP");
    EXPECT_EQ(c.tensors, 59'585);
    EXPECT_NE(g.findTensor("model.layers.6.self_attn.indexer.wk.weight"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.7.self_attn.indexer.wk.weight"), nullptr);
    EXPECT_NE(g.findTensor("model.layers.78.self_attn.indexer.wk.weight"), nullptr);

    // Without indexer_types the same pattern follows from index_topk_freq 4 and
    // index_skip_topk_offset 3, as transformers derives it.
    auto derived = with(kGlm52, "indexer_types", "erase");
    ASSERT_TRUE(derived.ok()) << derived.error().message;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        EXPECT_EQ(derived->layers[i].mixer, s.layers[i].mixer) << i;
    }
    // GLM-5 has neither: every layer has its indexer.
    for (const auto& layer : fromData(kGlm5).layers) {
        EXPECT_EQ(layer.mixer, MixerKind::SparseMla);
    }
}

TEST(GlmMoeDsa, Glm5TensorsPerBlockKind)
{
    const ModelSpec s = fromData(kGlm5);
    EXPECT_EQ(s.family, Family::GlmMoeDsa);
    EXPECT_EQ(s.attention, AttentionKind::MLA);
    EXPECT_EQ(s.headDim, 256); // nope + rope; config head_dim 64 is overwritten, as in HF
    EXPECT_EQ(s.mla.indexerHeads, 32);
    EXPECT_EQ(s.mla.indexerTopK, 2048);
    EXPECT_EQ(s.numMtpLayers, 1);
    ASSERT_TRUE(s.moe);
    EXPECT_TRUE(s.moe->expertScoreBias);
    EXPECT_EQ(s.moe->scoring, RouterScoring::Sigmoid);
    EXPECT_FALSE(s.layers[2].moe());
    EXPECT_TRUE(s.layers[3].moe());
    EXPECT_TRUE(s.mtpLayers[0].moe());

    const LayerGraph g = buildLayerGraph(s);
    const DType bf = DType::BF16;
    expectTensor(g, "model.embed_tokens.weight", { 154880, 6144 }, bf);
    expectTensor(g, "lm_head.weight", { 154880, 6144 }, bf);
    expectTensor(g, "model.norm.weight", { 6144 }, bf);
    expectTensor(g, "model.layers.0.self_attn.q_a_proj.weight", { 2048, 6144 }, bf);
    expectTensor(g, "model.layers.0.self_attn.q_b_proj.weight", { 16384, 2048 }, bf);
    expectTensor(g, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", { 576, 6144 }, bf);
    expectTensor(g, "model.layers.0.self_attn.kv_b_proj.weight", { 28672, 512 }, bf);
    expectTensor(g, "model.layers.0.self_attn.o_proj.weight", { 6144, 16384 }, bf);
    expectTensor(g, "model.layers.0.self_attn.indexer.wq_b.weight", { 4096, 2048 }, bf);
    expectTensor(g, "model.layers.0.self_attn.indexer.wk.weight", { 128, 6144 }, bf);
    expectTensor(g, "model.layers.0.self_attn.indexer.k_norm.bias", { 128 }, bf);
    expectTensor(g, "model.layers.0.self_attn.indexer.weights_proj.weight", { 32, 6144 }, bf);
    expectTensor(g, "model.layers.2.mlp.down_proj.weight", { 6144, 12288 }, bf);
    expectTensor(g, "model.layers.3.mlp.gate.weight", { 256, 6144 }, bf);
    expectTensor(g, "model.layers.3.mlp.gate.e_score_correction_bias", { 256 }, DType::F32);
    expectTensor(g, "model.layers.3.mlp.experts.255.down_proj.weight", { 6144, 2048 }, bf);
    expectTensor(g, "model.layers.77.mlp.shared_experts.up_proj.weight", { 2048, 6144 }, bf);
    // MTP layer 78: a MoE layer with its indexer and the MTP glue, no embed_tokens/head.
    expectTensor(g, "model.layers.78.eh_proj.weight", { 6144, 12288 }, bf);
    expectTensor(g, "model.layers.78.enorm.weight", { 6144 }, bf);
    expectTensor(g, "model.layers.78.shared_head.norm.weight", { 6144 }, bf);
    expectTensor(g, "model.layers.78.self_attn.indexer.k_norm.weight", { 128 }, bf);
    expectTensor(g, "model.layers.78.mlp.experts.0.gate_proj.weight", { 2048, 6144 }, bf);
    EXPECT_EQ(g.findTensor("model.layers.78.embed_tokens.weight"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.78.shared_head.head.weight"), nullptr);
    EXPECT_EQ(g.findBlock("model.layers.78")->kind, BlockKind::Mtp);
}

// zai-org GLM-5-FP8: F8_E4M3 with F32 weight_scale_inv per 128×128; modules_to_not_convert
// spells weights_proj "self_attn.indexers_proj" and it stays BF16 all the same.
TEST(GlmMoeDsa, Fp8ReleaseKeepsIndexerWeightsProjBf16)
{
    const ModelSpec s = fromData(kGlm5Fp8);
    ASSERT_TRUE(s.quantization);
    EXPECT_EQ(s.quantization->scheme, QuantScheme::BlockFp8);
    EXPECT_EQ(s.quantization->scaleSuffix, "weight_scale_inv");
    const LayerGraph g = buildLayerGraph(s);
    const DType f8 = DType::F8E4M3;
    expectTensor(g, "model.layers.0.self_attn.q_a_proj.weight", { 2048, 6144 }, f8);
    expectTensor(g, "model.layers.0.self_attn.q_a_proj.weight_scale_inv", { 16, 48 }, DType::F32);
    expectTensor(
        g, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", { 5, 48 }, DType::F32);
    expectTensor(g, "model.layers.0.self_attn.kv_b_proj.weight_scale_inv", { 224, 4 }, DType::F32);
    expectTensor(
        g, "model.layers.0.self_attn.indexer.wq_b.weight_scale_inv", { 32, 16 }, DType::F32);
    expectTensor(g, "model.layers.0.self_attn.indexer.wk.weight_scale_inv", { 1, 48 }, DType::F32);
    expectTensor(
        g, "model.layers.0.self_attn.indexer.weights_proj.weight", { 32, 6144 }, DType::BF16);
    EXPECT_EQ(
        g.findTensor("model.layers.0.self_attn.indexer.weights_proj.weight_scale_inv"), nullptr);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight_scale_inv", { 96, 48 }, DType::F32);
    expectTensor(
        g, "model.layers.5.mlp.experts.17.down_proj.weight_scale_inv", { 48, 16 }, DType::F32);
    expectTensor(g, "model.layers.5.mlp.gate.weight", { 256, 6144 }, DType::BF16);
    expectTensor(g, "model.layers.78.eh_proj.weight", { 6144, 12288 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 154880, 6144 }, DType::BF16);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, 743'911'218'432);
    // Derived: one scale per quantised Linear (no real index seen).
    EXPECT_EQ(c.tensors, 119'028);
    EXPECT_EQ(totalBytes(g), 756'162'687'872);
}

// nvidia GLM-5-NVFP4 (hf_quant_config.json): NVFP4 dense MLPs and experts; attention, indexer,
// lm_head and the whole MTP layer stay BF16; FP8 KV cache.
TEST(GlmMoeDsa, NvidiaNvfp4QuantisesMlpsAndExperts)
{
    const ModelSpec s = fromData(kGlm5Nvfp4);
    ASSERT_TRUE(s.quantization);
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(s.quantization->kvCacheDtype, DType::F8E4M3);
    const LayerGraph g = buildLayerGraph(s);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight", { 12288, 3072 }, DType::U8);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight_scale", { 12288, 384 }, DType::F8E4M3);
    expectTensor(g, "model.layers.3.mlp.experts.0.down_proj.weight", { 6144, 1024 }, DType::U8);
    expectTensor(g, "model.layers.3.mlp.experts.0.down_proj.weight_scale_2", {}, DType::F32);
    expectTensor(g, "model.layers.77.mlp.shared_experts.up_proj.input_scale", {}, DType::F32);
    expectTensor(g, "model.layers.3.self_attn.q_a_proj.weight", { 2048, 6144 }, DType::BF16);
    expectTensor(g, "model.layers.3.self_attn.indexer.wk.weight", { 128, 6144 }, DType::BF16);
    expectTensor(g, "model.layers.78.mlp.experts.0.up_proj.weight", { 2048, 6144 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 154880, 6144 }, DType::BF16);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, 743'911'218'432);
    // Derived: 59,870 + 3 per NVFP4 Linear (3·3 dense + 75·771 expert and shared), + the FP8
    // KV cache's two F32 scalar scales (k_proj.k_scale, v_proj.v_scale, optional: names as in the
    // Kimi-K2.5-NVFP4 listing) on the 78 layers and the MTP layer.
    EXPECT_EQ(c.tensors, 59'870 + 3 * (9 + 75 * 771) + 2 * 79);
    EXPECT_EQ(totalBytes(g), 460'817'131'856 + 8 * 79);
}

// MLA latent 512 + rope 64 per layer, plus the indexer's key of 128 where a layer has one
// (HF update_indexer, model dtype): GLM-5 78·704·2 = 109,824 B per token in BF16; GLM-5.2
// 78·576·2 + 21·128·2 = 95,232 (the KV calculator's verified value in the research note).
TEST(GlmMoeDsa, KvCachePerToken)
{
    const auto perToken = [](const ModelSpec& s) {
        double bytes = 0.0;
        for (const auto& kind : cacheByKind(s, 4096.0, 2.0)) {
            bytes += kind.bytesPerToken;
        }
        return bytes;
    };
    const ModelSpec glm5 = fromData(kGlm5);
    EXPECT_DOUBLE_EQ(perToken(glm5), 109'824.0);
    EXPECT_DOUBLE_EQ(cacheBytes(layerCache(glm5, glm5.layers[0], 0), 1.0, 8, 2.0), 1'408.0);
    const ModelSpec glm52 = fromData(kGlm52);
    EXPECT_DOUBLE_EQ(perToken(glm52), 95'232.0);
    EXPECT_DOUBLE_EQ(cacheBytes(layerCache(glm52, glm52.layers[3], 3), 1.0, 1, 2.0), 1'152.0);
}

TEST(GlmMoeDsaErrors, BadInputNamesFileKeyAndValue)
{
    struct Case {
        const char* file;
        const char* key;
        const char* value;
        const char* expected;
    };
    const Case cases[] = {
        { kGlm52, "indexer_types", R"(["full", "shared"])",
            "glm.json: 'indexer_types' has 2 entries but the model has 78 layers" },
        { kGlm52, "mlp_layer_types", R"(["dense"])",
            "'mlp_layer_types' has 1 entries but the model has 78 layers" },
        { kGlm5, "qk_head_dim", "192",
            "'qk_head_dim' is 192 but qk_nope_head_dim + "
            "qk_rope_head_dim is 256" },
        { kGlm5, "index_topk_freq", "0", "'index_topk_freq' (0) must be a positive integer" },
        { kGlm5, "num_experts", "128", "'num_experts' is 128 but n_routed_experts is 256" },
        { kGlm5, "index_topk_pattern", R"("FSSS")", "index_topk_pattern" },
    };
    for (const auto& c : cases) {
        auto r = with(c.file, c.key, c.value);
        ASSERT_FALSE(r.ok()) << c.key;
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_TRUE(contains(r.error().message, c.expected)) << c.key << ": " << r.error().message;
    }
    // Unknown per-layer values are named with their position.
    auto json = readJsonFile(dataDir() / kGlm52);
    ASSERT_TRUE(json.ok());
    (*json)["indexer_types"][7] = "half";
    auto r = readConfig(*json, "glm.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message,
        "glm.json: 'indexer_types' entry 7 is \"half\", which Day0 does not model"))
        << r.error().message;
    (*json)["indexer_types"][7] = "shared";
    (*json)["mlp_layer_types"][9] = "moe";
    r = readConfig(*json, "glm.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message, "'mlp_layer_types' entry 9 is \"moe\""))
        << r.error().message;
    (*json)["mlp_layer_types"][9] = "sparse";
    (*json)["layer_types"] = nlohmann::json::array();
    for (int i = 0; i < 78; ++i) {
        (*json)["layer_types"].push_back(i == 4 ? "full_attention" : "deepseek_sparse_attention");
    }
    r = readConfig(*json, "glm.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message, "'layer_types' entry 4 is \"full_attention\""))
        << r.error().message;
}

// nvidia's GLM-5.1/5.2-NVFP4 configs (not among the test data; shaped after the research note's
// description of them): quantization_config in config.json (ModelOpt NVFP4, FP8 KV), the
// backward-compatible layer_types / num_experts / mlp_bias keys, and an ignore list leaving
// everything but the routed experts of layers 3–77 in BF16.
TEST(GlmMoeDsa, NvidiaNvfp4InConfigJsonQuantisesRoutedExpertsOnly)
{
    auto json = readJsonFile(dataDir() / kGlm52);
    ASSERT_TRUE(json.ok());
    (*json)["layer_types"] = nlohmann::json::array();
    for (int i = 0; i < 78; ++i) {
        (*json)["layer_types"].push_back("deepseek_sparse_attention");
    }
    (*json)["mlp_bias"] = false;
    (*json)["num_experts"] = 256;
    (*json)["bos_token_id"] = 0;
    nlohmann::json ignore = { "lm_head", "model.embed_tokens", "model.layers.0*",
        "model.layers.1.*", "model.layers.2.*", "model.layers.78*" };
    for (int i = 3; i < 78; ++i) {
        ignore.push_back("model.layers." + std::to_string(i) + ".self_attn*");
        ignore.push_back("model.layers." + std::to_string(i) + ".mlp.shared_experts*");
    }
    const nlohmann::json fp4
        = { { "num_bits", 4 }, { "type", "float" }, { "group_size", 16 }, { "dynamic", false } };
    (*json)["quantization_config"] = { { "quant_method", "modelopt" }, { "quant_algo", "NVFP4" },
        { "config_groups",
            { { "group_0",
                { { "weights", fp4 }, { "input_activations", fp4 },
                    { "targets", { "Linear" } } } } } },
        { "kv_cache_scheme", { { "num_bits", 8 }, { "type", "float" }, { "dynamic", false } } },
        { "ignore", ignore } };
    auto s = readConfig(*json, "glm.json");
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(s->quantization->kvCacheDtype, DType::F8E4M3);
    const LayerGraph g = buildLayerGraph(*s);
    expectTensor(g, "model.layers.3.mlp.experts.0.gate_proj.weight", { 2048, 3072 }, DType::U8);
    expectTensor(
        g, "model.layers.77.mlp.experts.255.down_proj.weight_scale", { 6144, 128 }, DType::F8E4M3);
    expectTensor(
        g, "model.layers.3.mlp.shared_experts.gate_proj.weight", { 2048, 6144 }, DType::BF16);
    expectTensor(g, "model.layers.0.mlp.gate_proj.weight", { 12288, 6144 }, DType::BF16);
    expectTensor(g, "model.layers.10.self_attn.q_b_proj.weight", { 16384, 2048 }, DType::BF16);
    expectTensor(g, "model.layers.78.mlp.experts.0.up_proj.weight", { 2048, 6144 }, DType::BF16);
    // Only routed experts: 75 layers × 256 × 3 Linear modules gain three tensors each; the FP8
    // KV cache adds two scalar scales per MLA layer (78 + MTP).
    EXPECT_EQ(g.countParameters().tensors, 59'585 + 3 * 75 * 256 * 3 + 2 * 79);
}
