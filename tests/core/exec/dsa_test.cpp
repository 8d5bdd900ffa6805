// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's scores and top-k selection by
// hand, the selection's mask in attention, and the shrunk DeepSeek-V3.2 on the engine against
// its PyTorch twin (plugins/torch/day0_torch_dsa.py) with each indexer feature shown to matter;
// then GLM-5 (its indexer rotates adjacent pairs) and GLM-5.2 (layers that reuse the previous
// indexer's selection) the same way.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/attention.h"
#include "exec/checkpoint_weights.h"
#include "exec/dsa_indexer.h"
#include "exec/engine.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

TEST(DsaIndexer, ScoresAndSelectionByHand)
{
    // Two heads of width 2, three tokens. Keys k0 = (1, 0), k1 = (0, 1), k2 = (1, 1); the last
    // query has heads (2, 0) and (−1, 3) weighted 1 and 0.5:
    //   key 0: 1·relu(2) + 0.5·relu(−1) = 2      (without the ReLU: 1.5)
    //   key 1: 1·relu(0) + 0.5·relu(3)  = 1.5
    //   key 2: 1·relu(2) + 0.5·relu(2)  = 3
    const std::vector<double> k { 1, 0, 0, 1, 1, 1 };
    const std::vector<double> q { 1, 1, 0, 0, /* query 1 */ 0, 1, 1, 0, /* query 2 */ 2, 0, -1, 3 };
    const std::vector<double> w { 1, 1, 1, 1, 1, 0.5 };
    exec::IndexerShape shape { 3, 3, 2, 2 };
    std::vector<double> scores(9);
    exec::indexerScores<double>(q.data(), k.data(), w.data(), scores.data(), shape);
    EXPECT_DOUBLE_EQ(scores[6], 2.0);
    EXPECT_DOUBLE_EQ(scores[7], 1.5);
    EXPECT_DOUBLE_EQ(scores[8], 3.0);
    // Top 2: query 0 sees only key 0 (padded with −1), query 1 keeps both keys it sees, query 2
    // drops key 1; ids in increasing order.
    const auto sel = exec::selectTopKeys<double>(scores.data(), 3, 3, 2);
    EXPECT_EQ(sel, (std::vector<std::int64_t> { 0, -1, 0, 1, 0, 2 }));
    // Decode: one query at position 2 sees all three keys and ranks them the same way.
    const auto last = exec::selectTopKeys<double>(scores.data() + 6, 1, 3, 2);
    EXPECT_EQ(last, (std::vector<std::int64_t> { 0, 2 }));
    // Future keys never count, however high they score.
    const std::vector<double> future { 0, 9, 9, 0, 1, 9, 0, 1, 2 };
    EXPECT_EQ(exec::selectTopKeys<double>(future.data(), 3, 3, 2),
        (std::vector<std::int64_t> { 0, -1, 0, 1, 1, 2 }));
}

TEST(DsaIndexer, AttentionSeesOnlyTheSelectedKeys)
{
    // One head of width 1, q = 1, keys 0, 1, 2 and values 10, 20, 30: with keys {0, 2} kept the
    // output is (10 + 30·e²) / (1 + e²); key 1 gets no probability.
    const std::vector<double> q { 1 }, k { 0, 1, 2 }, v { 10, 20, 30 };
    const std::vector<std::int64_t> kept { 0, 2 };
    exec::AttentionShape s;
    s.queries = 1;
    s.keys = 3;
    s.heads = s.kvHeads = 1;
    s.headDim = s.valueDim = 1;
    s.selectedKeys = kept;
    s.selectedPerQuery = 2;
    double out = 0;
    exec::attention<double>(q.data(), k.data(), v.data(), &out, s);
    const double e2 = std::exp(2.0);
    EXPECT_NEAR(out, (10 + 30 * e2) / (1 + e2), 1e-12);
    s.selectedKeys = {};
    exec::attention<double>(q.data(), k.data(), v.data(), &out, s);
    EXPECT_NEAR(out, (10 + 20 * std::exp(1.0) + 30 * e2) / (1 + std::exp(1.0) + e2), 1e-12);
}

namespace {

// Shrinks `model` (a bundled name or a config path) into dir/ckpt and checks the indexer's top-k
// is below the prompt length.
void shrinkWithIndexer(const std::string& model, const std::filesystem::path& dir)
{
    std::filesystem::remove_all(dir / "ckpt");
    Progress p;
    checkpoint::ShrinkOptions so;
    const auto shrunk = checkpoint::shrinkModel(model, dir / "ckpt", so, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_EQ(spec->mla.indexerTopK, checkpoint::kShrunkIndexTopK);
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty())
        << fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
}

const std::vector<std::int64_t> kPrompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 };

// The engine against the twin, then the twin without each feature.
void agreeAndEachFeatureMatters(
    const char* label, const std::filesystem::path& dir, const std::vector<const char*>& features)
{
    const auto a = checkpointAgainstTorch(dir, "", kPrompt);
    std::printf("%s logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu; "
                "selection rows differing %zu of %zu\n",
        label, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2, a.common,
        a.selectionRowsDiffering, a.selectionRows);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GT(a.selectionRows, 0u); // the indexer#topk captures line up
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
    for (const char* feature : features) {
        SCOPED_TRACE(feature);
        const auto off
            = checkpointAgainstTorch(dir, fmt::format("DAY0_TWIN_WITHOUT={}", feature), kPrompt);
        std::printf("  without %-16s logits max rel %.2e, selection rows differing %zu\n", feature,
            off.logitsMaxRel, off.selectionRowsDiffering);
        EXPECT_GT(off.logitsMaxRel, 1e-3);
    }
}

} // namespace

TEST(DsaDeepseekV32, AgreesWithPyTorchAndTheIndexerMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // The shrunk DeepSeek-V3.2: block-FP8 weights, MLA with YaRN, the indexer on every layer
    // keeping 4 keys per query under a 10-token prompt (and the 2 decode steps after it).
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_deepseek_v32";
    std::filesystem::remove_all(dir);
    shrinkWithIndexer("deepseek-v3.2", dir);
    agreeAndEachFeatureMatters("deepseek-v3.2", dir,
        { "indexer", "indexer_rope", "indexer_relu", "indexer_weights", "indexer_k_norm" });
    std::filesystem::remove_all(dir);
}

TEST(DsaGlm5, AgreesWithPyTorchAndTheIndexerMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // The shrunk GLM-5: MLA (rope_interleave) with an indexer on every layer whose rotary lanes
    // pair adjacently (indexer_rope_interleave true, the opposite of DeepSeek-V3.2's), 2 dense
    // layers then sigmoid-routed MoE with a shared expert.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_glm5";
    std::filesystem::remove_all(dir);
    shrinkWithIndexer("glm-5", dir);
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok());
    EXPECT_TRUE(spec->mla.indexerRopeInterleave);
    agreeAndEachFeatureMatters("glm-5", dir,
        { "indexer", "indexer_rope", "indexer_relu", "indexer_weights", "indexer_k_norm" });
    std::filesystem::remove_all(dir);
}

TEST(DsaGlm52, SharedLayersReuseTheSelection)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // GLM-5.2's published config: indexer_types marks most layers "shared" (no indexer; MLA over
    // the previous indexer's selection). Shrunk, it keeps layers 0, 1, 3, 6: full, full, shared,
    // full, so the shared layer reuses layer 1's selection.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_glm52";
    std::filesystem::remove_all(dir);
    shrinkWithIndexer((std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
                          / "frontier-sizes" / "zai-org--GLM-5.2.json")
                          .string(),
        dir);
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    ASSERT_TRUE(spec.ok());
    std::vector<model::MixerKind> mixers;
    for (const auto& layer : spec->layers) {
        mixers.push_back(layer.mixer);
    }
    using model::MixerKind;
    EXPECT_EQ(mixers,
        (std::vector<MixerKind> { MixerKind::SparseMla, MixerKind::SparseMla, MixerKind::Attention,
            MixerKind::SparseMla }));
    agreeAndEachFeatureMatters("glm-5.2", dir, { "indexer_shared", "indexer" });
    std::filesystem::remove_all(dir);
}
