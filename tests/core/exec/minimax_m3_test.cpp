// MiniMax-M3 on the engine: MiniMax Sparse Attention's block selection by hand, then the shrunk
// MiniMax-M3 (a dense layer with full attention, an MSA layer with the sigmoid-routed MoE and
// its shared expert, (1 + w) norms, swigluoai) against its PyTorch twin
// (plugins/torch/day0_torch_minimax_m3.py) in float64, prefill and decode steps, the kept
// blocks compared row by row, and each feature shown to matter.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/msa.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

TEST(MiniMaxM3Msa, BlockSelectionByHand)
{
    // One index head of width 1, blocks of 2 keys: k = (3, −3 | 2, 2 | 0.5, 0), every query 1.
    // Block 0 scores max(3, −3) = 3 (its mean, 0, would rank it last), block 1 scores 2,
    // block 2 0.5. Top 2 with the query's own block always kept.
    const std::vector<double> k { 3, -3, 2, 2, 0.5, 0 };
    const std::vector<double> q(6, 1.0);
    exec::BlockSelectionShape s;
    s.queries = 6;
    s.keys = 6;
    s.heads = 1;
    s.dim = 1;
    s.blockSize = 2;
    s.topK = 2;
    const auto blocks = exec::selectKeyBlocks<double>(q.data(), k.data(), s);
    // Positions 0-1 see one block; 2-3 both; 4-5 keep their own block and block 0 (3 > 2).
    EXPECT_EQ(blocks, (std::vector<std::int64_t> { 0, -1, 0, -1, 0, 1, 0, 1, 0, 2, 0, 2 }));
    // The keys those blocks hold, for the attention (the causal mask drops key 5 at position 4).
    const auto keys = exec::keysOfBlocks(blocks, s, 0);
    EXPECT_EQ(std::vector<std::int64_t>(keys.begin() + 16, keys.begin() + 20),
        (std::vector<std::int64_t> { 0, 1, 4, 5 }));
    EXPECT_EQ(std::vector<std::int64_t>(keys.begin(), keys.begin() + 4),
        (std::vector<std::int64_t> { 0, 1, -1, -1 }));
    // Decode at position 5 without the own block forced: the two best, blocks 0 and 1.
    s.queries = 1;
    s.localBlock = false;
    EXPECT_EQ(
        exec::selectKeyBlocks<double>(q.data(), k.data(), s), (std::vector<std::int64_t> { 0, 1 }));
    // Block 0's keys made low: dropped, unless the first block is forced in (Automodel's
    // sparse_init_block; the engine refuses a model with one, the references disagreeing).
    const std::vector<double> low { -5, -5, 2, 2, 0.5, 0 };
    s.localBlock = true;
    EXPECT_EQ(exec::selectKeyBlocks<double>(q.data(), low.data(), s),
        (std::vector<std::int64_t> { 1, 2 }));
    s.initBlocks = 1;
    EXPECT_EQ(exec::selectKeyBlocks<double>(q.data(), low.data(), s),
        (std::vector<std::int64_t> { 0, 2 }));
}

namespace {

// 12 tokens of prompt and 2 fed decode steps: 7 blocks of 2, of which a query keeps 2.
const std::vector<std::int64_t> kPrompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31, 77 };

void expectAgreement(const char* label, const test::Agreement& a)
{
    std::printf("%s logits max|d|/max %.2e, max rel %.2e, rel L2 %.2e; worst capture %s %.2e "
                "over %zu; selection rows differing %zu of %zu\n",
        label, a.logitsMaxAbsOverMax, a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(),
        a.worstCaptureRelL2, a.common, a.selectionRowsDiffering, a.selectionRows);
    // The bound on max |Δ| / max |logit|; the element-wise max rel (denominators floored at 1%
    // of the largest logit) is printed: about 1e-4 here, fp32 rounding of near-zero logits.
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GT(a.selectionRows, 0u); // the indexer#topk captures line up
    EXPECT_EQ(a.selectionRowsDiffering, 0u);
}

} // namespace

TEST(MiniMaxM3, AgreesWithPyTorchAndEachFeatureMatters)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_minimax_m3";
    const auto spec = test::shrinkForTwin("minimax-m3", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(spec->blockSparse);
    EXPECT_EQ(spec->blockSparse->blockSize, checkpoint::kShrunkSparseBlockSize);
    EXPECT_EQ(spec->blockSparse->topKBlocks, checkpoint::kShrunkSparseTopKBlocks);
    EXPECT_EQ(spec->blockSparse->localBlocks, 1);
    EXPECT_EQ(spec->blockSparse->indexDim, spec->headDim);
    EXPECT_TRUE(spec->normOffset);
    EXPECT_TRUE(spec->qkNorm);
    ASSERT_TRUE(spec->moe && spec->moe->expertScoreBias && spec->moe->sharedIntermediate > 0);
    bool dense = false;
    bool sparse = false;
    for (const auto& layer : spec->layers) {
        dense = dense || (layer.mixer == model::MixerKind::Attention && !layer.moe());
        sparse = sparse || (layer.mixer == model::MixerKind::BlockSparse && layer.moe());
    }
    EXPECT_TRUE(dense && sparse);
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty())
        << fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
    expectAgreement("minimax-m3", checkpointAgainstTorch(dir, "", kPrompt));
    test::expectEachFeatureMatters(dir,
        { "msa", "block_max", "local_block", "index_norm", "index_rope", "gemma_norm",
            "swiglu_clamp", "swiglu_up_one", "shared_expert", "routed_scaling" },
        kPrompt);
    std::filesystem::remove_all(dir);
}

TEST(MiniMaxM3, RefusesWhatItDoesNotCompute)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto spec = model::loadModel("minimax-m3");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(exec::unsupportedFeatures(*spec).empty())
        << fmt::format("{}", fmt::join(exec::unsupportedFeatures(*spec), "; "));
    const auto refuses = [](const model::ModelSpec& s, const std::string& part) {
        const auto missing = fmt::format("{}", fmt::join(exec::unsupportedFeatures(s), "; "));
        EXPECT_NE(missing.find(part), std::string::npos) << missing;
    };
    auto local = *spec;
    local.blockSparse->localBlocks = 2;
    refuses(local, "sparse_local_block 2");
    auto lse = *spec;
    lse.blockSparse->scoreType = "lse";
    refuses(lse, "sparse_score_type 'lse'");
    auto init = *spec;
    init.blockSparse->initBlocks = 1;
    refuses(init, "sparse_init_block 1");
}
