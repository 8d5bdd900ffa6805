// Qwen3-Next, Qwen3.5 and Qwen3.6 (qwen3_next, qwen3_5, qwen3_5_moe): every real config of the
// families in tests/data/model/configs/frontier*/ is read, its counts derived by hand from the
// config numbers (research/qwen_next_35.md §6), its tensors checked per block kind against the
// real Qwen3.5-27B header subset and the Qwen3.5-397B header audit (2924 tensors, 806,795,875,168
// bytes), its KV cache and recurrent state against §7, and malformed configs refused naming the
// file, key and value.

#include "base/file_util.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"
#include "qwen_next_configs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

// The config numbers a count depends on (names as in research/qwen_next_35.md).
struct Dims {
    std::int64_t H, V, L, full; // hidden, vocab, layers, full-attention layers
    std::int64_t nh, nkv, hd; // attention heads, KV heads, head width
    std::int64_t nk, dk, nv, dv, Kc; // Gated DeltaNet heads and widths, conv kernel
    std::int64_t E, Ie, Is, k; // experts, expert width, shared width, top-k (E = 0: dense)
    std::int64_t I; // dense MLP width
    std::int64_t M; // MTP layers
};

constexpr std::int64_t convDim(const Dims& d) { return 2 * d.nk * d.dk + d.nv * d.dv; }
constexpr std::int64_t valueDim(const Dims& d) { return d.nv * d.dv; }
// in_proj_qkv + in_proj_z + in_proj_b/a (or in_proj_qkvz + in_proj_ba), conv1d, dt_bias, A_log,
// norm, out_proj.
constexpr std::int64_t gdnLayer(const Dims& d)
{
    return convDim(d) * d.H + valueDim(d) * d.H + 2 * d.nv * d.H + convDim(d) * d.Kc + 2 * d.nv
        + d.dv + d.H * valueDim(d);
}
// q_proj doubled by the output gate, k, v, o, q_norm, k_norm.
constexpr std::int64_t attnLayer(const Dims& d)
{
    return 2 * d.nh * d.hd * d.H + 2 * d.nkv * d.hd * d.H + d.H * d.nh * d.hd + 2 * d.hd;
}
// Router, routed experts, shared expert and its gate; or the dense MLP.
constexpr std::int64_t ffn(const Dims& d)
{
    return d.E > 0 ? d.E * d.H + d.E * 3 * d.Ie * d.H + 3 * d.Is * d.H + d.H : 3 * d.I * d.H;
}
constexpr std::int64_t ffnActive(const Dims& d)
{
    return d.E > 0 ? d.E * d.H + d.k * 3 * d.Ie * d.H + 3 * d.Is * d.H + d.H : 3 * d.I * d.H;
}
constexpr std::int64_t norms(const Dims& d) { return 2 * d.L * d.H + d.H; }
constexpr std::int64_t mainText(const Dims& d)
{
    return 2 * d.V * d.H + (d.L - d.full) * gdnLayer(d) + d.full * attnLayer(d) + d.L * ffn(d)
        + norms(d);
}
constexpr std::int64_t active(const Dims& d)
{
    return 2 * d.V * d.H + (d.L - d.full) * gdnLayer(d) + d.full * attnLayer(d) + d.L * ffnActive(d)
        + norms(d);
}
// mtp.fc [H, 2H], pre_fc_norm_embedding, pre_fc_norm_hidden, mtp.norm, and M full-attention
// layers with the main FFN kind.
constexpr std::int64_t mtp(const Dims& d)
{
    return 2 * d.H * d.H + 3 * d.H + d.M * (attnLayer(d) + ffn(d) + 2 * d.H);
}
// The Qwen3.5 vision tower (1152 wide, 27 blocks, MLP 4304, patch 3×2×16×16, 2304 positions,
// 2×2 merger into out = H): Conv3d + bias, pos_embed, blocks, merger.
constexpr std::int64_t vision(std::int64_t out)
{
    constexpr std::int64_t h = 1152, depth = 27, iv = 4304, npos = 2304, hm = h * 4;
    return h * 3 * 2 * 16 * 16 + h + npos * h
        + depth * (4 * h + 3 * h * h + 3 * h + h * h + h + 2 * iv * h + iv + h) + 2 * h + hm * hm
        + hm + out * hm + out;
}

constexpr Dims kNext80B {
    2048, 151936, 48, 12, // H, V, L, full-attention layers
    16, 2, 256, // heads, KV heads, head_dim
    16, 128, 32, 128, 4, // linear_* key heads, key dim, value heads, value dim, conv
    512, 512, 512, 10, // experts, expert width, shared width, top-k
    5120, 1 // intermediate_size, MTP layers
};
constexpr Dims k27B {
    5120, 248320, 64, 16, // H, V, L, full-attention layers
    24, 4, 256, // heads, KV heads, head_dim
    16, 128, 48, 128, 4, // linear_* key heads, key dim, value heads, value dim, conv
    0, 0, 0, 0, // experts, expert width, shared width, top-k
    17408, 1 // intermediate_size, MTP layers
};
constexpr Dims k35B {
    2048, 248320, 40, 10, // H, V, L, full-attention layers
    16, 2, 256, // heads, KV heads, head_dim
    16, 128, 32, 128, 4, // linear_* key heads, key dim, value heads, value dim, conv
    256, 512, 512, 8, // experts, expert width, shared width, top-k
    0, 1 // intermediate_size, MTP layers
};
constexpr Dims k122B {
    3072, 248320, 48, 12, // H, V, L, full-attention layers
    32, 2, 256, // heads, KV heads, head_dim
    16, 128, 64, 128, 4, // linear_* key heads, key dim, value heads, value dim, conv
    256, 1024, 1024, 8, // experts, expert width, shared width, top-k
    0, 1 // intermediate_size, MTP layers
};
constexpr Dims k397B {
    4096, 248320, 60, 15, // H, V, L, full-attention layers
    32, 2, 256, // heads, KV heads, head_dim
    16, 128, 64, 128, 4, // linear_* key heads, key dim, value heads, value dim, conv
    512, 1024, 1024, 10, // experts, expert width, shared width, top-k
    0, 1 // intermediate_size, MTP layers
};

// The research document's per-layer and total figures (§6.1, §6.2).
static_assert(gdnLayer(kNext80B) == 33'718'464 && attnLayer(kNext80B) == 27'263'488);
static_assert(ffn(kNext80B) == 1'614'809'088 && ffnActive(kNext80B) == 35'653'632);
static_assert(mainText(kNext80B) == 79'674'391'296 && mtp(kNext80B) == 1'650'471'424);
static_assert(active(kNext80B) == 3'874'929'408);
static_assert(gdnLayer(k27B) == 115'876'064 && attnLayer(k27B) == 104'858'112);
static_assert(mainText(k27B) == 26'895'998'464 && mtp(k27B) == 424'699'392);
static_assert(vision(5120) == 460'730'096);
static_assert(mainText(k27B) + vision(5120) + mtp(k27B) == 27'781'427'952);
static_assert(mainText(k35B) == 34'660'610'688 && mtp(k35B) == 844'640'768);
static_assert(vision(2048) == 446'571'248 && active(k35B) == 3'454'988'928);
static_assert(mainText(k122B) == 122'111'526'912 && mtp(k122B) == 2'523'679'232);
static_assert(vision(3072) == 451'290'864 && active(k122B) == 9'771'288'576);
static_assert(mainText(k397B) == 396'346'350'336 && mtp(k397B) == 6'595'568'128);
static_assert(vision(4096) == 456'010'480 && active(k397B) == 17'349'040'896);
// The 397B header audit: 403,397,928,944 parameters in the whole checkpoint.
static_assert(mainText(k397B) + vision(4096) + mtp(k397B) == 403'397'928'944);

ParameterCounts countsOf(const ModelSpec& spec) { return buildLayerGraph(spec).countParameters(); }

// Exact counts of a size from its Dims; vision out = H, or no vision.
void expectCounts(const ModelSpec& spec, const Dims& d, bool withVision)
{
    const ParameterCounts c = countsOf(spec);
    const std::int64_t v = withVision ? vision(d.H) : 0;
    EXPECT_EQ(c.mainModel, mainText(d));
    EXPECT_EQ(c.vision, v);
    EXPECT_EQ(c.mtp, mtp(d));
    EXPECT_EQ(c.total, mainText(d) + v + mtp(d));
    EXPECT_EQ(c.active, active(d));
    EXPECT_EQ(c.embedding, d.V * d.H);
    EXPECT_EQ(c.lmHead, d.V * d.H);
    EXPECT_EQ(c.activeWithoutEmbedding, active(d) - d.V * d.H);
}

// Layer i is full attention iff (i + 1) % 4 == 0 in every release.
void expectHybridPattern(const ModelSpec& spec, FfnKind ffnKind)
{
    ASSERT_EQ(std::int64_t(spec.layers.size()), spec.numLayers);
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        const MixerKind want = (i + 1) % 4 == 0 ? MixerKind::Attention : MixerKind::GatedDeltaNet;
        EXPECT_EQ(spec.layers[i].mixer, want) << "layer " << i;
        EXPECT_EQ(spec.layers[i].ffn, ffnKind) << "layer " << i;
    }
    ASSERT_EQ(spec.mtpLayers.size(), 1u);
    EXPECT_EQ(spec.mtpLayers[0].mixer, MixerKind::Attention);
    EXPECT_EQ(spec.mtpLayers[0].ffn, ffnKind);
}

} // namespace

// Qwen3-Next-80B-A3B: flat config, no layer_types (full_attention_interval 4), 512 experts per
// expert, shared expert with its gate, one MTP layer (num_nextn_predict_layers absent).
TEST(QwenNext, Qwen3Next80BReading)
{
    const ModelSpec spec = fromData(kNextConfig);
    EXPECT_EQ(spec.family, Family::Qwen3Next);
    expectHybridPattern(spec, FfnKind::Moe);
    EXPECT_EQ(spec.headDim, 256);
    EXPECT_TRUE(spec.attentionOutputGate);
    EXPECT_TRUE(spec.normOffset);
    EXPECT_TRUE(spec.qkNorm);
    EXPECT_EQ(spec.attention, AttentionKind::GQA);
    ASSERT_TRUE(spec.linearAttention.has_value());
    EXPECT_EQ(spec.linearAttention->keyHeads, 16);
    EXPECT_EQ(spec.linearAttention->valueHeads, 32);
    EXPECT_EQ(spec.linearAttention->keyHeadDim, 128);
    EXPECT_EQ(spec.linearAttention->valueHeadDim, 128);
    EXPECT_EQ(spec.linearAttention->convKernel, 4);
    // No mamba_ssm_dtype: vLLM keeps the state in the model dtype.
    EXPECT_EQ(spec.linearAttention->stateDtype, DType::BF16);
    ASSERT_TRUE(spec.moe.has_value());
    EXPECT_EQ(spec.moe->numExperts, 512);
    EXPECT_EQ(spec.moe->topK, 10);
    EXPECT_TRUE(spec.moe->sharedExpertGate);
    EXPECT_FALSE(spec.moe->packedExperts);
    EXPECT_DOUBLE_EQ(spec.partialRotaryFactor, 0.25);
    EXPECT_EQ(spec.layout.textPrefix, "model");
    EXPECT_FALSE(spec.vision.has_value());
    EXPECT_EQ(spec.numMtpLayers, 1);
}

TEST(QwenNext, Qwen3Next80BCountsAndTensors)
{
    const ModelSpec spec = fromData(kNextConfig);
    expectCounts(spec, kNext80B, false);
    const ParameterCounts c = countsOf(spec);
    // Model card: "80B in total and 3B activated"; NVIDIA NIM card
    // (docs.api.nvidia.com/nim/reference/qwen-qwen3-next-80b-a3b-instruct): "Total Parameters:
    // 80B, Active Parameters: 3.9B". The total is the text model without MTP (79.67B); the
    // active 3.875B (embedding and lm_head included) is NIM's 3.9B. The "3B" is the A3B label:
    // only leaving out both embedding and lm_head gets near it (3.253B).
    expectNear(c.mainModel, 80e9, 0.03, "total (main text)");
    expectNear(c.active, 3.9e9, 0.01, "active (NIM)");
    EXPECT_EQ(c.active - c.embedding - c.lmHead, 3'252'599'552);

    const LayerGraph g = buildLayerGraph(spec);
    // 36 GDN layers of 1550 tensors, 12 attention layers of 1549, embed, norm, lm_head; MTP 4 +
    // 1549.
    EXPECT_EQ(g.tensorCount(), 36u * 1550 + 12 * 1549 + 3 + 1553);
    // Every tensor BF16 (the dtype of A_log and linear_attn.norm is not established: BF16 as
    // torch_dtype says, F32 accepted, 162,649,727,744 / 162,649,736,960 bytes then).
    EXPECT_EQ(totalBytes(g), 162'649'725'440);
    const std::string p = "model.layers.0.linear_attn.";
    expectTensor(g, p + "in_proj_qkvz.weight", { 12288, 2048 }, DType::BF16);
    expectTensor(g, p + "in_proj_ba.weight", { 64, 2048 }, DType::BF16);
    expectTensor(g, p + "conv1d.weight", { 8192, 1, 4 }, DType::BF16);
    expectTensor(g, p + "dt_bias", { 32 }, DType::BF16);
    expectTensor(g, p + "A_log", { 32 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "A_log")->altDtype, DType::F32);
    expectTensor(g, p + "norm.weight", { 128 }, DType::BF16);
    expectTensor(g, p + "out_proj.weight", { 2048, 4096 }, DType::BF16);
    EXPECT_EQ(g.findTensor(p + "conv1d.bias"), nullptr);
    const std::string a = "model.layers.3.self_attn.";
    expectTensor(g, a + "q_proj.weight", { 8192, 2048 }, DType::BF16);
    expectTensor(g, a + "k_proj.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, a + "v_proj.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, a + "o_proj.weight", { 2048, 4096 }, DType::BF16);
    expectTensor(g, a + "q_norm.weight", { 256 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.3.linear_attn.A_log"), nullptr);
    EXPECT_EQ(g.findTensor("model.layers.0.self_attn.q_proj.weight"), nullptr);
    const std::string m = "model.layers.47.mlp.";
    expectTensor(g, m + "gate.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, m + "experts.511.gate_proj.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, m + "experts.511.up_proj.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, m + "experts.511.down_proj.weight", { 2048, 512 }, DType::BF16);
    expectTensor(g, m + "shared_expert.gate_proj.weight", { 512, 2048 }, DType::BF16);
    expectTensor(g, m + "shared_expert.down_proj.weight", { 2048, 512 }, DType::BF16);
    expectTensor(g, m + "shared_expert_gate.weight", { 1, 2048 }, DType::BF16);
    expectTensor(g, "model.embed_tokens.weight", { 151936, 2048 }, DType::BF16);
    expectTensor(g, "model.norm.weight", { 2048 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 151936, 2048 }, DType::BF16);
    expectTensor(g, "mtp.fc.weight", { 2048, 4096 }, DType::BF16);
    expectTensor(g, "mtp.pre_fc_norm_embedding.weight", { 2048 }, DType::BF16);
    expectTensor(g, "mtp.layers.0.self_attn.q_proj.weight", { 8192, 2048 }, DType::BF16);
    expectTensor(g, "mtp.layers.0.mlp.experts.0.down_proj.weight", { 2048, 512 }, DType::BF16);
    expectTensor(g, "mtp.norm.weight", { 2048 }, DType::BF16);
}

// Qwen3.5-27B (= Qwen3.6-27B): dense, layer_types, F32 A_log and gated norm.
TEST(QwenNext, Qwen35_27BReadingAndCounts)
{
    const ModelSpec spec = fromData(k27BConfig);
    EXPECT_EQ(spec.family, Family::Qwen35);
    expectHybridPattern(spec, FfnKind::Dense);
    EXPECT_FALSE(spec.moe.has_value());
    EXPECT_EQ(spec.intermediateSize, 17408);
    ASSERT_TRUE(spec.linearAttention.has_value());
    EXPECT_EQ(spec.linearAttention->valueHeads, 48);
    EXPECT_EQ(spec.linearAttention->stateDtype, DType::F32); // mamba_ssm_dtype "float32"
    EXPECT_EQ(spec.layout.textPrefix, "model.language_model");
    EXPECT_EQ(spec.layout.lmHead, "lm_head");
    EXPECT_EQ(spec.layout.visionPrefix, "model.visual");
    ASSERT_TRUE(spec.vision.has_value());
    EXPECT_EQ(spec.vision->kind, "qwen3_vl");
    EXPECT_TRUE(spec.vision->deepstackIndexes.empty());
    EXPECT_EQ(spec.ropeScaling.mropeSection, (std::vector<std::int64_t> { 11, 11, 10 }));
    EXPECT_TRUE(spec.ropeScaling.mropeInterleaved);

    expectCounts(spec, k27B, true);
    const ParameterCounts c = countsOf(spec);
    // "27B" (model name): the text model without MTP, 26.896B (with vision 27.357B).
    expectNear(c.mainModel, 27e9, 0.03, "total (main text)");
    EXPECT_EQ(c.total, 27'781'427'952);

    const LayerGraph g = buildLayerGraph(spec);
    // 48 GDN layers of 14 tensors, 16 attention layers of 11, 3; vision 3 + 12·27 + 6; MTP 15.
    EXPECT_EQ(g.tensorCount(), 1199u);
    // Real index metadata.total_size: BF16 everywhere but 48 A_log [48] and 48 norms [128] in
    // F32.
    EXPECT_EQ(totalBytes(g), 55'562'872'800);
    EXPECT_EQ(c.bytes, 2 * c.total + 2 * std::int64_t(48 * 48 + 48 * 128));
    const std::string p = "model.language_model.layers.0.";
    expectTensor(g, p + "linear_attn.in_proj_b.weight", { 48, 5120 }, DType::BF16);
    expectTensor(g, p + "linear_attn.in_proj_a.weight", { 48, 5120 }, DType::BF16);
    expectTensor(g, p + "linear_attn.dt_bias", { 48 }, DType::BF16);
    expectTensor(g, p + "linear_attn.norm.weight", { 128 }, DType::F32);
    EXPECT_EQ(g.findTensor(p + "linear_attn.norm.weight")->altDtype, DType::BF16);
    expectTensor(g, p + "linear_attn.out_proj.weight", { 5120, 6144 }, DType::BF16);
    expectTensor(g, p + "mlp.gate_proj.weight", { 17408, 5120 }, DType::BF16);
    expectTensor(g, p + "mlp.down_proj.weight", { 5120, 17408 }, DType::BF16);
    expectTensor(g, "mtp.layers.0.mlp.up_proj.weight", { 17408, 5120 }, DType::BF16);
    expectTensor(g, "mtp.fc.weight", { 5120, 10240 }, DType::BF16);
    expectTensor(g, "model.visual.patch_embed.proj.weight", { 1152, 3, 2, 16, 16 }, DType::BF16);
    expectTensor(g, "model.visual.pos_embed.weight", { 2304, 1152 }, DType::BF16);
    expectTensor(g, "model.visual.blocks.26.attn.qkv.weight", { 3456, 1152 }, DType::BF16);
    expectTensor(g, "model.visual.merger.linear_fc1.weight", { 4608, 4608 }, DType::BF16);
    expectTensor(g, "model.visual.merger.linear_fc2.weight", { 5120, 4608 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.visual.deepstack_merger_list.0.norm.weight"), nullptr);
}

// Every tensor of the real Qwen/Qwen3.5-27B header subset (tests/data/model/listings) with its
// dtype, shape and byte size.
TEST(QwenNext, Qwen35_27BMatchesTheRealHeaders)
{
    const LayerGraph g = buildLayerGraph(fromData(k27BConfig));
    auto subset = readJsonFile(dataDir() / "listings/qwen3.5-27b.header_subset.json");
    ASSERT_TRUE(subset.ok()) << subset.error().message;
    EXPECT_EQ((*subset)["index_metadata_total_size"].get<std::int64_t>(), totalBytes(g));
    int checked = 0;
    for (const char* shard : { "shard1", "shard9", "shard11" }) {
        for (const auto& [name, entry] : (*subset)[shard].items()) {
            const TensorSpec* t = g.findTensor(name);
            ASSERT_NE(t, nullptr) << name;
            EXPECT_EQ(t->shape, entry["shape"].get<std::vector<std::int64_t>>()) << name;
            EXPECT_EQ(dtypeName(t->dtype), entry["dtype"].get<std::string>()) << name;
            const auto offsets = entry["data_offsets"].get<std::vector<std::int64_t>>();
            EXPECT_EQ(t->bytes(), offsets[1] - offsets[0]) << name;
            ++checked;
        }
    }
    EXPECT_EQ(checked, 10);
}

TEST(QwenNext, Qwen35Moe35BCounts)
{
    const ModelSpec spec = fromData(k35BConfig);
    EXPECT_EQ(spec.family, Family::Qwen35Moe);
    expectHybridPattern(spec, FfnKind::Moe);
    ASSERT_TRUE(spec.moe.has_value());
    EXPECT_TRUE(spec.moe->packedExperts);
    EXPECT_TRUE(spec.moe->normTopkProb);
    expectCounts(spec, k35B, true);
    const ParameterCounts c = countsOf(spec);
    // transformers doc qwen3_5_moe.md: "35B total / 3B active". Text without MTP 34.66B; the
    // active 3.455B (embedding and lm_head included) rounds to 3B.
    expectNear(c.mainModel, 35e9, 0.03, "total (main text)");
    EXPECT_EQ(std::llround(double(c.active) / 1e9), 3);

    const LayerGraph g = buildLayerGraph(spec);
    // 30·18 + 10·15 + 3 text, 333 vision, MTP 4 + 13 + 3·256 per expert (Qwen3.5).
    EXPECT_EQ(g.tensorCount(), 1811u);
    // Predicted with the Qwen3.5 dtype rule (research §4.5): no real figure.
    EXPECT_EQ(totalBytes(g), 71'903'655'008);
    const std::string m = "model.language_model.layers.0.mlp.";
    expectTensor(g, m + "experts.gate_up_proj", { 256, 1024, 2048 }, DType::BF16);
    expectTensor(g, m + "experts.down_proj", { 256, 2048, 512 }, DType::BF16);
    EXPECT_EQ(g.findTensor(m + "experts.gate_up_proj")->packedExperts, 256);
    EXPECT_EQ(g.findTensor(m + "experts.0.gate_proj.weight"), nullptr);
    expectTensor(g, "mtp.layers.0.mlp.experts.255.gate_proj.weight", { 512, 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor("mtp.layers.0.mlp.experts.gate_up_proj"), nullptr);
}

TEST(QwenNext, Qwen35Moe122BCounts)
{
    const ModelSpec spec = fromData(k122BConfig);
    expectHybridPattern(spec, FfnKind::Moe);
    expectCounts(spec, k122B, true);
    const ParameterCounts c = countsOf(spec);
    // Model name "122B-A10B": text without MTP 122.11B, active 9.771B (embedding and lm_head
    // included) → 10B.
    expectNear(c.mainModel, 122e9, 0.03, "total (main text)");
    expectNear(c.active, 10e9, 0.03, "active");
    const LayerGraph g = buildLayerGraph(spec);
    EXPECT_EQ(g.tensorCount(), 36u * 18 + 12 * 15 + 3 + 333 + 4 + 13 + 3 * 256);
    EXPECT_EQ(totalBytes(g), 250'173'007'840); // predicted (research §4.5)
}

// Qwen3.5-397B-A17B against the full header audit of the published checkpoint @ 84726181.
TEST(QwenNext, Qwen35Moe397BMatchesTheHeaderAudit)
{
    const ModelSpec spec = fromData(k397BConfig);
    EXPECT_EQ(spec.family, Family::Qwen35Moe);
    expectHybridPattern(spec, FfnKind::Moe);
    expectCounts(spec, k397B, true);
    const ParameterCounts c = countsOf(spec);
    EXPECT_EQ(c.total, 403'397'928'944);
    EXPECT_EQ(c.mainModel, 396'346'350'336); // "base text incl. embedding / lm_head"
    EXPECT_EQ(c.vision, 456'010'480);
    EXPECT_EQ(c.mtp, 6'595'568'128);
    // "397B total parameters, 17B activated" (docs.sglang.io Qwen3.5 cookbook; the mlx-community
    // copy of the official card: "Total Parameters 397B, Active Parameters ~17B"): text + vision
    // without MTP 396.80B; active 17.349B with embedding and lm_head.
    expectNear(c.mainModel + c.vision, 397e9, 0.005, "total (text + vision)");
    expectNear(c.active, 17e9, 0.03, "active");

    const LayerGraph g = buildLayerGraph(spec);
    EXPECT_EQ(g.tensorCount(), 2924u);
    EXPECT_EQ(totalBytes(g), 806'795'875'168);
    std::size_t f32 = 0;
    std::size_t bf16 = 0;
    std::size_t text = 0;
    for (const auto& block : g.blocks) {
        for (const auto& t : block.tensors) {
            f32 += t.dtype == DType::F32 ? 1 : 0;
            bf16 += t.dtype == DType::BF16 ? 1 : 0;
            text += t.component != Component::Vision && t.component != Component::Mtp ? 1 : 0;
        }
    }
    EXPECT_EQ(f32, 90u);
    EXPECT_EQ(bf16, 2834u);
    EXPECT_EQ(text, 1038u);

    const std::string l = "model.language_model.layers.";
    expectTensor(g, l + "0.linear_attn.in_proj_qkv.weight", { 12288, 4096 }, DType::BF16);
    expectTensor(g, l + "0.linear_attn.in_proj_z.weight", { 8192, 4096 }, DType::BF16);
    expectTensor(g, l + "0.linear_attn.conv1d.weight", { 12288, 1, 4 }, DType::BF16);
    expectTensor(g, l + "0.linear_attn.A_log", { 64 }, DType::F32);
    expectTensor(g, l + "0.linear_attn.out_proj.weight", { 4096, 8192 }, DType::BF16);
    expectTensor(g, l + "59.self_attn.q_proj.weight", { 16384, 4096 }, DType::BF16);
    expectTensor(g, l + "59.self_attn.o_proj.weight", { 4096, 8192 }, DType::BF16);
    expectTensor(g, l + "59.mlp.gate.weight", { 512, 4096 }, DType::BF16);
    expectTensor(g, l + "59.mlp.experts.gate_up_proj", { 512, 2048, 4096 }, DType::BF16);
    expectTensor(g, l + "59.mlp.experts.down_proj", { 512, 4096, 1024 }, DType::BF16);
    expectTensor(g, l + "59.mlp.shared_expert.up_proj.weight", { 1024, 4096 }, DType::BF16);
    expectTensor(g, l + "59.mlp.shared_expert_gate.weight", { 1, 4096 }, DType::BF16);
    expectTensor(g, "mtp.layers.0.mlp.experts.511.up_proj.weight", { 1024, 4096 }, DType::BF16);
    expectTensor(g, "model.visual.merger.linear_fc2.weight", { 4096, 4608 }, DType::BF16);

    // Blocks: vision, embedding, 60 decoder layers, final norm, lm_head, one MTP block "mtp".
    const Block* mtpBlock = g.findBlock("mtp");
    ASSERT_NE(mtpBlock, nullptr);
    EXPECT_EQ(mtpBlock->kind, BlockKind::Mtp);
    EXPECT_EQ(mtpBlock->layer, 60);
    EXPECT_EQ(mtpBlock->topK, 10);
    EXPECT_EQ(mtpBlock->tensors.size(), 1553u);
    EXPECT_EQ(g.decoderBlocks().size(), 60u);
    ASSERT_NE(g.findBlock("model.language_model.layers.7"), nullptr);
    EXPECT_TRUE(g.findBlock("model.language_model.layers.7")->moe);
    EXPECT_EQ(g.findBlock("model.language_model.layers.7")->topK, 10);
    std::size_t visionBlocks = 0;
    for (const auto& block : g.blocks) {
        visionBlocks += block.kind == BlockKind::VisionBlock ? 1 : 0;
    }
    EXPECT_EQ(visionBlocks, 27u);
    EXPECT_EQ(g.blocks.front().kind, BlockKind::VisionPatchEmbed);
    EXPECT_EQ(g.blocks.back().kind, BlockKind::Mtp);
}

// nvidia/Qwen3.5-397B-A17B-NVFP4: only the routed experts of the 60 main layers are NVFP4, per
// expert; attention, GDN, shared experts, router, lm_head, vision and all of mtp.* stay BF16.
TEST(QwenNext, Qwen35Moe397BNvfp4)
{
    const ModelSpec spec = fromData("configs/frontier-sizes/nvidia--Qwen3.5-397B-A17B-NVFP4.json");
    ASSERT_TRUE(spec.quantization.has_value());
    EXPECT_EQ(spec.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(spec.quantization->groupSize, 16);
    EXPECT_EQ(spec.quantization->kvCacheDtype, DType::F8E4M3);
    EXPECT_EQ(spec.quantization->excludePatterns.size(), 184u);
    ASSERT_TRUE(spec.moe.has_value());
    EXPECT_FALSE(spec.moe->packedExperts);

    const LayerGraph g = buildLayerGraph(spec);
    const std::string e = "model.language_model.layers.0.mlp.experts.511.";
    expectTensor(g, e + "gate_proj.weight", { 1024, 2048 }, DType::U8);
    expectTensor(g, e + "gate_proj.weight_scale", { 1024, 256 }, DType::F8E4M3);
    expectTensor(g, e + "gate_proj.weight_scale_2", {}, DType::F32);
    expectTensor(g, e + "gate_proj.input_scale", {}, DType::F32);
    expectTensor(g, e + "up_proj.weight", { 1024, 2048 }, DType::U8);
    expectTensor(g, e + "down_proj.weight", { 4096, 512 }, DType::U8);
    expectTensor(g, e + "down_proj.weight_scale", { 4096, 64 }, DType::F8E4M3);
    EXPECT_EQ(g.findTensor("model.language_model.layers.0.mlp.experts.gate_up_proj"), nullptr);
    const std::string l = "model.language_model.layers.";
    expectTensor(g, l + "0.linear_attn.in_proj_qkv.weight", { 12288, 4096 }, DType::BF16);
    EXPECT_EQ(g.findTensor(l + "0.linear_attn.in_proj_qkv.weight_scale"), nullptr);
    expectTensor(g, l + "3.self_attn.q_proj.weight", { 16384, 4096 }, DType::BF16);
    expectTensor(g, l + "0.mlp.shared_expert.gate_proj.weight", { 1024, 4096 }, DType::BF16);
    expectTensor(g, l + "0.mlp.shared_expert_gate.weight", { 1, 4096 }, DType::BF16);
    expectTensor(g, l + "0.mlp.gate.weight", { 512, 4096 }, DType::BF16);
    expectTensor(g, "lm_head.weight", { 248320, 4096 }, DType::BF16);
    // mtp.fc is not in the exclude list but is stored BF16 (vLLM qwen3_5_mtp.py).
    expectTensor(g, "mtp.fc.weight", { 4096, 8192 }, DType::BF16);
    EXPECT_EQ(g.findTensor("mtp.fc.weight_scale"), nullptr);
    expectTensor(g, "mtp.layers.0.mlp.experts.0.gate_proj.weight", { 1024, 4096 }, DType::BF16);
    expectTensor(g, "model.visual.blocks.0.attn.qkv.weight", { 3456, 1152 }, DType::BF16);

    // Parameters are the BF16 release's; bytes: the routed experts of 60 layers go from BF16 to
    // U8 halves + one E4M3 scale per 16 + two F32 scalars per projection.
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, 403'397'928'944);
    EXPECT_EQ(c.active, active(k397B));
    constexpr std::int64_t E = 512, H = 4096, Ie = 1024, L = 60;
    constexpr std::int64_t bf16Experts = L * E * 3 * Ie * H * 2;
    constexpr std::int64_t nvfp4Experts = L * E * 3 * (Ie * H / 2 + Ie * H / 16 + 8);
    EXPECT_EQ(totalBytes(g), 806'795'875'168 - bf16Experts + nvfp4Experts);
    // 60·512·3 projections of 4 tensors, 45·16 + 15·13 + 3 other text tensors, MTP, vision.
    EXPECT_EQ(g.tensorCount(),
        std::size_t(L * E * 3 * 4 + std::int64_t(45 * 16 + 15 * 13 + 3 + 1553 + 333)));
}

TEST(QwenNext, Qwen35Moe122BNvfp4)
{
    const ModelSpec spec = fromData("configs/frontier-sizes/nvidia--Qwen3.5-122B-A10B-NVFP4.json");
    ASSERT_TRUE(spec.quantization.has_value());
    EXPECT_EQ(spec.quantization->scheme, QuantScheme::Nvfp4);
    EXPECT_EQ(spec.vision->kind, "qwen3_vl"); // vision model_type "qwen3_5_moe_vision"
    const LayerGraph g = buildLayerGraph(spec);
    const std::string e = "model.language_model.layers.47.mlp.experts.255.";
    expectTensor(g, e + "gate_proj.weight", { 1024, 1536 }, DType::U8);
    expectTensor(g, e + "down_proj.weight_scale", { 3072, 64 }, DType::F8E4M3);
    expectTensor(g, "mtp.layers.0.mlp.experts.0.gate_proj.weight", { 1024, 3072 }, DType::BF16);
    expectTensor(
        g, "model.language_model.layers.47.self_attn.k_proj.weight", { 512, 3072 }, DType::BF16);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.total, mainText(k122B) + vision(3072) + mtp(k122B));
}

// NVIDIA's Qwen3.6 releases (quant_algo MIXED_PRECISION: FP8 attention/GDN projections, NVFP4
// MLPs or experts and lm_head, per module) are not modelled: an error naming the key and the
// value; with --partial the reading goes on, unquantised, and says so.
TEST(QwenNext, Qwen36MixedPrecisionIsRefusedOrPartial)
{
    for (const char* file :
        { "nvidia--Qwen3.6-27B-NVFP4.json", "nvidia--Qwen3.6-35B-A3B-NVFP4.json" }) {
        const auto path = dataDir() / "configs/frontier-sizes" / file;
        auto refused = readConfigFile(path);
        ASSERT_FALSE(refused.ok()) << file;
        EXPECT_EQ(refused.error().code, ErrorCode::BadInput);
        EXPECT_TRUE(contains(refused.error().message, file)) << refused.error().message;
        EXPECT_TRUE(contains(refused.error().message, "quantization_config.quant_algo"))
            << refused.error().message;
        EXPECT_TRUE(contains(refused.error().message, "\"MIXED_PRECISION\""))
            << refused.error().message;

        ReadOptions options;
        options.partial = true;
        auto partial = readConfigFile(path, options);
        ASSERT_TRUE(partial.ok()) << partial.error().message;
        EXPECT_TRUE(partial->partial);
        EXPECT_FALSE(partial->quantization.has_value());
        ASSERT_EQ(partial->ignored.size(), 2u); // config.json and hf_quant_config.json
        EXPECT_EQ(partial->ignored[0].path, "quantization_config.quant_algo");
        EXPECT_EQ(partial->ignored[1].path, "quantization.quant_algo");
        EXPECT_TRUE(contains(partial->ignored[1].reason, "hf_quant_config.json"));
        // The text and vision are Qwen3.5-27B's / Qwen3.5-35B-A3B's.
        const bool dense = partial->family == Family::Qwen35;
        expectCounts(*partial, dense ? k27B : k35B, true);
    }
}

TEST(QwenNextErrors, UnmodelledValues)
{
    struct Case {
        const char* config;
        std::function<void(nlohmann::json&)> edit;
        const char* expected;
    };
    const Case cases[] = {
        { k397BConfig, [](nlohmann::json& j) { j["text_config"]["attn_output_gate"] = false; },
            "text_config.attn_output_gate (false (q_proj without the output gate)" },
        { k397BConfig,
            [](nlohmann::json& j) { j["text_config"]["mtp_use_dedicated_embeddings"] = true; },
            "text_config.mtp_use_dedicated_embeddings (true is not modelled" },
        { k397BConfig, [](nlohmann::json& j) { j["text_config"]["mlp_only_layers"] = { 3 }; },
            "text_config.mlp_only_layers (a non-empty list is not modelled" },
        { k27BConfig,
            [](nlohmann::json& j) { j["vision_config"]["deepstack_visual_indexes"] = { 8 }; },
            "vision_config.deepstack_visual_indexes" },
        { k27BConfig, [](nlohmann::json& j) { j["vision_config"]["model_type"] = "qwen3_vl"; },
            "'model_type' is \"qwen3_vl\", which Day0 does not model" },
        { k27BConfig, [](nlohmann::json& j) { j["text_config"]["mamba_ssm_dtype"] = "int8"; },
            "'mamba_ssm_dtype' is \"int8\"" },
        { k27BConfig,
            [](nlohmann::json& j) { j["text_config"]["model_type"] = "qwen3_5_moe_text"; },
            "'model_type' is \"qwen3_5_moe_text\", which Day0 does not model (it models "
            "\"qwen3_5_text\")" },
        { k27BConfig, [](nlohmann::json& j) { j["text_config"]["linear_num_value_heads"] = 40; },
            "'linear_num_value_heads' (40) must be a multiple of 'linear_num_key_heads' (16)" },
        { k27BConfig, [](nlohmann::json& j) { j["text_config"]["new_gate_kind"] = "x"; },
            "text_config.new_gate_kind" },
        { kNextConfig, [](nlohmann::json& j) { j.erase("head_dim"); }, "'head_dim' is missing" },
    };
    for (const Case& c : cases) {
        auto r = readEdited(c.config, c.edit);
        ASSERT_FALSE(r.ok()) << c.expected;
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_TRUE(contains(r.error().message, c.expected)) << r.error().message;
        EXPECT_TRUE(contains(r.error().message, ".json")) << r.error().message;
    }
}

TEST(QwenNextErrors, Qwen3NextDenseLayersAndFlatQwen35)
{
    // mlp_only_layers and decoder_sparse_step give Qwen3-Next dense layers of intermediate_size.
    auto dense = readEdited(kNextConfig, [](nlohmann::json& j) {
        j["mlp_only_layers"] = { 0, 5 };
    });
    ASSERT_TRUE(dense.ok()) << dense.error().message;
    EXPECT_EQ(dense->layers[0].ffn, FfnKind::Dense);
    EXPECT_EQ(dense->layers[1].ffn, FfnKind::Moe);
    const LayerGraph g = buildLayerGraph(*dense);
    expectTensor(g, "model.layers.5.mlp.gate_proj.weight", { 5120, 2048 }, DType::BF16);
    EXPECT_EQ(g.findTensor("model.layers.5.mlp.gate.weight"), nullptr);
    EXPECT_EQ(countsOf(*dense).mainModel,
        mainText(kNext80B) - 2 * ffn(kNext80B) + 2 * 3 * std::int64_t(5120 * 2048));

    // A Qwen3.5 config without text_config is not a published layout.
    auto flat = readEdited(k27BConfig, [](nlohmann::json& j) {
        nlohmann::json text = j["text_config"];
        text["model_type"] = "qwen3_5";
        j = text;
    });
    ASSERT_FALSE(flat.ok());
    EXPECT_TRUE(contains(flat.error().message, "without 'text_config'")) << flat.error().message;
}
