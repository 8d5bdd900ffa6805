// Gemma 4: the real configs (26B-A4B, 31B-IT-NVFP4, 26B-A4B-NVFP4; the E2B values of the
// research) read into layer patterns, tensors, parameter counts and KV cache, checked against
// hand derivations from the config numbers, the real E2B tensor dump, the 26B layer-0 byte
// sizes and the publisher's figures.

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

const char* const k26B = "configs/frontier/google--gemma-4-26B-A4B.json";
const char* const k31B = "configs/frontier-sizes/nvidia--Gemma-4-31B-IT-NVFP4.json";
const char* const k26BNvfp4 = "configs/frontier-sizes/nvidia--Gemma-4-26B-A4B-NVFP4.json";
const char* const kE2B = "configs/gemma-4-E2B-it.json";



// Parameters of the blocks whose anchor starts with `prefix`.
std::int64_t paramsUnder(const LayerGraph& g, const std::string& prefix)
{
    std::int64_t n = 0;
    for (const auto& block : g.blocks) {
        if (block.anchor.rfind(prefix, 0) == 0) {
            for (const auto& t : block.tensors) {
                n += t.params();
            }
        }
    }
    return n;
}

// KV bytes per token of one layer at BF16 within the window.
double kvBytesPerToken(const ModelSpec& s, std::size_t layer)
{
    return cacheBytes(layerCache(s, s.layers[layer], std::int64_t(layer)), 1.0, 1, 2.0);
}

// A config of tests/data/model as JSON, for edited copies.
nlohmann::json configJson(const std::string& relative)
{
    auto json = readJsonFile(dataDir() / relative);
    EXPECT_TRUE(json.ok()) << relative;
    return json.ok() ? *json : nlohmann::json::object();
}

// Vision tower sizes shared by the 26B and the 31B (27 layers of 1152, heads 16 × 72,
// intermediate 4304, patch 16, position table 10240, standardize).
constexpr std::int64_t kVh = 1152, kVLayers = 27, kVI = 4304;
constexpr std::int64_t kVisionLayer = 4 * kVh * kVh + 2 * 72 + 3 * kVh * kVI + 4 * kVh;
constexpr std::int64_t kVisionEncoder = kVLayers * kVisionLayer;
constexpr std::int64_t kVisionTower
    = kVisionEncoder + kVh * 3 * 16 * 16 + 2 * 10240 * kVh + 2 * kVh;
static_assert(kVisionEncoder == 545'070'384);
static_assert(kVisionTower == 569'550'384);

// 26B-A4B by hand: V 262144, H 2816, 30 layers (5 sliding + 1 full) × 5, 16 heads; sliding
// 8 KV heads of 256, full 2 KV heads of 512 and no v_proj; dense MLP 2112 beside 128 experts of
// 704, top 8; tied head.
constexpr std::int64_t kV = 262144, kH = 2816, kE = 128, kIe = 704, kTopK = 8;
constexpr std::int64_t kSlidingAttn = 2 * kH * 16 * 256 + 2 * kH * 8 * 256 + 2 * 256;
constexpr std::int64_t kFullAttn = 2 * kH * 16 * 512 + kH * 2 * 512 + 2 * 512;
constexpr std::int64_t kMlp = 3 * kH * 2112;
constexpr std::int64_t kRouter = kE * kH + kH + kE;
constexpr std::int64_t kExperts = kE * 3 * kH * kIe;
constexpr std::int64_t kLayerRest = kMlp + kRouter + 7 * kH + 1; // seven norms, layer_scalar
constexpr std::int64_t kText26B = 25 * (kSlidingAttn + kLayerRest + kExperts)
    + 5 * (kFullAttn + kLayerRest + kExperts) + kH + kV * kH;
constexpr std::int64_t kActive26B = kText26B - 30 * (kExperts - kTopK * 3 * kH * kIe);
constexpr std::int64_t kVision26B = kVisionTower + kH * kVh; // + embed_vision
static_assert(kSlidingAttn == 34'603'520 && kFullAttn == 49'021'952);
static_assert(kText26B == 25'233'141'790);
static_assert(kActive26B == 3'822'530'590);
static_assert(kVision26B == 572'794'416);

} // namespace

TEST(Gemma4, Reads26BWrapperAndLayerKinds)
{
    const ModelSpec s = fromData(k26B);
    ASSERT_EQ(s.numLayers, 30);
    EXPECT_EQ(s.family, Family::Gemma4);
    EXPECT_EQ(s.layout.textPrefix, "model.language_model");
    EXPECT_EQ(s.layout.visionPrefix, "model.vision_tower");
    EXPECT_EQ(s.layout.projectorPrefix, "model.embed_vision");
    EXPECT_TRUE(s.tieEmbeddings);
    EXPECT_DOUBLE_EQ(s.finalLogitSoftcap, 30.0);
    EXPECT_EQ(s.perLayerInputSize, 0);
    EXPECT_EQ(s.kvSharedLayers, 0);
    EXPECT_FALSE(s.audio.has_value());
    // rope_parameters per layer type: proportional RoPE on a quarter of the full layers' heads,
    // default RoPE on the sliding layers.
    EXPECT_EQ(s.ropeScaling.type, "proportional");
    EXPECT_DOUBLE_EQ(s.ropeTheta, 1e6);
    EXPECT_DOUBLE_EQ(s.partialRotaryFactor, 0.25);
    ASSERT_TRUE(s.slidingRope.has_value());
    EXPECT_DOUBLE_EQ(s.slidingRope->theta, 1e4);
    EXPECT_EQ(s.slidingRope->scaling.type, "default");
    EXPECT_DOUBLE_EQ(s.slidingRope->partialRotaryFactor, 1.0);
    for (std::int64_t i = 0; i < 30; ++i) {
        const LayerSpec& l = s.layers[std::size_t(i)];
        const bool full = (i + 1) % 6 == 0;
        EXPECT_EQ(l.mixer, full ? MixerKind::Attention : MixerKind::Sliding) << i;
        EXPECT_EQ(l.slidingWindow, full ? 0 : 1024) << i;
        EXPECT_EQ(s.headDimOf(l), full ? 512 : 256) << i;
        EXPECT_EQ(s.kvHeadsOf(l), full ? 2 : 8) << i;
        EXPECT_EQ(l.sharedKv, full) << i;
        EXPECT_EQ(l.ffn, FfnKind::Moe) << i;
    }
    ASSERT_TRUE(s.moe.has_value());
    EXPECT_EQ(s.moe->numExperts, 128);
    EXPECT_EQ(s.moe->topK, 8);
    EXPECT_EQ(s.moe->expertIntermediate, 704);
    EXPECT_TRUE(s.moe->denseBeside);
    EXPECT_TRUE(s.moe->packedExperts);
    ASSERT_TRUE(s.vision.has_value());
    EXPECT_EQ(s.vision->kind, "gemma4");
    EXPECT_EQ(s.vision->depth, 27);
    EXPECT_EQ(s.vision->headDim, 72);
    EXPECT_TRUE(s.vision->standardize);
    EXPECT_FALSE(s.vision->clippedLinears);
    EXPECT_EQ(s.vision->poolingKernel, 3);
    EXPECT_FALSE(s.partial);
}

// Google's model card (quoted by huggingface.co/OpenExplorer/gemma-4-26B-A4B-it and
// vast.ai/model/gemma-4-26b-a4b-it): "25.2B total, 3.8B active", vision encoder "~550M".
// They count the text tower with the tied embedding once and leave the vision tower out; the
// ~550M are the 27 encoder layers alone.
TEST(Gemma4, Counts26BAgainstHandDerivationAndModelCard)
{
    const LayerGraph g = buildLayerGraph(fromData(k26B));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, kText26B);
    EXPECT_EQ(c.active, kActive26B);
    EXPECT_EQ(c.vision, kVision26B);
    EXPECT_EQ(c.total, kText26B + kVision26B);
    EXPECT_EQ(c.total, 25'805'936'206);
    EXPECT_EQ(c.embedding, kV * kH);
    EXPECT_EQ(c.lmHead, 0);
    EXPECT_EQ(c.activeWithoutEmbedding, 3'084'333'086);
    EXPECT_EQ(paramsUnder(g, "model.vision_tower.encoder."), kVisionEncoder);
    expectNear(c.mainModel, 25.2e9, 0.005, "26B total");
    expectNear(c.active, 3.8e9, 0.03, "26B active");
    expectNear(paramsUnder(g, "model.vision_tower.encoder."), 550e6, 0.03, "vision encoder");
    // All BF16; 2 + 25·22 + 5·21 text tensors, 27·13 + 4 vision tensors, the projector (the
    // 1,013 tensors reported for the BF16 repack huggingface.co/visible-cx/gemma4-26b-a4b-CoreAI).
    EXPECT_EQ(g.tensorCount(), 1013u);
    EXPECT_EQ(totalBytes(g), 2 * c.total);
}

TEST(Gemma4, Tensors26BPerBlockKind)
{
    const LayerGraph g = buildLayerGraph(fromData(k26B));
    const std::string l0 = "model.language_model.layers.0.";
    const std::string l5 = "model.language_model.layers.5.";
    expectTensor(g, "model.language_model.embed_tokens.weight", { kV, kH });
    expectTensor(g, "model.language_model.norm.weight", { kH });
    EXPECT_EQ(g.findTensor("lm_head.weight"), nullptr); // tied
    expectTensor(g, l0 + "self_attn.q_proj.weight", { 4096, kH });
    expectTensor(g, l0 + "self_attn.k_proj.weight", { 2048, kH });
    expectTensor(g, l0 + "self_attn.v_proj.weight", { 2048, kH });
    expectTensor(g, l0 + "self_attn.o_proj.weight", { kH, 4096 });
    expectTensor(g, l0 + "self_attn.q_norm.weight", { 256 });
    expectTensor(g, l0 + "layer_scalar", { 1 });
    expectTensor(g, l0 + "router.proj.weight", { kE, kH });
    expectTensor(g, l0 + "router.scale", { kH });
    expectTensor(g, l0 + "router.per_expert_scale", { kE });
    expectTensor(g, l0 + "experts.gate_up_proj", { kE, 2 * kIe, kH });
    expectTensor(g, l0 + "experts.down_proj", { kE, kH, kIe });
    expectTensor(g, l0 + "mlp.gate_proj.weight", { 2112, kH });
    expectTensor(g, l0 + "pre_feedforward_layernorm_2.weight", { kH });
    expectTensor(g, l0 + "post_feedforward_layernorm_1.weight", { kH });
    EXPECT_EQ(g.findTensor(l0 + "experts.gate_up_proj")->packedExperts, kE);
    EXPECT_EQ(g.findTensor(l0 + "router.per_expert_scale")->component, Component::Router);
    // Full layer: 2 KV heads of 512, no v_proj (attention_k_eq_v).
    expectTensor(g, l5 + "self_attn.q_proj.weight", { 8192, kH });
    expectTensor(g, l5 + "self_attn.k_proj.weight", { 1024, kH });
    expectTensor(g, l5 + "self_attn.o_proj.weight", { kH, 8192 });
    expectTensor(g, l5 + "self_attn.k_norm.weight", { 512 });
    EXPECT_EQ(g.findTensor(l5 + "self_attn.v_proj.weight"), nullptr);
    EXPECT_EQ(g.findTensor(l0 + "self_attn.v_norm.weight"), nullptr);
    // Vision tower: Linears one level deeper, no clip scalars, standardisation, projector.
    const std::string v0 = "model.vision_tower.encoder.layers.0.";
    expectTensor(g, "model.vision_tower.patch_embedder.input_proj.weight", { kVh, 768 });
    expectTensor(
        g, "model.vision_tower.patch_embedder.position_embedding_table", { 2, 10240, kVh });
    expectTensor(g, v0 + "self_attn.q_proj.linear.weight", { kVh, kVh });
    expectTensor(g, v0 + "self_attn.k_norm.weight", { 72 });
    expectTensor(g, v0 + "mlp.down_proj.linear.weight", { kVh, kVI });
    expectTensor(g, "model.vision_tower.std_bias", { kVh });
    expectTensor(g, "model.vision_tower.std_scale", { kVh });
    expectTensor(g, "model.embed_vision.embedding_projection.weight", { kH, kVh });
    EXPECT_EQ(g.findTensor(v0 + "self_attn.q_proj.input_min"), nullptr);
    EXPECT_EQ(g.findTensor(v0 + "self_attn.q_proj.linear.weight")->component, Component::Vision);
}

// The loader log of the real 26B checkpoint gives the bytes of layer 0's and the global tensors
// (tests/data/model/listings/gemma-4-26B-A4B.layer0.bytes.txt); the fused experts are listed
// per expert slice.
TEST(Gemma4, Layer0BytesEqualThe26BCheckpointLog)
{
    const LayerGraph g = buildLayerGraph(fromData(k26B));
    std::ifstream in(dataDir() / "listings" / "gemma-4-26B-A4B.layer0.bytes.txt");
    ASSERT_TRUE(in.good());
    std::string line;
    int checked = 0;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string name;
        std::string bytes;
        if (line.empty() || line[0] == '#' || !(words >> name >> bytes)
            || bytes.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const TensorSpec* t = g.findTensor(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(t->bytes(), std::stoll(bytes)) << name;
        ++checked;
    }
    EXPECT_EQ(checked, 20);
    const std::string x = "model.language_model.layers.0.experts.";
    EXPECT_EQ(g.findTensor(x + "gate_up_proj")->bytes(), 128 * 7'929'856);
    EXPECT_EQ(g.findTensor(x + "down_proj")->bytes(), 128 * 3'964'928);
}

// KV per token (research A6): sliding 2·8·256 capped at 1024 tokens, full k_eq_v layers still
// cache K and V, 2·2·512; 25·8192 + 5·4096 = 225,280 B per token at BF16.
TEST(Gemma4, KvCache26B)
{
    const ModelSpec s = fromData(k26B);
    const auto sliding = layerCache(s, s.layers[0], 0);
    ASSERT_EQ(sliding.size(), 1u);
    EXPECT_DOUBLE_EQ(sliding[0].elementsPerToken, 4096.0);
    EXPECT_EQ(sliding[0].window, 1024);
    const auto full = layerCache(s, s.layers[5], 5);
    ASSERT_EQ(full.size(), 1u);
    EXPECT_DOUBLE_EQ(full[0].elementsPerToken, 2048.0);
    EXPECT_EQ(full[0].window, 0);
    double perToken = 0;
    double at8k = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        perToken += kvBytesPerToken(s, i);
        at8k += cacheBytes(layerCache(s, s.layers[i], std::int64_t(i)), 8192.0, 1, 2.0);
    }
    EXPECT_DOUBLE_EQ(perToken, 225'280.0);
    EXPECT_DOUBLE_EQ(at8k, 25.0 * 8192 * 1024 + 5.0 * 4096 * 8192);
}

// 31B by hand: H 5376, 60 layers, 32 heads; sliding 16 KV heads of 256, full 4 of 512 without
// v_proj; dense MLP 21504; no MoE. Published "30.7B" (Google's card, as above): text only.
TEST(Gemma4, Reads31BNvfp4AndCounts)
{
    constexpr std::int64_t H = 5376, I = 21504;
    constexpr std::int64_t sliding = 2 * H * 32 * 256 + 2 * H * 16 * 256 + 2 * 256;
    constexpr std::int64_t fullAttn = 2 * H * 32 * 512 + H * 4 * 512 + 2 * 512;
    constexpr std::int64_t rest = 3 * H * I + 4 * H + 1;
    constexpr std::int64_t text = 50 * (sliding + rest) + 10 * (fullAttn + rest) + H + kV * H;
    static_assert(text == 30'697'345'340);

    const ModelSpec s = fromData(k31B);
    ASSERT_EQ(s.numLayers, 60);
    EXPECT_FALSE(s.moe.has_value());
    EXPECT_EQ(s.layers[5].mixer, MixerKind::Attention);
    EXPECT_EQ(s.kvHeadsOf(s.layers[59]), 4);
    EXPECT_EQ(s.kvHeadsOf(s.layers[58]), 16);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(s.quantization->groupSize, 16);
    EXPECT_EQ(s.quantization->kvCacheDtype, DType::F8E4M3);

    const LayerGraph g = buildLayerGraph(s);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, text); // packed FP4 weights count their logical elements
    EXPECT_EQ(c.active, text);
    EXPECT_EQ(c.vision, kVisionTower + H * kVh);
    expectNear(c.mainModel, 30.7e9, 0.005, "31B total");
    // The dense MLP is NVFP4; attention, norms, embedding and the towers stay BF16.
    const std::string l0 = "model.language_model.layers.0.";
    expectTensor(g, l0 + "mlp.gate_proj.weight", { I, H / 2 }, DType::U8);
    expectTensor(g, l0 + "mlp.gate_proj.weight_scale", { I, H / 16 }, DType::F8E4M3);
    expectTensor(g, l0 + "mlp.gate_proj.weight_scale_2", {}, DType::F32);
    expectTensor(g, l0 + "mlp.gate_proj.input_scale", {}, DType::F32);
    expectTensor(g, l0 + "mlp.down_proj.weight", { H, I / 2 }, DType::U8);
    expectTensor(g, l0 + "mlp.down_proj.weight_scale", { H, I / 16 }, DType::F8E4M3);
    expectTensor(g, l0 + "self_attn.q_proj.weight", { 8192, H });
    EXPECT_EQ(g.findTensor(l0 + "self_attn.q_proj.weight_scale"), nullptr);
    expectTensor(g, "model.language_model.embed_tokens.weight", { kV, H });
    expectTensor(g, "model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", { kVI, kVh });
    expectTensor(g, "model.embed_vision.embedding_projection.weight", { H, kVh });

    // 50·16384 + 10·8192 = 901,120 B per token at BF16 (half with the FP8 KV cache).
    double perToken = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        perToken += kvBytesPerToken(s, i);
    }
    EXPECT_DOUBLE_EQ(perToken, 901'120.0);
}

// The ModelOpt 26B: only the routed experts are NVFP4, split per expert; the dense MLP, the
// router, attention and the towers stay BF16 (exclude list of its hf_quant_config.json).
TEST(Gemma4, Reads26BNvfp4WithPerExpertFp4)
{
    const ModelSpec s = fromData(k26BNvfp4);
    ASSERT_TRUE(s.quantization.has_value());
    EXPECT_EQ(s.quantization->scheme, QuantScheme::Nvfp4);
    const LayerGraph g = buildLayerGraph(s);
    const std::string l0 = "model.language_model.layers.0.";
    const std::string e0 = l0 + "experts.0.";
    expectTensor(g, e0 + "gate_proj.weight", { kIe, kH / 2 }, DType::U8);
    expectTensor(g, e0 + "gate_proj.weight_scale", { kIe, kH / 16 }, DType::F8E4M3);
    expectTensor(g, e0 + "gate_proj.weight_scale_2", {}, DType::F32);
    expectTensor(g, e0 + "up_proj.weight", { kIe, kH / 2 }, DType::U8);
    expectTensor(g, e0 + "down_proj.weight", { kH, kIe / 2 }, DType::U8);
    expectTensor(g, e0 + "down_proj.weight_scale", { kH, kIe / 16 }, DType::F8E4M3);
    expectTensor(g, l0 + "experts.127.down_proj.weight", { kH, kIe / 2 }, DType::U8);
    // Expected (static input activations) but not seen in any listing of this checkpoint.
    ASSERT_NE(g.findTensor(e0 + "gate_proj.input_scale"), nullptr);
    EXPECT_TRUE(g.findTensor(e0 + "gate_proj.input_scale")->optional);
    EXPECT_EQ(g.findTensor(l0 + "experts.gate_up_proj"), nullptr);
    expectTensor(g, l0 + "mlp.gate_proj.weight", { 2112, kH });
    expectTensor(g, l0 + "router.proj.weight", { kE, kH });
    expectTensor(g, l0 + "self_attn.q_proj.weight", { 4096, kH });
    expectTensor(
        g, "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", { kVh, kVh });
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, kText26B);
    EXPECT_EQ(c.active, kActive26B); // per-expert tensors: top 8 of 128
    // Experts: 30 layers × 128 × 3 projections × 4 tensors; 1013 − 60 fused tensors otherwise.
    EXPECT_EQ(g.tensorCount(), 1013u - 60u + 30u * 128u * 3u * 4u);
}

// E2B (research A2.5 values, tests/data/model/configs/gemma-4-E2B-it.json): PLE, 20 KV-shared
// layers with double-wide MLPs, clipped vision Linears, the audio tower. The graph must equal
// the real checkpoint's tensor dump: 2011 tensors, 5,123,178,979 elements, all BF16.
TEST(Gemma4, E2BEqualsTheRealTensorDump)
{
    const ModelSpec s = fromData(kE2B);
    ASSERT_EQ(s.numLayers, 35);
    const LayerGraph g = buildLayerGraph(s);
    std::ifstream in(dataDir() / "listings" / "gemma-4-E2B-it.tsv");
    ASSERT_TRUE(in.good());
    std::map<std::string, std::vector<std::int64_t>> dump;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::istringstream cells(line);
        std::string name;
        std::string shape;
        std::string dtype;
        std::getline(cells, name, '\t');
        std::getline(cells, shape, '\t');
        std::getline(cells, dtype, '\t');
        EXPECT_EQ(dtype, "bfloat16") << name;
        std::vector<std::int64_t> dims;
        for (std::size_t at = 0; !shape.empty();) {
            const std::size_t times = shape.find("\u00d7", at);
            dims.push_back(std::stoll(shape.substr(at, times - at)));
            if (times == std::string::npos) {
                break;
            }
            at = times + std::string("\u00d7").size();
        }
        dump[name] = dims;
    }
    ASSERT_EQ(dump.size(), 2011u);
    std::size_t graphTensors = 0;
    for (const auto& block : g.blocks) {
        for (const auto& t : block.tensors) {
            ++graphTensors;
            const auto it = dump.find(t.name);
            if (it == dump.end()) {
                ADD_FAILURE() << "the graph has " << t.name << ", the checkpoint does not";
                continue;
            }
            EXPECT_EQ(t.shape, it->second) << t.name;
            EXPECT_EQ(t.dtype, DType::BF16) << t.name;
        }
    }
    for (const auto& [name, shape] : dump) {
        EXPECT_NE(g.findTensor(name), nullptr) << "the graph lacks " << name;
    }
    EXPECT_EQ(graphTensors, 2011u);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, 5'123'178'979);
    EXPECT_EQ(totalBytes(g), 2 * 5'123'178'979);
}

// E2B by hand (research A5): the text tower 4,647,449,891 with 18,880,512 stored-but-unused
// shared-layer k/v/k_norm, vision 151,046,592 encoder layers + patch embedding + projector,
// audio 304,825,088 + projector.
TEST(Gemma4, E2BLayersPleAndKvSharing)
{
    constexpr std::int64_t H = 1536, L = 35, P = 256;
    const ModelSpec s = fromData(kE2B);
    EXPECT_EQ(s.perLayerInputSize, P);
    EXPECT_EQ(s.perLayerInputVocab, 262144);
    EXPECT_EQ(s.kvSharedLayers, 20);
    ASSERT_TRUE(s.audio.has_value());
    EXPECT_TRUE(s.vision->clippedLinears);
    EXPECT_FALSE(s.vision->standardize);
    for (std::int64_t i = 0; i < L; ++i) {
        const LayerSpec& l = s.layers[std::size_t(i)];
        const bool full = (i + 1) % 5 == 0;
        EXPECT_EQ(l.mixer, full ? MixerKind::Attention : MixerKind::Sliding) << i;
        EXPECT_EQ(l.slidingWindow, full ? 0 : 512) << i;
        EXPECT_FALSE(l.sharedKv) << i; // attention_k_eq_v false: full layers have v_proj
        EXPECT_EQ(s.ffnWidthOf(l), i >= 15 ? 2 * 6144 : 6144) << i;
        EXPECT_EQ(s.kvHeadsOf(l), 1) << i;
        EXPECT_EQ(s.headDimOf(l), full ? 512 : 256) << i;
    }
    const LayerGraph g = buildLayerGraph(s);
    const ParameterCounts c = g.countParameters();
    constexpr std::int64_t sharedSliding = 16, sharedFull = 4;
    constexpr std::int64_t unused
        = sharedSliding * (2 * H * 256 + 256) + sharedFull * (2 * H * 512 + 512);
    static_assert(unused == 18'880'512);
    EXPECT_EQ(c.mainModel, 4'647'449'891);
    EXPECT_EQ(c.vision, 5'123'178'979 - 4'647'449'891);
    EXPECT_EQ(paramsUnder(g, "model.vision_tower.encoder."), 151'046'592);
    EXPECT_EQ(paramsUnder(g, "model.audio_tower."), 304'825'088);
    EXPECT_EQ(c.embedding, 262144 * H + 262144 * L * P + L * P * H + P);
    std::int64_t optional = 0;
    for (const auto& block : g.blocks) {
        for (const auto& t : block.tensors) {
            optional += t.optional ? t.params() : 0;
        }
    }
    EXPECT_EQ(optional, unused);
    expectTensor(g, "model.language_model.embed_tokens_per_layer.weight", { 262144, L * P });
    expectTensor(g, "model.language_model.per_layer_model_projection.weight", { L * P, H });
    expectTensor(g, "model.language_model.layers.3.per_layer_input_gate.weight", { P, H });
    expectTensor(g, "model.vision_tower.encoder.layers.0.self_attn.q_proj.input_min", {});
    expectTensor(g, "model.audio_tower.layers.0.lconv1d.depthwise_conv1d.weight", { 1024, 1, 5 });
    expectTensor(g, "model.embed_audio.embedding_projection.weight", { H, 1536 });

    // KV (research A6): layers 0–14 only, 12 sliding · 2·1·256 + 3 full · 2·1·512 elements per
    // token: 18,432 B at BF16; the 20 shared layers keep nothing.
    double perToken = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const auto terms = layerCache(s, s.layers[i], std::int64_t(i));
        EXPECT_EQ(terms.empty(), i >= 15) << i;
        perToken += kvBytesPerToken(s, i);
    }
    EXPECT_DOUBLE_EQ(perToken, 18'432.0);
}

// hidden_size_per_layer_input left out means the class default 256 (PLE tensors appear); null
// or 0 means none. Gemma4ForCausalLM (gemma4_text, no wrapper) keeps its tensors under model.
TEST(Gemma4, ClassDefaultsAndTextOnlyLayout)
{
    auto doc = configJson(k26B);
    auto text = doc["text_config"];
    text.erase("hidden_size_per_layer_input");
    text["architectures"] = { "Gemma4ForCausalLM" };
    text.erase("tie_word_embeddings");
    auto spec = readConfig(text, "gemma4-text.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->perLayerInputSize, 256);
    EXPECT_TRUE(spec->tieEmbeddings);
    EXPECT_EQ(spec->layout.textPrefix, "model");
    EXPECT_FALSE(spec->vision.has_value());
    const LayerGraph g = buildLayerGraph(*spec);
    expectTensor(g, "model.embed_tokens_per_layer.weight", { kV, 30 * 256 });
    expectTensor(g, "model.layers.0.post_per_layer_input_norm.weight", { kH });
    EXPECT_EQ(g.findTensor("model.vision_tower.patch_embedder.input_proj.weight"), nullptr);

    text["hidden_size_per_layer_input"] = nullptr;
    text["tie_word_embeddings"] = false;
    auto none = readConfig(text, "gemma4-text.json");
    ASSERT_TRUE(none.ok()) << none.error().message;
    EXPECT_EQ(none->perLayerInputSize, 0);
    const LayerGraph untied = buildLayerGraph(*none);
    expectTensor(untied, "lm_head.weight", { kV, kH });
}

TEST(Gemma4, BadInputNamesFileKeyAndValue)
{
    const auto expectError = [](const nlohmann::json& doc, const std::vector<std::string>& parts) {
        auto spec = readConfig(doc, "gemma4.json");
        ASSERT_FALSE(spec.ok());
        for (const auto& part : parts) {
            EXPECT_NE(spec.error().message.find(part), std::string::npos)
                << spec.error().message << " lacks " << part;
        }
    };
    const auto base = configJson(k26B);

    auto shortTypes = base;
    shortTypes["text_config"]["layer_types"].erase(0);
    expectError(shortTypes, { "gemma4.json (text_config)", "layer_types", "29 entries", "30" });

    auto unknownType = base;
    unknownType["text_config"]["layer_types"][7] = "chunked_attention";
    expectError(unknownType, { "layer_types", "entry 7", "chunked_attention" });

    auto bidirectional = base;
    bidirectional["text_config"]["use_bidirectional_attention"] = "text";
    expectError(bidirectional, { "use_bidirectional_attention", "\"text\"" });

    auto rope = base;
    rope["text_config"]["rope_parameters"]["chunked_attention"] = { { "rope_theta", 1.0 } };
    expectError(rope, { "rope_parameters", "chunked_attention" });

    auto kEqV = base;
    kEqV["text_config"]["num_global_key_value_heads"] = nullptr;
    expectError(kEqV, { "num_global_key_value_heads", "attention_k_eq_v" });

    auto moe = base;
    moe["text_config"]["top_k_experts"] = 129;
    expectError(moe, { "top_k_experts", "128" });

    auto vision = base;
    vision["vision_config"]["model_type"] = "siglip_vision_model";
    expectError(vision, { "gemma4.json (vision_config)", "model_type", "siglip_vision_model" });

    auto unknownKey = base;
    unknownKey["vision_config"]["num_register_tokens"] = 4;
    expectError(unknownKey, { "vision_config.num_register_tokens" });

    // use_bidirectional_attention "all" halves the window as HF does (sw // 2 + 1).
    auto all = base;
    all["text_config"]["use_bidirectional_attention"] = "all";
    auto spec = readConfig(all, "gemma4.json");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->layers[0].slidingWindow, 513);

    // A last sliding layer is read as full attention, as HF forces it, with a warning.
    auto last = base;
    last["text_config"]["layer_types"][29] = "sliding_attention";
    auto forced = readConfig(last, "gemma4.json");
    ASSERT_TRUE(forced.ok()) << forced.error().message;
    EXPECT_EQ(forced->layers[29].mixer, MixerKind::Attention);
    EXPECT_FALSE(forced->warnings.empty());
}
