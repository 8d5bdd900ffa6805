// The proof that sharded DeepSeek-V4 computes what the single-rank engine computes: a shrunk
// deepseek-v4-flash (a sliding, two compressed-sparse and a heavily compressed block; hash-routed
// and score-routed MoE; 4 hyper-connection streams) at tp=2 (heads and output groups split, the
// one K=V head, the compressors and the indexer replicated), with sequence parallelism, with its
// experts over EP, at pp=2 (the hyper-connection streams and the token ids sent to the second
// stage), and from `day0 shard` rank files. The prompts run past the window, fill more
// compressed entries than the indexer keeps, and decode three tokens.
#include "checkpoint/sharding.h"
#include "parallel_testkit.h"
#include "scripted_backend.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>

using namespace day0;

namespace {

// The bound of the other sharded proofs: fp32, the same terms summed in another order.
constexpr double kTolerance = 1e-5;
constexpr std::int64_t kNewTokens = 3;

std::filesystem::path scratch() { return test::processScratch("parallel-deepseek-v4-test"); }

const test::ShrunkModel& shrunkV4()
{
    return test::cachedShrunkHybrid("deepseek-v4-flash", scratch());
}

test::MatrixPlan layoutOf(int tp, int pp, bool sp = false, int ep = 1, int dp = 1)
{
    return test::planOf(tp, pp, ep, dp, sp);
}

/// Prompts of 13 to 19 tokens: past the window of 4, and 3 or more entries of the ratio-4
/// compressors (the indexer keeps 2), 1 or 2 of the ratio-8 one.
std::vector<std::vector<std::int64_t>> longPrompts(int sequences, std::int64_t vocab)
{
    std::vector<std::vector<std::int64_t>> prompts;
    for (int s = 0; s < sequences; ++s) {
        std::vector<std::int64_t> p;
        const int length = 13 + (s * 3) % 7;
        for (int i = 0; i < length; ++i) {
            p.push_back((11 + 37 * s + 17 * i) % vocab);
        }
        prompts.push_back(std::move(p));
    }
    return prompts;
}

parallel::ParallelRunOptions optionsFor(const test::ShrunkModel& m, const test::MatrixPlan& p)
{
    return test::runOptions(
        m, p, longPrompts(p.layout.dp * p.microBatches, m.spec.vocabSize), kNewTokens);
}

} // namespace

TEST(ParallelDeepseekV4, ShardedEqualsOneRank)
{
    const auto& m = shrunkV4();
    ASSERT_EQ(m.spec.family, model::Family::DeepseekV4);
    ASSERT_EQ(m.spec.numHeads, 4);
    ASSERT_EQ(m.spec.compressedAttention->oGroups, 2);
    ASSERT_GT(m.spec.hyperConnections->streams, 1);
    std::vector<std::int64_t> ratios;
    bool hashed = false;
    for (const auto& layer : m.spec.layers) {
        ratios.push_back(layer.compressRatio);
        hashed = hashed || layer.hashRouted;
    }
    ASSERT_EQ(ratios, (std::vector<std::int64_t> { 0, 4, 8, 4 }));
    ASSERT_TRUE(hashed);
    for (const auto& p : { layoutOf(2, 1), layoutOf(2, 1, true), layoutOf(2, 1, false, 2),
             layoutOf(1, 1, false, 4, 4), layoutOf(1, 2), layoutOf(2, 2, false, 2),
             layoutOf(2, 2, true, 2) }) {
        SCOPED_TRACE(p.label());
        Progress progress;
        auto r = parallel::runParallelInProcess(
            m.spec, *m.weights, optionsFor(m, p), progress, {}, nullptr, {}, { Seconds(60.0) });
        ASSERT_TRUE(r.ok()) << r.error().message;
        auto err = test::compareWithSingleRank(m, r->sequences, kNewTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, kTolerance);
        std::cout << fmt::format("[deepseek-v4] {}: max rel error {:.2e}\n", p.label(), *err);
    }
}

TEST(ParallelDeepseekV4, RunsFromDay0ShardRankFiles)
{
    const auto& m = shrunkV4();
    const auto p = layoutOf(2, 2, false, 2);
    const auto out = scratch() / "shards";
    Progress progress;
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto folder = parallel::openShardFolder(out, p.layout);
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    auto o = optionsFor(m, p);
    o.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
    auto r = parallel::runParallelInProcess(m.spec, *folder->ranks[0], o, progress, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto err = test::compareWithSingleRank(m, r->sequences, kNewTokens);
    ASSERT_TRUE(err.ok()) << err.error().message;
    EXPECT_LE(*err, kTolerance);
    std::cout << fmt::format("[deepseek-v4 shards] {}: max rel error {:.2e}\n", p.label(), *err);
}

TEST(ParallelDeepseekV4, RefusesSplitsOfItsOutputGroupsByName)
{
    // 4 heads in 2 output groups: tp=4 would give each rank half a group of wo_a.
    const auto& m = shrunkV4();
    Progress progress;
    auto r = parallel::runParallelInProcess(
        m.spec, *m.weights, optionsFor(m, layoutOf(4, 1)), progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("o_groups"), std::string::npos) << r.error().message;
    const auto out = scratch() / "shards-tp4";
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, layoutOf(4, 1).layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_FALSE(written.ok());
    EXPECT_NE(written.error().message.find("o_groups"), std::string::npos)
        << written.error().message;
}

TEST(ParallelDeepseekV4, OnABackendIsRefusedByName)
{
    // Its block runs on the CPU reference loops, which no backend computes: a backend is refused
    // by name rather than reported as having run it.
    const auto& m = shrunkV4();
    auto o = optionsFor(m, layoutOf(2, 1));
    o.backendFor = [](int) -> Result<std::shared_ptr<exec::Backend>> {
        return std::shared_ptr<exec::Backend>(std::make_shared<exec::testing::ScriptedBackend>());
    };
    Progress progress;
    auto r = parallel::runParallelInProcess(m.spec, *m.weights, o, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("deepseek_v4 on a backend"), std::string::npos)
        << r.error().message;
}

TEST(ParallelDeepseekV4, ReleasedFormatShardedEqualsOneRank)
{
    // The released format (block FP8 with F8_E8M0 `.scale`, FP4 experts packed [out, in/2]):
    // each rank slices the dequantised weights, the experts by their logical [out, in] shape
    // (tp=2 without EP splits every expert's w2 by columns over ETP).
    auto made = test::makeShrunkHybrid("deepseek-v4-flash-released", scratch() / "released");
    ASSERT_TRUE(made.ok()) << made.error().message;
    const auto& m = *made;
    ASSERT_TRUE(m.spec.quantization && m.spec.quantization->expertScheme);
    for (const auto& p : { layoutOf(2, 1), layoutOf(2, 2, false, 2) }) {
        SCOPED_TRACE(p.label());
        Progress progress;
        auto r = parallel::runParallelInProcess(m.spec, *m.weights, optionsFor(m, p), progress, {});
        ASSERT_TRUE(r.ok()) << r.error().message;
        auto err = test::compareWithSingleRank(m, r->sequences, kNewTokens);
        ASSERT_TRUE(err.ok()) << err.error().message;
        EXPECT_LE(*err, kTolerance);
        std::cout << fmt::format(
            "[deepseek-v4 released format] {}: max rel error {:.2e}\n", p.label(), *err);
    }
    // `day0 shard` cannot give each TP rank a part of the one 128 × 128 scale block of these
    // small weights, and names the tensor and its scale.
    Progress progress;
    auto cut = checkpoint::shardCheckpoint(m.dir, scratch() / "released-shards-tp2",
        layoutOf(2, 1).layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().message.find(".scale'"), std::string::npos) << cut.error().message;
    EXPECT_NE(cut.error().message.find("block boundaries"), std::string::npos)
        << cut.error().message;
}

TEST(ParallelDeepseekV4, ReleasedFormatRunsFromDay0ShardRankFiles)
{
    // Rank files of the released format keep it: FP8 codes with their E8M0 `.scale` blocks, FP4
    // expert codes packed [out, in/2] with an E8M0 scale per 32 inputs, each rank holding its
    // stage's layers and its EP range of experts; a run from them equals one rank.
    auto made = test::makeShrunkHybrid("deepseek-v4-flash-released", scratch() / "released-pp");
    ASSERT_TRUE(made.ok()) << made.error().message;
    const auto& m = *made;
    const auto p = layoutOf(1, 2, false, 2, 2);
    const auto out = scratch() / "released-shards";
    Progress progress;
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto folder = parallel::openShardFolder(out, p.layout);
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    std::map<DType, int> stored;
    for (const auto& rank : folder->ranks) {
        for (const auto& name : rank->names()) {
            const auto t = rank->read(name);
            ASSERT_TRUE(t.ok()) << t.error().message;
            stored[t->dtype()] += 1;
        }
    }
    EXPECT_GT(stored[DType::F8E4M3], 0);
    EXPECT_GT(stored[DType::I8], 0);
    EXPECT_GT(stored[DType::F8E8M0], 0);
    auto o = optionsFor(m, p);
    o.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
    auto r = parallel::runParallelInProcess(m.spec, *folder->ranks[0], o, progress, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto err = test::compareWithSingleRank(m, r->sequences, kNewTokens);
    ASSERT_TRUE(err.ok()) << err.error().message;
    EXPECT_LE(*err, kTolerance);
    std::cout << fmt::format(
        "[deepseek-v4 released-format shards] {}: max rel error {:.2e}\n", p.label(), *err);
}
