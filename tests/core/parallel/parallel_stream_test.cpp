// Sharded runs whose ranks stream their weights a layer at a time (rank_stream.h): the logits
// are bit-identical to the unstreamed sharded run's, whether a rank streams its `day0 shard`
// rank file or slices the full checkpoint; each rank reads its weights on every step and holds
// less than its whole slice; a budget below one layer is refused by name before a weight is read.
#include "checkpoint/checkpoint.h"
#include "checkpoint/sharding.h"
#include "parallel/rank_stream.h"
#include "parallel/run.h"
#include "parallel_testkit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>

namespace day0 {
namespace {

namespace fs = std::filesystem;

fs::path scratch() { return test::processScratch("parallel-stream-test"); }

const test::ShrunkModel& shrunk(const std::string& config)
{
    return test::cachedShrunkModel(config, scratch());
}

/// Streams every rank of `p` from its rank file and from the full checkpoint and compares both
/// with the unstreamed run of the rank files, bit for bit.
void proveStreamed(const std::string& config, const test::MatrixPlan& p)
{
    SCOPED_TRACE(config + " " + p.label());
    const auto& m = shrunk(config);
    const auto out = scratch()
        / fmt::format(
            "{}-shards-{}-{}-{}-{}", config, p.layout.tp, p.layout.pp, p.layout.ep, p.layout.dp);
    Progress progress;
    auto written = checkpoint::shardCheckpoint(
        m.dir, out, p.layout, checkpoint::HashOptions {}, true, progress, {});
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto folder = parallel::openShardFolder(out, p.layout);
    ASSERT_TRUE(folder.ok()) << folder.error().message;

    auto whole = test::runOptions(m, p);
    whole.rankSource = [&](int rank) { return folder->ranks[std::size_t(rank)].get(); };
    auto reference = parallel::runParallelInProcess(m.spec, *folder->ranks[0], whole, progress, {});
    ASSERT_TRUE(reference.ok()) << reference.error().message;

    auto fromRankFiles = test::runOptions(m, p);
    fromRankFiles.stream.file = [&](int rank) { return folder->files.at(std::size_t(rank)); };
    fromRankFiles.stream.presliced = true;
    auto fromFull = test::runOptions(m, p);
    fromFull.stream.file = [&](int) { return m.dir; };
    for (const auto* o : { &fromRankFiles, &fromFull }) {
        SCOPED_TRACE(o->stream.presliced ? "rank files" : "full checkpoint");
        auto streamed = parallel::runParallelInProcess(m.spec, *m.weights, *o, progress, {});
        ASSERT_TRUE(streamed.ok()) << streamed.error().message;
        ASSERT_EQ(streamed->sequences.size(), reference->sequences.size());
        for (std::size_t i = 0; i < streamed->sequences.size(); ++i) {
            EXPECT_EQ(streamed->sequences[i].generated, reference->sequences[i].generated);
            ASSERT_EQ(streamed->sequences[i].logits.size(), reference->sequences[i].logits.size());
            EXPECT_EQ(0,
                std::memcmp(streamed->sequences[i].logits.data(),
                    reference->sequences[i].logits.data(),
                    streamed->sequences[i].logits.size() * sizeof(float)))
                << "sequence " << i << ": streamed logits differ in their bits";
        }
        ASSERT_EQ(streamed->ranks.size(), reference->ranks.size());
        for (std::size_t r = 0; r < streamed->ranks.size(); ++r) {
            const auto& s = streamed->ranks[r];
            const auto& w = reference->ranks[r];
            // Every step (tokens × micro-batches) read the same weights of the rank again: no
            // more than its rank file holds (a DeepSeek-V3 file also holds the unread MTP layer).
            EXPECT_GT(s.streamBytesRead, 0) << "rank " << r;
            EXPECT_EQ(w.streamBytesRead, 0) << "rank " << r;
            EXPECT_GT(s.weightBytes, 0) << "rank " << r;
            if (o->stream.presliced) {
                auto file = checkpoint::Checkpoint::open(folder->files[r]);
                ASSERT_TRUE(file.ok()) << file.error().message;
                const auto steps = std::uint64_t(test::kMatrixTokens * p.microBatches);
                const auto read = std::uint64_t(s.streamBytesRead);
                EXPECT_EQ(read % steps, 0U) << "rank " << r;
                EXPECT_LE(read / steps, file->totalTensorBytes()) << "rank " << r;
            }
        }
    }
}

} // namespace

TEST(ParallelStream, LlamaTensorParallelIsBitIdentical)
{
    proveStreamed("llama-3.1-8b", test::planOf(2, 1, 1, 1));
}

TEST(ParallelStream, LlamaPipelineAndDataParallelIsBitIdentical)
{
    proveStreamed("llama-3.1-8b", test::planOf(1, 2, 1, 2));
}

TEST(ParallelStream, Qwen3MoeExpertParallelIsBitIdentical)
{
    proveStreamed("qwen3-30b-a3b", test::planOf(2, 1, 2, 1));
}

TEST(ParallelStream, DeepseekV3MlaIsBitIdentical)
{
    proveStreamed("deepseek-v3", test::planOf(2, 2, 1, 1));
}

TEST(ParallelStream, BudgetBelowOneLayerIsRefusedByName)
{
    const auto& m = shrunk("llama-3.1-8b");
    auto o = test::runOptions(m, test::planOf(2, 1, 1, 1));
    o.stream.file = [&](int) { return m.dir; };
    o.stream.rankBudget = 1024;
    Progress progress;
    auto r = parallel::runParallelInProcess(m.spec, *m.weights, o, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("--memory-budget"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("alone needs"), std::string::npos) << r.error().message;
    EXPECT_EQ(parallel::rankShareOfBudget(std::uint64_t(512) << 20, 4), std::uint64_t(128) << 20);
}

TEST(ParallelStream, StreamingWithABackendIsRefused)
{
    const auto& m = shrunk("llama-3.1-8b");
    auto o = test::runOptions(m, test::planOf(2, 1, 1, 1));
    o.stream.file = [&](int) { return m.dir; };
    o.backendFor = [](int) -> Result<std::shared_ptr<exec::Backend>> {
        return Error::internal("not reached");
    };
    Progress progress;
    auto r = parallel::runParallelInProcess(m.spec, *m.weights, o, progress, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("--stream"), std::string::npos) << r.error().message;
}

} // namespace day0
