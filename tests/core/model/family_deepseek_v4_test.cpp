// DeepSeek-V4 (deepseek_v4): the real configs of DeepSeek-V4-Pro, -Flash, sgl-project's
// -Pro-FP8 and nvidia's -Pro-NVFP4 (tests/data/model/configs/frontier*/), read, counted by hand,
// their tensors against the real V4-Flash index's key patterns (tests/data/model/listings/),
// their KV cache against the model card.

#include "base/file_util.h"
#include "model/cache_footprint.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

const char* const kPro = "configs/frontier/deepseek-ai--DeepSeek-V4-Pro.json";
const char* const kFlash = "configs/frontier-sizes/deepseek-ai--DeepSeek-V4-Flash.json";
const char* const kProFp8 = "configs/frontier-sizes/sgl-project--DeepSeek-V4-Pro-FP8.json";
const char* const kProNvfp4 = "configs/frontier-sizes/nvidia--DeepSeek-V4-Pro-NVFP4.json";

// The Pro config with `key` replaced (a JSON value), read as "v4.json".
Result<ModelSpec> proWith(const std::string& key, const std::string& value)
{
    auto json = readJsonFile(dataDir() / kPro);
    EXPECT_TRUE(json.ok());
    (*json)[key] = nlohmann::json::parse(value);
    return readConfig(*json, "v4.json");
}

// Every layer's KV bytes per sequence of `context` tokens at BF16, split into the KV-dtype terms
// and the fixed-dtype (F32 compressor) states.
std::pair<double, double> kvAndStates(const ModelSpec& spec, double context)
{
    double kv = 0.0;
    double states = 0.0;
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        for (const auto& term : layerCache(spec, spec.layers[i], std::int64_t(i))) {
            (term.dtype ? states : kv) += cacheBytes({ term }, context, 1, 2.0);
        }
    }
    return { kv, states };
}

// Hand count of a DeepSeek-V4 model from its config numbers (model.py's modules; FP4 experts
// counted unpacked; scales are not parameters).
struct V4Dims {
    std::int64_t V, H, L, heads, d, qr, g, dg, hI, dI, E, I, K, hc;
};

constexpr std::int64_t attentionCore(const V4Dims& x)
{
    return x.heads + x.qr * x.H + x.qr + x.heads * x.d * x.qr + x.d * x.H + x.d
        + x.g * x.dg * (x.heads * x.d / x.g) + x.H * x.g * x.dg;
}
constexpr std::int64_t hcaCompressor(const V4Dims& x) { return 128 * x.d + 2 * x.d * x.H + x.d; }
constexpr std::int64_t csaCompressor(const V4Dims& x)
{
    return 4 * 2 * x.d + 2 * 2 * x.d * x.H + x.d;
}
constexpr std::int64_t indexer(const V4Dims& x)
{
    return x.hI * x.dI * x.qr + x.hI * x.H + (4 * 2 * x.dI + 2 * 2 * x.dI * x.H + x.dI);
}
constexpr std::int64_t hyper(const V4Dims& x)
{
    const std::int64_t mix = (2 + x.hc) * x.hc;
    return 2 * (mix * x.hc * x.H + mix + 3);
}
constexpr std::int64_t experts(const V4Dims& x, std::int64_t n) { return n * 3 * x.I * x.H; }
// A block with gate bias (not hash-routed) and no compressor, with `n` routed experts.
constexpr std::int64_t swaBlock(const V4Dims& x, std::int64_t n)
{
    return attentionCore(x) + 2 * x.H + hyper(x) + x.E * x.H + x.E + experts(x, n) + 3 * x.I * x.H;
}
constexpr std::int64_t hashDelta(const V4Dims& x) { return x.V * x.K - x.E; } // tid2eid for bias
constexpr std::int64_t top(const V4Dims& x)
{
    return 2 * x.V * x.H + x.H + x.hc * x.hc * x.H + x.hc + 1; // embed, head, norm, hc_head
}
constexpr std::int64_t mtpBlock(const V4Dims& x)
{
    return swaBlock(x, x.E) + 2 * x.H * x.H + 3 * x.H + x.hc * x.hc * x.H + x.hc + 1;
}

constexpr V4Dims kProDims { 129280, 7168, 61, 128, 512, 1536, 16, 1024, 64, 128, 384, 3072, 6, 4 };
constexpr V4Dims kFlashDims { 129280, 4096, 43, 64, 512, 1024, 8, 1024, 64, 128, 256, 2048, 6, 4 };

} // namespace

// DeepSeek-V4-Pro: 31 HCA blocks {0, 1, 3, …, 59}, 30 CSA blocks {2, 4, …, 60}, blocks 0–2
// hash-routed, one SWA MTP block. Published (model card, huggingface.co/deepseek-ai/
// DeepSeek-V4-Pro): "DeepSeek-V4-Pro with 1.6T parameters (49B activated)". They reproduce with
// MTP excluded and, for the active count, the input embedding excluded and the head included
// (48.85B → 49B; counting the embedding too gives 49.78B). tid2eid is in the total, not active.
TEST(DeepseekV4, ProCountsByHand)
{
    constexpr V4Dims x = kProDims;
    static_assert(attentionCore(x) == 299'894'912);
    static_assert(hcaCompressor(x) == 7'406'080);
    static_assert(csaCompressor(x) == 14'684'672);
    static_assert(indexer(x) == 16'712'832);
    constexpr std::int64_t hca = swaBlock(x, x.E) + hcaCompressor(x);
    constexpr std::int64_t csa = swaBlock(x, x.E) + csaCompressor(x) + indexer(x);
    static_assert(csa == 25'768'646'838 && hca == 25'744'655'414);
    constexpr std::int64_t total = 31 * hca + 30 * csa + 3 * hashDelta(x) + top(x);
    static_assert(total == 1'572'999'528'803);
    constexpr std::int64_t unused = x.L * experts(x, x.E - x.K) + 3 * x.V * x.K;
    constexpr std::int64_t active = total - unused;
    static_assert(active - x.V * x.H == 48'852'402'019);
    static_assert(mtpBlock(x) == 25'840'145'979);

    const LayerGraph g = buildLayerGraph(fromData(kPro));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, total);
    EXPECT_EQ(c.mtp, mtpBlock(x));
    EXPECT_EQ(c.total, total + mtpBlock(x));
    EXPECT_EQ(c.active, active);
    EXPECT_EQ(c.embedding, x.V * x.H);
    EXPECT_EQ(c.lmHead, x.V * x.H);
    EXPECT_EQ(c.activeWithoutEmbedding, 48'852'402'019);
    expectNear(c.mainModel, 1.6e12, 0.03, "Pro total");
    expectNear(c.activeWithoutEmbedding, 49e9, 0.03, "Pro active");
    // Tensors: 145,116 (derived: no Pro index seen); bytes of the FP8/FP4 checkpoint.
    EXPECT_EQ(c.tensors, 145'116);
    EXPECT_EQ(totalBytes(g), 864'704'792'696);
}

// DeepSeek-V4-Flash: SWA {0, 1}, CSA {2, 4, …, 42} (21), HCA {3, 5, …, 41} (20). Published (model
// card): "DeepSeek-V4-Flash with 284B parameters (13B activated)", same conventions as Pro.
TEST(DeepseekV4, FlashCountsByHand)
{
    constexpr V4Dims x = kFlashDims;
    constexpr std::int64_t swa = swaBlock(x, x.E);
    constexpr std::int64_t hca = swa + hcaCompressor(x);
    constexpr std::int64_t csa = swa + csaCompressor(x) + indexer(x);
    constexpr std::int64_t total = 2 * swa + 21 * csa + 20 * hca + 3 * hashDelta(x) + top(x);
    static_assert(total == 284'334'567'511);
    constexpr std::int64_t active = total - x.L * experts(x, x.E - x.K) - 3 * x.V * x.K;
    static_assert(active - x.V * x.H == 13'270'101'591);
    static_assert(mtpBlock(x) == 6'610'048'891);

    const LayerGraph g = buildLayerGraph(fromData(kFlash));
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, total);
    EXPECT_EQ(c.mtp, mtpBlock(x));
    EXPECT_EQ(c.activeWithoutEmbedding, 13'270'101'591);
    expectNear(c.mainModel, 284e9, 0.005, "Flash total");
    expectNear(c.activeWithoutEmbedding, 13e9, 0.03, "Flash active");
    // The real index has 69,187 keys
    // (tests/data/model/listings/deepseek-v4-flash-key-patterns.txt).
    EXPECT_EQ(c.tensors, 69'187);
    EXPECT_EQ(totalBytes(g), 159'609'485'896);
}

TEST(DeepseekV4, ReadsCompressedAttentionHyperConnectionsAndHashRouting)
{
    const ModelSpec s = fromData(kPro);
    EXPECT_EQ(s.family, Family::DeepseekV4);
    EXPECT_EQ(s.attention, AttentionKind::MQA);
    EXPECT_EQ(s.headDim, 512);
    EXPECT_TRUE(s.attentionSinks);
    EXPECT_DOUBLE_EQ(s.swigluLimit, 10.0);
    EXPECT_DOUBLE_EQ(s.partialRotaryFactor, 64.0 / 512.0);
    EXPECT_EQ(s.layout.textPrefix, "");
    EXPECT_EQ(s.layout.lmHead, "head");
    ASSERT_TRUE(s.compressedAttention && s.hyperConnections && s.moe);
    EXPECT_EQ(s.compressedAttention->qLoraRank, 1536);
    EXPECT_EQ(s.compressedAttention->ropeDim, 64);
    EXPECT_EQ(s.compressedAttention->oGroups, 16);
    EXPECT_EQ(s.compressedAttention->oLoraRank, 1024);
    EXPECT_DOUBLE_EQ(s.compressedAttention->compressRopeTheta, 160000.0);
    EXPECT_EQ(s.compressedAttention->indexerHeads, 64);
    EXPECT_EQ(s.compressedAttention->indexerHeadDim, 128);
    EXPECT_EQ(s.compressedAttention->indexerTopK, 1024);
    EXPECT_EQ(s.hyperConnections->streams, 4);
    EXPECT_EQ(s.hyperConnections->sinkhornIters, 20);
    EXPECT_DOUBLE_EQ(s.hyperConnections->eps, 1e-6);
    EXPECT_EQ(s.moe->scoring, RouterScoring::SqrtSoftplus);
    EXPECT_EQ(s.moe->numHashLayers, 3);
    EXPECT_EQ(s.moe->sharedIntermediate, 3072);
    EXPECT_DOUBLE_EQ(s.moe->routedScalingFactor, 2.5);
    EXPECT_TRUE(s.warnings.empty());

    ASSERT_EQ(s.layers.size(), 61u);
    ASSERT_EQ(s.mtpLayers.size(), 1u);
    int hca = 0;
    int csa = 0;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const LayerSpec& l = s.layers[i];
        EXPECT_EQ(l.mixer, MixerKind::Compressed) << i;
        EXPECT_EQ(l.ffn, FfnKind::Moe) << i;
        EXPECT_EQ(l.slidingWindow, 128) << i;
        EXPECT_EQ(l.hashRouted, i < 3) << i;
        const std::int64_t expected = (i < 2 || i % 2 == 1) ? 128 : 4;
        EXPECT_EQ(l.compressRatio, expected) << i;
        (l.compressRatio == 128 ? hca : csa) += 1;
    }
    EXPECT_EQ(hca, 31);
    EXPECT_EQ(csa, 30);
    // The last compress_ratios entry is the MTP block's: sliding window only, never hashed.
    EXPECT_EQ(s.mtpLayers[0].mixer, MixerKind::Compressed);
    EXPECT_EQ(s.mtpLayers[0].compressRatio, 0);
    EXPECT_EQ(s.mtpLayers[0].slidingWindow, 128);
    EXPECT_FALSE(s.mtpLayers[0].hashRouted);

    const ModelSpec f = fromData(kFlash);
    EXPECT_EQ(f.layers[0].compressRatio, 0);
    EXPECT_EQ(f.layers[1].compressRatio, 0);
    EXPECT_EQ(f.layers[2].compressRatio, 4);
    EXPECT_EQ(f.layers[41].compressRatio, 128);
    EXPECT_EQ(f.layers[42].compressRatio, 4);
    EXPECT_EQ(f.mtpLayers[0].compressRatio, 0);
}

// Tensor names, shapes and dtypes of each block kind, as stored (research note A3).
TEST(DeepseekV4, ProTensorsPerBlockKind)
{
    const LayerGraph g = buildLayerGraph(fromData(kPro));
    const DType f8 = DType::F8E4M3;
    const DType e8 = DType::F8E8M0;
    // Top level.
    expectTensor(g, "embed.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "head.weight", { 129280, 7168 }, DType::BF16);
    expectTensor(g, "norm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "hc_head_fn", { 4, 28672 }, DType::F32);
    expectTensor(g, "hc_head_base", { 4 }, DType::F32);
    expectTensor(g, "hc_head_scale", { 1 }, DType::F32);
    // Every block.
    expectTensor(g, "layers.0.attn.attn_sink", { 128 }, DType::F32);
    expectTensor(g, "layers.0.attn.wq_a.weight", { 1536, 7168 }, f8);
    expectTensor(g, "layers.0.attn.wq_a.scale", { 12, 56 }, e8);
    expectTensor(g, "layers.0.attn.q_norm.weight", { 1536 }, DType::BF16);
    expectTensor(g, "layers.0.attn.wq_b.scale", { 512, 12 }, e8);
    expectTensor(g, "layers.0.attn.wkv.weight", { 512, 7168 }, f8);
    expectTensor(g, "layers.0.attn.wo_a.weight", { 16384, 4096 }, f8);
    expectTensor(g, "layers.0.attn.wo_a.scale", { 128, 32 }, e8);
    expectTensor(g, "layers.0.attn.wo_b.scale", { 56, 128 }, e8);
    expectTensor(g, "layers.0.hc_attn_fn", { 24, 28672 }, DType::F32);
    expectTensor(g, "layers.0.hc_ffn_base", { 24 }, DType::F32);
    expectTensor(g, "layers.0.hc_ffn_scale", { 3 }, DType::F32);
    expectTensor(g, "layers.5.ffn.gate.weight", { 384, 7168 }, DType::BF16);
    expectTensor(g, "layers.5.ffn.gate.bias", { 384 }, DType::F32);
    expectTensor(g, "layers.5.ffn.experts.383.w1.weight", { 3072, 3584 }, DType::I8);
    expectTensor(g, "layers.5.ffn.experts.383.w1.scale", { 3072, 224 }, e8);
    expectTensor(g, "layers.5.ffn.experts.0.w2.weight", { 7168, 1536 }, DType::I8);
    expectTensor(g, "layers.5.ffn.experts.0.w2.scale", { 7168, 96 }, e8);
    expectTensor(g, "layers.5.ffn.shared_experts.w1.scale", { 24, 56 }, e8);
    expectTensor(g, "layers.5.ffn.shared_experts.w2.weight", { 7168, 3072 }, f8);
    // Hash-routed blocks: tid2eid instead of the bias.
    expectTensor(g, "layers.2.ffn.gate.tid2eid", { 129280, 6 }, DType::I64);
    EXPECT_EQ(g.findTensor("layers.2.ffn.gate.bias"), nullptr);
    EXPECT_EQ(g.findTensor("layers.3.ffn.gate.tid2eid"), nullptr);
    // HCA block: one non-overlapping compressor, BF16 projections without scales.
    expectTensor(g, "layers.1.attn.compressor.ape", { 128, 512 }, DType::F32);
    expectTensor(g, "layers.1.attn.compressor.wkv.weight", { 512, 7168 }, DType::BF16);
    EXPECT_EQ(g.findTensor("layers.1.attn.compressor.wkv.scale"), nullptr);
    EXPECT_EQ(g.findTensor("layers.1.attn.indexer.wq_b.weight"), nullptr);
    // CSA block: overlapping compressor and the indexer.
    expectTensor(g, "layers.2.attn.compressor.ape", { 4, 1024 }, DType::F32);
    expectTensor(g, "layers.2.attn.compressor.wgate.weight", { 1024, 7168 }, DType::BF16);
    expectTensor(g, "layers.2.attn.compressor.norm.weight", { 512 }, DType::BF16);
    expectTensor(g, "layers.2.attn.indexer.wq_b.weight", { 8192, 1536 }, f8);
    expectTensor(g, "layers.2.attn.indexer.wq_b.scale", { 64, 12 }, e8);
    expectTensor(g, "layers.2.attn.indexer.weights_proj.weight", { 64, 7168 }, DType::BF16);
    expectTensor(g, "layers.2.attn.indexer.compressor.ape", { 4, 256 }, DType::F32);
    expectTensor(g, "layers.2.attn.indexer.compressor.wkv.weight", { 256, 7168 }, DType::BF16);
    expectTensor(g, "layers.2.attn.indexer.compressor.norm.weight", { 128 }, DType::BF16);
    // MTP block: SWA, gate bias, e_proj/h_proj FP8, own norms and hc head; no embed or head.
    expectTensor(g, "mtp.0.e_proj.weight", { 7168, 7168 }, f8);
    expectTensor(g, "mtp.0.h_proj.scale", { 56, 56 }, e8);
    expectTensor(g, "mtp.0.enorm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "mtp.0.norm.weight", { 7168 }, DType::BF16);
    expectTensor(g, "mtp.0.hc_head_fn", { 4, 28672 }, DType::F32);
    expectTensor(g, "mtp.0.ffn.gate.bias", { 384 }, DType::F32);
    expectTensor(g, "mtp.0.ffn.experts.7.w3.weight", { 3072, 3584 }, DType::I8);
    EXPECT_EQ(g.findTensor("mtp.0.attn.compressor.ape"), nullptr);
    EXPECT_EQ(g.findTensor("mtp.0.embed.weight"), nullptr);

    // Roles and components the planner and the breakdowns use.
    EXPECT_EQ(g.findTensor("layers.0.hc_attn_fn")->component, Component::Residual);
    EXPECT_EQ(g.findTensor("layers.2.ffn.gate.tid2eid")->component, Component::Router);
    EXPECT_TRUE(g.findTensor("layers.2.ffn.gate.tid2eid")->lookupTable);
    EXPECT_EQ(g.findTensor("layers.0.attn.wq_b.weight")->role, ParallelRole::ColumnParallel);
    EXPECT_EQ(g.findTensor("layers.0.attn.wo_b.weight")->role, ParallelRole::RowParallel);
    EXPECT_EQ(g.findTensor("layers.0.ffn.experts.1.w2.weight")->packFactor, 2);
    EXPECT_EQ(g.findTensor("mtp.0.ffn.experts.1.w2.weight")->component, Component::Mtp);
    const Block* mtp = g.findBlock("mtp.0");
    ASSERT_NE(mtp, nullptr);
    EXPECT_EQ(mtp->kind, BlockKind::Mtp);
    EXPECT_EQ(mtp->layer, 61);
}

// The name set of V4-Flash, digits folded to 0 as the pattern file does, equals the 82 real
// patterns of deepseek-ai/DeepSeek-V4-Flash's index.
TEST(DeepseekV4, FlashNamesMatchTheRealIndexPatterns)
{
    std::set<std::string> real;
    std::ifstream in(dataDir() / "listings/deepseek-v4-flash-key-patterns.txt");
    ASSERT_TRUE(in.good());
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] != '#') {
            real.insert(line);
        }
    }
    ASSERT_EQ(real.size(), 82u);
    std::set<std::string> ours;
    const std::regex digits("[0-9]+");
    for (const auto& name : tensorNames(buildLayerGraph(fromData(kFlash)))) {
        std::string folded = std::regex_replace(name, digits, "0");
        // The file keeps "tid2eid" as written.
        const auto at = folded.find("tid0eid");
        if (at != std::string::npos) {
            folded.replace(at, 7, "tid2eid");
        }
        ours.insert(folded);
    }
    EXPECT_EQ(ours, real);
}

// KV per sequence (research note A6; model.py's layout in BF16): every block keeps a window of
// 128 K=V entries of 512; HCA adds one per 128 tokens, CSA one per 4 plus the indexer's 128-wide
// key per 4. The card: "9.62 GiB/sequence (in bf16)" at 1M tokens for Pro.
TEST(DeepseekV4, KvCacheReproducesTheModelCard)
{
    const ModelSpec pro = fromData(kPro);
    constexpr double kMillion = 1'048'576.0;
    constexpr std::int64_t window = 61LL * 128 * 512 * 2;
    constexpr std::int64_t hca = 31LL * (1'048'576 / 128) * 512 * 2;
    constexpr std::int64_t csa = 30LL * (1'048'576 / 4) * (512 + 128) * 2;
    static_assert(window + hca + csa == 10'334'371'840);
    const auto [kv, states] = kvAndStates(pro, kMillion);
    EXPECT_EQ(std::int64_t(kv), 10'334'371'840);
    EXPECT_NEAR(kv / double(1 << 30), 9.62, 0.005);
    // The F32 compressor states of model.py (kv_state + score_state), which the card does not
    // count: HCA 2·128·512·4, CSA 2·8·1024·4 plus its indexer's 2·8·256·4.
    EXPECT_EQ(std::int64_t(states), 31 * 524'288 + 30 * (65'536 + 16'384));
    // At T = 128: the windows plus one HCA entry and 32 CSA entries with indexer keys per
    // block (HCA 4,094,976 + CSA 4,915,200 + indexer 245,760).
    EXPECT_EQ(std::int64_t(kvAndStates(pro, 128.0).first), 4'094'976 + 4'915'200 + 245'760);

    // Growth per token beyond the windows: Pro 30·320 + 31·8, Flash 21·320 + 20·8.
    const auto proKinds = cacheByKind(pro, kMillion, 2.0);
    ASSERT_EQ(proKinds.size(), 1u);
    EXPECT_EQ(proKinds[0].kind, MixerKind::Compressed);
    EXPECT_EQ(proKinds[0].layers, 61);
    EXPECT_DOUBLE_EQ(proKinds[0].bytesPerToken, 9'848.0);
    const auto flashKinds = cacheByKind(fromData(kFlash), kMillion, 2.0);
    ASSERT_EQ(flashKinds.size(), 1u);
    EXPECT_DOUBLE_EQ(flashKinds[0].bytesPerToken, 6'880.0);

    // Per block kind, per token: SWA keeps only its window.
    const auto perToken = [&](std::int64_t layer) {
        double bytes = 0.0;
        for (const auto& t : layerCache(pro, pro.layers[std::size_t(layer)], layer)) {
            bytes += t.window == 0 ? t.elementsPerToken * 2.0 : 0.0;
        }
        return bytes;
    };
    EXPECT_DOUBLE_EQ(perToken(1), 8.0); // HCA
    EXPECT_DOUBLE_EQ(perToken(2), 320.0); // CSA
    EXPECT_EQ(layerCache(pro, pro.mtpLayers[0], 61).size(), 1u); // SWA: the window only
}

// sgl-project's FP8 re-pack: model_type "deepseek_ref", no expert_dtype → FP8 experts with
// E8M0 block scales (inferred: no listing seen). Same parameters as the original.
TEST(DeepseekV4, SglProjectFp8HasFp8Experts)
{
    const ModelSpec s = fromData(kProFp8);
    EXPECT_EQ(s.family, Family::DeepseekV4);
    EXPECT_EQ(s.modelType, "deepseek_ref");
    ASSERT_TRUE(s.quantization);
    EXPECT_FALSE(s.quantization->expertScheme.has_value());
    bool namesArchitecture = false;
    for (const auto& w : s.warnings) {
        namesArchitecture = namesArchitecture || contains(w, "DeepseekV4ForCausalLM");
    }
    EXPECT_TRUE(namesArchitecture);
    const LayerGraph g = buildLayerGraph(s);
    expectTensor(g, "layers.4.ffn.experts.9.w1.weight", { 3072, 7168 }, DType::F8E4M3);
    expectTensor(g, "layers.4.ffn.experts.9.w1.scale", { 24, 56 }, DType::F8E8M0);
    expectTensor(g, "layers.4.ffn.experts.9.w2.scale", { 56, 24 }, DType::F8E8M0);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, 1'572'999'528'803);
    EXPECT_EQ(c.tensors, 145'116);
    EXPECT_EQ(totalBytes(g), 1'602'033'600'632); // derived
}

// nvidia's NVFP4: ModelOpt MIXED_PRECISION over the FP8 checkpoint; the main blocks' experts
// become NVFP4 (quantized_layers), attention, shared experts and the MTP block keep the original
// format (ignore), so the MTP experts stay FP4.
TEST(DeepseekV4, NvidiaNvfp4ReQuantisesMainExpertsOnly)
{
    const ModelSpec s = fromData(kProNvfp4);
    ASSERT_TRUE(s.quantization);
    const QuantizationSpec& q = *s.quantization;
    EXPECT_EQ(q.scheme, QuantScheme::BlockFp8);
    EXPECT_EQ(q.expertScheme, QuantScheme::Fp4Block);
    EXPECT_EQ(q.mixedScheme, QuantScheme::Nvfp4);
    EXPECT_EQ(q.mixedGroupSize, 16);
    EXPECT_EQ(q.mixedModules.size(), 61u);
    EXPECT_TRUE(q.excludePatterns.empty()); // "ignore" leaves modules FP8, not BF16
    const LayerGraph g = buildLayerGraph(s);
    expectTensor(g, "layers.0.ffn.experts.0.w1.weight", { 3072, 3584 }, DType::U8);
    expectTensor(g, "layers.0.ffn.experts.0.w1.weight_scale", { 3072, 448 }, DType::F8E4M3);
    expectTensor(g, "layers.60.ffn.experts.383.w2.weight_scale", { 7168, 192 }, DType::F8E4M3);
    expectTensor(g, "layers.60.ffn.experts.383.w2.weight_scale_2", {}, DType::F32);
    expectTensor(g, "layers.60.ffn.experts.383.w2.input_scale", {}, DType::F32);
    EXPECT_EQ(g.findTensor("layers.0.ffn.experts.0.w1.scale"), nullptr);
    expectTensor(g, "mtp.0.ffn.experts.0.w1.weight", { 3072, 3584 }, DType::I8);
    expectTensor(g, "mtp.0.ffn.experts.0.w1.scale", { 3072, 224 }, DType::F8E8M0);
    expectTensor(g, "layers.0.attn.wq_a.weight", { 1536, 7168 }, DType::F8E4M3);
    expectTensor(g, "layers.0.attn.wq_a.scale", { 12, 56 }, DType::F8E8M0);
    expectTensor(g, "layers.0.ffn.shared_experts.w1.scale", { 24, 56 }, DType::F8E8M0);
    expectTensor(g, "head.weight", { 129280, 7168 }, DType::BF16);
    const ParameterCounts c = g.countParameters();
    EXPECT_EQ(c.mainModel, 1'572'999'528'803);
    EXPECT_EQ(c.activeWithoutEmbedding, 48'852'402'019);
    // Derived (research note A4): 145,116 + 61·384·3·2 tensors.
    EXPECT_EQ(c.tensors, 285'660);
    EXPECT_EQ(totalBytes(g), 913'061'485'688);
}

TEST(DeepseekV4Errors, BadInputNamesFileKeyAndValue)
{
    struct Case {
        const char* key;
        const char* value;
        const char* expected;
    };
    const Case cases[] = {
        { "compress_ratios", "[128, 4, 0]",
            "v4.json: 'compress_ratios' has 3 entries but the model has 62 blocks" },
        { "num_key_value_heads", "8", "'num_key_value_heads' is 8" },
        { "expert_dtype", "\"int4\"", "'expert_dtype' is \"int4\", which Day0 does not model" },
        { "n_shared_experts", "2", "'n_shared_experts' is 2" },
        { "o_groups", "5", "'o_groups' (5) must divide" },
        { "num_hash_layers", "70", "'num_hash_layers' (70) must be between" },
        { "scoring_func", "\"tanh\"", "'scoring_func' is \"tanh\"" },
        { "quantization_config",
            R"({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})",
            "'scale_fmt' is \"\"" },
    };
    for (const auto& c : cases) {
        auto r = proWith(c.key, c.value);
        ASSERT_FALSE(r.ok()) << c.key;
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
        EXPECT_TRUE(contains(r.error().message, c.expected)) << c.key << ": " << r.error().message;
    }
    // A negative ratio is refused, named; another positive ratio than 4
    // is a heavily compressed one (model.py; `day0 shrink` scales 128 down to 8).
    std::string ratios = "[";
    for (int i = 0; i < 62; ++i) {
        ratios += std::string(i ? ", " : "") + (i == 5 ? "-1" : "128");
    }
    auto bad = proWith("compress_ratios", ratios + "]");
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(contains(bad.error().message,
        "v4.json: 'compress_ratios' must hold non-negative integers, found -1"))
        << bad.error().message;
    auto eight
        = proWith("compress_ratios", std::string(ratios).replace(ratios.find("-1"), 2, "8") + "]");
    ASSERT_TRUE(eight.ok()) << eight.error().message;
    EXPECT_EQ(eight->layers[5].compressRatio, 8);
    // A key the reader does not know is refused by the audit, named.
    auto unknown = proWith("compress_rates", R"({"csa": 4, "hca": 128})");
    ASSERT_FALSE(unknown.ok());
    EXPECT_TRUE(contains(unknown.error().message, "compress_rates")) << unknown.error().message;
}

// The NVFP4 release describes its mixed precision twice (config.json and hf_quant_config.json):
// the two must name the same modules, and no module may be both re-quantised and ignored.
TEST(DeepseekV4Errors, MixedPrecisionMustAgree)
{
    auto config = readJsonFile(dataDir() / kProNvfp4);
    auto hfQuant = readJsonFile(dataDir()
        / "configs/frontier-sizes/"
          "nvidia--DeepSeek-V4-Pro-NVFP4.hf_quant_config.json");
    ASSERT_TRUE(config.ok() && hfQuant.ok());
    ReadOptions options;
    options.hfQuantConfig = &*hfQuant;
    options.hfQuantOrigin = "hf_quant_config.json";
    ASSERT_TRUE(readConfig(*config, "v4.json", options).ok());

    nlohmann::json fewer = *hfQuant;
    fewer["quantization"]["quantized_layers"].erase("layers.7.ffn.experts");
    options.hfQuantConfig = &fewer;
    auto r = readConfig(*config, "v4.json", options);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message,
        "hf_quant_config.json (quantization): "
        "'quantized_layers' lists 60 modules"))
        << r.error().message;

    nlohmann::json both = *config;
    both["quantization_config"]["quantized_layers"]["mtp.0.ffn.experts"]
        = { { "quant_algo", "NVFP4" }, { "group_size", 16 } };
    r = readConfig(both, "v4.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message,
        "'mtp.0.ffn.experts', which the ignore entry "
        "\"mtp.*\" leaves unconverted"))
        << r.error().message;
}
