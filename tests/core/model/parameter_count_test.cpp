// Parameter counts: exact against hand derivations from the config numbers, and against the
// publishers' rounded figures (sources in shared/refdata/configs/PARAMS.md, quoted per test):
// ±0.5% where PARAMS.md gives an exact computed value or a precise figure, ±3% against rounded
// marketing numbers.

#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace day0;
using namespace day0::model;
using namespace day0::model::test;

namespace {

ParameterCounts countsOf(const ModelSpec& spec) { return buildLayerGraph(spec).countParameters(); }


std::int64_t componentTotal(const ParameterCounts& c, Component component)
{
    for (const auto& entry : c.byComponent) {
        if (entry.component == component) {
            return entry.total;
        }
    }
    return 0;
}

} // namespace

// Llama-3.1-8B by hand: V=128256, H=4096, L=32, 32 heads of 128, 8 KV heads, I=14336, untied.
TEST(ParameterCount, Llama31_8BByHand)
{
    constexpr std::int64_t V = 128256, H = 4096, L = 32, D = 128, nH = 32, nKV = 8, I = 14336;
    constexpr std::int64_t attention = H * (nH * D) + 2 * H * (nKV * D) + (nH * D) * H;
    constexpr std::int64_t mlp = 3 * H * I;
    constexpr std::int64_t norms = 2 * H;
    constexpr std::int64_t total = V * H + L * (attention + mlp + norms) + H + V * H;
    static_assert(total == 8'030'261'248);

    const ParameterCounts c = countsOf(bundled("llama-3.1-8b"));
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.active, total);
    EXPECT_EQ(c.embedding, V * H);
    EXPECT_EQ(c.lmHead, V * H);
    EXPECT_EQ(c.activeWithoutEmbedding, total - V * H);
    EXPECT_EQ(c.mainModel, total);
    EXPECT_EQ(c.mtp, 0);
    EXPECT_EQ(c.vision, 0);
    EXPECT_EQ(c.bytes, 2 * total);
    EXPECT_EQ(componentTotal(c, Component::Attention), L * attention);
    EXPECT_EQ(componentTotal(c, Component::DenseMlp), L * mlp);
    EXPECT_EQ(componentTotal(c, Component::Norm), L * norms + H);
}

// Mixtral-8x7B by hand: 8 experts of width 14336, top-2, router [8, H], V=32000.
TEST(ParameterCount, Mixtral8x7BByHand)
{
    constexpr std::int64_t V = 32000, H = 4096, L = 32, D = 128, nH = 32, nKV = 8, I = 14336;
    constexpr std::int64_t E = 8, k = 2;
    constexpr std::int64_t attention = H * (nH * D) + 2 * H * (nKV * D) + (nH * D) * H;
    constexpr std::int64_t expert = 3 * H * I;
    constexpr std::int64_t router = E * H;
    constexpr std::int64_t norms = 2 * H;
    constexpr std::int64_t total = 2 * V * H + H + L * (attention + E * expert + router + norms);
    constexpr std::int64_t active = 2 * V * H + H + L * (attention + k * expert + router + norms);
    static_assert(total == 46'702'792'704);
    static_assert(active == 12'879'925'248);

    const ParameterCounts c = countsOf(bundled("mixtral-8x7b"));
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.active, active);
    EXPECT_EQ(componentTotal(c, Component::RoutedExperts), L * E * expert);
    EXPECT_EQ(componentTotal(c, Component::Router), L * router);
}

// DeepSeek-V3 by hand from its config: H=7168, V=129280, 61 layers (first 3 dense, I=18432),
// MLA (q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, 128 heads), 256 routed experts of
// width 2048 (top-8) + 1 shared, router weight + e_score_correction_bias, 1 MTP layer.
TEST(ParameterCount, DeepseekV3ByHand)
{
    constexpr std::int64_t V = 129280, H = 7168, L = 61, dense = 3, nH = 128;
    constexpr std::int64_t qLora = 1536, kvLora = 512, nope = 128, rope = 64, v = 128;
    constexpr std::int64_t I = 18432, Ie = 2048, E = 256, k = 8, shared = 1;
    constexpr std::int64_t attention = qLora * H + qLora + nH * (nope + rope) * qLora
        + (kvLora + rope) * H + kvLora + nH * (nope + v) * kvLora + H * nH * v;
    constexpr std::int64_t norms = 2 * H;
    constexpr std::int64_t denseMlp = 3 * H * I;
    constexpr std::int64_t expert = 3 * H * Ie;
    constexpr std::int64_t router = E * H + E;
    constexpr std::int64_t moeLayer = E * expert + shared * expert + router;
    constexpr std::int64_t moeActive = k * expert + shared * expert + router;
    constexpr std::int64_t main
        = V * H + H + V * H + L * (attention + norms) + dense * denseMlp + (L - dense) * moeLayer;
    constexpr std::int64_t active
        = V * H + H + V * H + L * (attention + norms) + dense * denseMlp + (L - dense) * moeActive;
    // MTP: own embedding and head copies, enorm, hnorm, eh_proj [H, 2H], shared_head.norm, and a
    // full MoE decoder layer.
    constexpr std::int64_t mtp
        = V * H + 2 * H + H * 2 * H + H + V * H + attention + norms + moeLayer;
    static_assert(main == 671'026'419'200);
    static_assert(active == 37'552'297'472);

    const ParameterCounts c = countsOf(bundled("deepseek-v3"));
    EXPECT_EQ(c.mainModel, main);
    EXPECT_EQ(c.active, active);
    EXPECT_EQ(c.activeWithoutEmbedding, active - V * H);
    EXPECT_EQ(c.mtp, mtp);
    EXPECT_EQ(c.total, main + mtp);
    EXPECT_EQ(c.embedding, V * H);
    EXPECT_EQ(c.lmHead, V * H);

    // Published (PARAMS.md: DeepSeek-V3 README / README_WEIGHTS, arXiv 2412.19437): 671B main
    // model; 685B on HF with the 14B MTP module; MTP "11.5B unique parameters" without the
    // shared 0.9B embedding and 0.9B head; 37B activated, "36.6B (including 0.9B for the output
    // Head)" in the Base README_WEIGHTS, i.e. without the input embedding.
    expectNear(c.mainModel, 671e9, 0.005, "DeepSeek-V3 main model");
    expectNear(c.total, 685e9, 0.03, "DeepSeek-V3 with MTP");
    expectNear(c.mtp - 2 * V * H, 11.5e9, 0.03, "DeepSeek-V3 MTP unique");
    expectNear(c.active, 37e9, 0.03, "DeepSeek-V3 active");
    expectNear(c.activeWithoutEmbedding, 36.6e9, 0.005, "DeepSeek-V3 active without embedding");
}

TEST(ParameterCount, PublishedTotalsAndActives)
{
    // Kimi-K2 (GitHub MoonshotAI/Kimi-K2 README): 1T total (exact count 1.026T), 32B activated.
    const auto kimi = countsOf(bundled("kimi-k2"));
    expectNear(kimi.total, 1026.4e9, 0.005, "Kimi-K2 exact (PARAMS.md computed)");
    expectNear(kimi.total, 1e12, 0.03, "Kimi-K2 1T");
    expectNear(kimi.activeWithoutEmbedding, 32e9, 0.03, "Kimi-K2 32B activated");
    expectNear(kimi.active, 32e9, 0.03, "Kimi-K2 32B activated incl. embedding");
    EXPECT_EQ(kimi.mtp, 0);

    // Llama-3.1-405B (Llama 3 herd paper, arXiv 2407.21783): 405B.
    const auto llama405 = countsOf(bundled("llama-3.1-405b"));
    expectNear(llama405.total, 405e9, 0.005, "Llama-3.1-405B");
    EXPECT_EQ(llama405.active, llama405.total);

    // Qwen3-235B-A22B (HF model card): 235B total, 234B non-embedding, 22B activated.
    const auto qwen235 = countsOf(bundled("qwen3-235b-a22b"));
    expectNear(qwen235.total, 235e9, 0.005, "Qwen3-235B total");
    expectNear(qwen235.total - qwen235.embedding - qwen235.lmHead, 234e9, 0.005,
        "Qwen3-235B non-embedding");
    expectNear(qwen235.active, 22e9, 0.03, "Qwen3-235B activated");

    // Mixtral-8x22B (Mistral AI announcement): 141B total, 39B active.
    const auto mixtral = countsOf(bundled("mixtral-8x22b"));
    expectNear(mixtral.total, 141e9, 0.005, "Mixtral-8x22B total");
    expectNear(mixtral.active, 39e9, 0.005, "Mixtral-8x22B active");

    // Llama-4 (HF blog "Welcome Llama 4 Maverick & Scout"): Maverick ~400B / 17B active, Scout
    // ~109B / 17B; the headline totals include the vision encoder, which the abridged bundled
    // configs do not have (Scout's text tower is 107.8B).
    const auto maverick = countsOf(bundled("llama-4-maverick"));
    expectNear(maverick.total, 400e9, 0.03, "Llama-4-Maverick text tower");
    expectNear(maverick.active, 17e9, 0.03, "Llama-4-Maverick active");
    const auto scout = countsOf(bundled("llama-4-scout"));
    expectNear(scout.total, 109e9, 0.03, "Llama-4-Scout");
    expectNear(scout.active, 17e9, 0.03, "Llama-4-Scout active");

    // GLM-4.5 (zai-org/GLM-4.5 README, arXiv 2508.06471): 355B total, 32B active.
    const auto glm = countsOf(fromData("configs/glm-4.5.json"));
    expectNear(glm.mainModel, 355e9, 0.03, "GLM-4.5 total");
    expectNear(glm.total, 355e9, 0.03, "GLM-4.5 total with MTP");
    expectNear(glm.activeWithoutEmbedding, 32e9, 0.03, "GLM-4.5 active");

    // Qwen1.5-MoE-A2.7B (model card): 14.3B total, 2.7B activated. DeepSeek-V2-Lite (model
    // card): 15.7B total, 2.4B activated.
    const auto qwenMoe = countsOf(fromData("configs/qwen1.5-moe-a2.7b.json"));
    expectNear(qwenMoe.total, 14.3e9, 0.005, "Qwen1.5-MoE total");
    expectNear(qwenMoe.active, 2.7e9, 0.03, "Qwen1.5-MoE active");
    const auto v2lite = countsOf(fromData("configs/deepseek-v2-lite.json"));
    expectNear(v2lite.total, 15.7e9, 0.005, "DeepSeek-V2-Lite total");
    expectNear(v2lite.activeWithoutEmbedding, 2.4e9, 0.03, "DeepSeek-V2-Lite active");

    // Qwen3 dense/MoE model cards: 0.6B (0.44B non-embedding, tied), 8.2B (6.95B), 32.8B
    // (31.2B), 30.5B total / 3.3B activated (29.9B non-embedding).
    const auto q06 = countsOf(bundled("qwen3-0.6b"));
    EXPECT_EQ(q06.lmHead, 0);
    expectNear(q06.total, 0.6e9, 0.03, "Qwen3-0.6B");
    expectNear(q06.total - q06.embedding, 0.44e9, 0.005, "Qwen3-0.6B non-embedding");
    const auto q8 = countsOf(bundled("qwen3-8b"));
    expectNear(q8.total, 8.2e9, 0.005, "Qwen3-8B");
    expectNear(q8.total - q8.embedding - q8.lmHead, 6.95e9, 0.005, "Qwen3-8B non-embedding");
    const auto q32 = countsOf(bundled("qwen3-32b"));
    expectNear(q32.total, 32.8e9, 0.005, "Qwen3-32B");
    const auto q30 = countsOf(bundled("qwen3-30b-a3b"));
    expectNear(q30.total, 30.5e9, 0.005, "Qwen3-30B-A3B");
    expectNear(q30.active, 3.3e9, 0.03, "Qwen3-30B-A3B activated");
}

TEST(ParameterCount, VisionAndMtpAreSeparated)
{
    // Qwen2-VL-7B: the index's total_size (16,582,751,232 B in BF16) holds 8,291,375,616
    // parameters, of which the vision tower is the visual.* part.
    const auto q2 = countsOf(fromData("indexes/qwen2-vl-7b-olmocr/config.json"));
    EXPECT_EQ(q2.total, 8'291'375'616);
    EXPECT_EQ(q2.mainModel + q2.vision, q2.total);
    EXPECT_GT(q2.vision, 600'000'000);
    EXPECT_EQ(componentTotal(q2, Component::Vision), q2.vision);

    const auto vl = countsOf(bundled("qwen3-vl-235b-a22b"));
    const auto text = countsOf(bundled("qwen3-235b-a22b"));
    EXPECT_EQ(vl.mainModel, text.mainModel) << "same text tower as Qwen3-235B-A22B";
    EXPECT_EQ(vl.active, text.active);
    EXPECT_GT(vl.vision, 0);

    // Kimi-K2.5: the text tower is Kimi-K2's; INT4 routed experts count their logical weights.
    const auto k25 = countsOf(bundled("kimi-k2.5"));
    const auto k2 = countsOf(bundled("kimi-k2"));
    EXPECT_EQ(k25.mainModel, k2.mainModel);
    EXPECT_EQ(k25.active, k2.active);
    EXPECT_GT(k25.vision, 400'000'000);
    EXPECT_LT(k25.bytes, k2.bytes * 6 / 10) << "INT4 experts store about half the FP8 bytes";
}

TEST(ParameterCount, EveryBundledConfigCountsAndSummariesAgree)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    for (const auto& model : bundledModels()) {
        const ModelSpec spec = bundled(model.name);
        const LayerGraph g = buildLayerGraph(spec);
        const ParameterCounts c = g.countParameters();
        SCOPED_TRACE(model.name);
        EXPECT_GT(c.total, 0);
        EXPECT_GT(c.active, 0);
        EXPECT_LE(c.active, c.mainModel);
        EXPECT_EQ(c.mainModel, c.total - c.mtp - c.vision);
        EXPECT_EQ(c.activeWithoutEmbedding, c.active - c.embedding);
        EXPECT_EQ(c.lmHead == 0, spec.tieEmbeddings);
        if (!spec.moe) {
            EXPECT_EQ(c.active, c.mainModel);
        }

        std::int64_t byComponent = 0;
        for (const auto& entry : c.byComponent) {
            byComponent += entry.total;
            EXPECT_LE(entry.active, entry.total);
        }
        EXPECT_EQ(byComponent, c.total);

        // The per-block summaries the planner uses add up to the same figures.
        ASSERT_EQ(g.summaries.size(), g.blocks.size());
        TensorTally sum;
        std::int64_t active = 0;
        for (const auto& s : g.summaries) {
            sum += s.total;
            TensorTally parts = s.experts;
            for (const auto& role : s.byRole) {
                parts += role;
            }
            EXPECT_EQ(parts.params, s.total.params);
            EXPECT_EQ(parts.bytes, s.total.bytes);
            if (s.kind != BlockKind::Mtp && s.kind != BlockKind::VisionBlock
                && s.kind != BlockKind::VisionMerger && s.kind != BlockKind::VisionPatchEmbed) {
                active += s.activeParams;
            }
        }
        EXPECT_EQ(sum.params, c.total);
        EXPECT_EQ(sum.bytes, c.bytes);
        EXPECT_EQ(sum.tensors, c.tensors);
        EXPECT_EQ(active, c.active);
    }
}

TEST(ParameterCount, SummaryOfAMoeLayer)
{
    const LayerGraph g = buildLayerGraph(bundled("deepseek-v3"));
    const BlockSummary* layer = nullptr;
    for (const auto& s : g.summaries) {
        if (s.kind == BlockKind::Decoder && s.layer == 10) {
            layer = &s;
        }
    }
    ASSERT_NE(layer, nullptr);
    EXPECT_TRUE(layer->moe);
    EXPECT_EQ(layer->numExperts, 256);
    constexpr std::int64_t expert = 3 * 7168 * 2048;
    EXPECT_EQ(layer->experts.params, 256 * expert);
    // FP8 experts: one byte per weight plus F32 scales of [16, 56] or [56, 16] per projection.
    EXPECT_EQ(layer->experts.bytes, 256 * (expert + 3 * 16 * 56 * 4));
    EXPECT_EQ(layer->experts.tensors, 256 * 6);
    EXPECT_EQ(layer->role(ParallelRole::Replicated).params,
        1536 * 7168 + 1536 + 576 * 7168 + 512 + 2 * 7168 + 256 * 7168 + 256);
    EXPECT_EQ(layer->activeByComponent[std::size_t(Component::RoutedExperts)], 8 * expert);
    EXPECT_EQ(layer->paramsByComponent[std::size_t(Component::SharedExperts)], expert);
}
