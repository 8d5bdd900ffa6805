// The train action (actions::trainModel, `day0 train`) as a whole: how it runs the trainer.
#include "actions/train.h"
#include "base/resources.h"
#include "exec/blas_threads.h"
#include "shrunk.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

using namespace day0;

// The backward's products are one sequence's, too small for OpenBLAS's threads to pay for their
// hand-offs (tests/bench/train_step_bench), so a single-rank run computes on one BLAS thread too
// and gives the caller's setting back after.
TEST(TrainAction, ASingleRankRunComputesOnOneBlasThreadAndRestoresTheSetting)
{
    const int before = exec::blasThreads();
    openblas_set_num_threads(2);
    actions::TrainRequest request; // the built-in task, one rank
    request.options.steps = 400;
    request.options.globalBatch = 2;
    request.options.sequenceLength = 8;
    Progress progress;
    std::atomic<bool> finished = false;
    int during = 0;
    bool seen = false;
    std::jthread run([&] {
        const auto out = actions::trainModel(request, progress);
        EXPECT_TRUE(out.ok()) << out.error().message;
        finished = true;
    });
    while (!finished && !seen) {
        const auto done = progress.done();
        if (done >= 1 && done < request.options.steps) {
            during = exec::blasThreads();
            // Still mid-run after the read: the read saw the run's setting.
            seen = progress.done() < request.options.steps;
        }
        std::this_thread::yield();
    }
    run.join();
    ASSERT_TRUE(seen) << "the run ended before a step could be watched";
    EXPECT_EQ(during, 1);
    EXPECT_EQ(exec::blasThreads(), 2);
    openblas_set_num_threads(before);
}

namespace {

/// stories260K's trained parameters, by hand from its config.json (hidden 64, 5 layers, 8 heads
/// of 8 over 4 KV heads, MLP 172, vocabulary 512, tied embeddings): per layer q and o 64x64,
/// k and v 32x64, gate, up and down 172x64, two norms of 64; the embedding 512x64 (also the
/// head); the final norm 64.
constexpr std::int64_t kStoriesParameters
    = 5 * (2 * 4096 + 2 * 2048 + 3 * 11008 + 2 * 64) + 512 * 64 + 64; // 260,032

const actions::TrainMemoryLine& line(
    const actions::TrainMemory& m, const std::string& category, int rank = 0)
{
    for (const auto& l : m.lines) {
        if (l.category == category && l.rank == rank) {
            return l;
        }
    }
    static const actions::TrainMemoryLine none;
    ADD_FAILURE() << "no line " << category << " of rank " << rank;
    return none;
}

actions::TrainOutcome trainStories(train::TrainPrecision precision, const std::string& plan)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    actions::TrainRequest request;
    request.model
        = (std::filesystem::path(DAY0_TEST_DATA_DIR) / "exec" / "stories260K-hf").string();
    request.plan = plan;
    request.options.steps = 1;
    request.options.globalBatch = 2;
    request.options.sequenceLength = 8;
    request.options.precision = precision;
    Progress progress;
    auto out = actions::trainModel(request, progress);
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? std::move(*out) : actions::TrainOutcome {};
}

} // namespace

TEST(TrainAction, TheStepsBuffersPerCategoryAreTheHandCountedOnesBesideThePlanners)
{
    constexpr std::int64_t P = kStoriesParameters;
    {
        const auto out = trainStories(train::TrainPrecision::F64, "");
        ASSERT_TRUE(out.memory.has_value());
        const auto& m = *out.memory;
        // The trainer: doubles throughout; masters apart from the model copy; both moments.
        EXPECT_EQ(line(m, "weights").trainer, 8 * P);
        EXPECT_EQ(line(m, "gradients").trainer, 8 * P);
        EXPECT_EQ(line(m, "optimizer").trainer, 8 * P + 2 * 8 * P);
        // The planner at fp64: the same weights and gradients, fp32 masters beside fp64 moments.
        EXPECT_EQ(line(m, "weights").planner, 8 * P);
        EXPECT_EQ(line(m, "gradients").planner, 8 * P);
        EXPECT_EQ(line(m, "optimizer").planner, 4 * P + 2 * 8 * P);
        // What the backward keeps for one sequence of n = 8 tokens, by hand: per layer its input,
        // both norms' outputs, q, the context and the mid-layer residual (6 x 64 per token), k
        // and v (2 x 32), gate, up and the activation (3 x 172), and the attention
        // probabilities (8 heads x n x n); then the final norm's input and output (2 x 64) and
        // the logits (512) per token.
        constexpr std::int64_t n = 8;
        constexpr std::int64_t kept = 5 * ((6 * 64 + 2 * 32 + 3 * 172) * n + 8 * n * n)
            + (2 * 64 + 512) * n; // 46,240 elements
        EXPECT_EQ(line(m, "activations").trainer, 8 * kept);
        EXPECT_GT(line(m, "activations").planner, 0);
        EXPECT_GT(m.peakRss, 8 * P);
        EXPECT_EQ(out.record.findMetric("trainer_optimizer_bytes")->value, double(24 * P));
        EXPECT_EQ(out.record.findMetric("planner_optimizer_bytes")->value, double(20 * P));
        EXPECT_NE(out.record.findProperty("memory_activations"), nullptr);
    }
    {
        const auto out = trainStories(train::TrainPrecision::F32, "dp=2,zero=1");
        ASSERT_TRUE(out.memory.has_value());
        const auto& m = *out.memory;
        // Rank 0 holds half of the (even) buffer's masters and moments, still as doubles.
        EXPECT_EQ(line(m, "weights").trainer, 8 * P);
        EXPECT_EQ(line(m, "gradients").trainer, 8 * P);
        EXPECT_EQ(line(m, "optimizer").trainer, 3 * 8 * (P / 2));
        // The planner at fp32: 4 B each, no masters (the weights are fp32), moments sharded.
        EXPECT_EQ(line(m, "weights").planner, 4 * P);
        EXPECT_EQ(line(m, "gradients").planner, 4 * P);
        EXPECT_EQ(line(m, "optimizer").planner, 2 * 4 * P / 2);
        EXPECT_EQ(line(m, "activations").trainer,
            4 * (5 * ((6 * 64 + 2 * 32 + 3 * 172) * 8 + 8 * 64) + (2 * 64 + 512) * 8));
        EXPECT_NE(line(m, "weights").why.find("doubles"), std::string::npos);
    }
}

TEST(TrainAction, UnderTensorParallelismEveryRanksShareIsSetAgainstThePlannersPerRankFigures)
{
    // stories260K's rank share at tp=2, by hand: per layer q, k, v, o, gate, up and down halve
    // (45,312 -> 22,656), the two norms stay whole; the tied embedding (512 x 64) is split by
    // vocabulary (256 rows a rank) and the final norm stays whole on every rank.
    constexpr std::int64_t P = kStoriesParameters;
    constexpr std::int64_t S = 5 * (45'312 / 2 + 2 * 64) + 256 * 64 + 64; // 130,368
    // The planner splits the embedding (the head) by vocabulary as well.
    constexpr std::int64_t plannerS = S;
    // What one sequence of n = 8 tokens keeps on a rank: per layer its input, both norms'
    // outputs and the mid-layer residual whole (4 x 64 per token), its 4 heads' q and context
    // (2 x 32), 2 KV heads' k and v (2 x 16), half the MLP (3 x 86) and 4 heads' probabilities
    // (4 x n x n); the final norm's input and output (2 x 64) whole and the rank's half of the
    // logits (256).
    constexpr std::int64_t n = 8;
    constexpr std::int64_t kept
        = 5 * ((4 * 64 + 2 * 32 + 2 * 16 + 3 * 86) * n + 4 * n * n) + (2 * 64 + 256) * n;
    {
        const auto out = trainStories(train::TrainPrecision::F64, "tp=2");
        ASSERT_TRUE(out.memory.has_value());
        EXPECT_TRUE(out.memoryNotCompared.empty()) << out.memoryNotCompared;
        const auto& m = *out.memory;
        ASSERT_EQ(m.lines.size(), 2u * 4u); // two ranks, four categories each
        ASSERT_EQ(out.result.buffersPerRank.size(), 2u);
        for (const int rank : { 0, 1 }) {
            EXPECT_EQ(line(m, "weights", rank).trainer, 8 * S) << rank;
            EXPECT_EQ(line(m, "gradients", rank).trainer, 8 * S) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).trainer, 3 * 8 * S) << rank;
            EXPECT_EQ(line(m, "activations", rank).trainer, 8 * kept) << rank;
            EXPECT_EQ(out.result.buffersPerRank[std::size_t(rank)].keptActivations, 8 * kept);
            EXPECT_EQ(line(m, "weights", rank).planner, 8 * plannerS) << rank;
            EXPECT_EQ(line(m, "gradients", rank).planner, 8 * plannerS) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).planner, (4 + 2 * 8) * plannerS) << rank;
            EXPECT_GT(line(m, "activations", rank).planner, 0) << rank;
        }
        EXPECT_LT(line(m, "weights").planner, 8 * P); // not the whole model's estimate
        EXPECT_NE(line(m, "weights").why.find("tp=2 share"), std::string::npos);
        EXPECT_NE(m.plannerConfig.find("tp=2"), std::string::npos) << m.plannerConfig;
        EXPECT_EQ(out.record.findMetric("rank1_trainer_weights_bytes")->value, double(8 * S));
        EXPECT_EQ(
            out.record.findMetric("rank1_planner_weights_bytes")->value, double(8 * plannerS));
        EXPECT_EQ(out.record.findProperty("memory_not_compared"), nullptr);
    }
    {
        // dp=2,tp=2,zero=1 in fp32: four ranks, each with half of its TP share's optimizer.
        const auto out = trainStories(train::TrainPrecision::F32, "dp=2,tp=2,zero=1");
        ASSERT_TRUE(out.memory.has_value());
        const auto& m = *out.memory;
        ASSERT_EQ(m.lines.size(), 4u * 4u);
        for (const int rank : { 0, 1, 2, 3 }) {
            EXPECT_EQ(line(m, "weights", rank).trainer, 8 * S) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).trainer, 3 * 8 * (S / 2)) << rank;
            EXPECT_EQ(line(m, "activations", rank).trainer, 4 * kept) << rank;
            EXPECT_EQ(line(m, "weights", rank).planner, 4 * plannerS) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).planner, 2 * 4 * plannerS / 2) << rank;
        }
    }
}

TEST(TrainAction, AnMlaMoeCheckpointUnderTensorParallelismIsComparedRankByRank)
{
    // Shrunk DeepSeek-V3 at dp=2,tp=2: the planner lays out MoE under tp > 1 only with sequence
    // parallelism, which the trainer does not run; the comparison is made and says so.
    setResourceDir(DAY0_RESOURCE_DIR);
    actions::TrainRequest request;
    request.model = actions::test::shrunk("deepseek-v3", "deepseek").string();
    request.plan = "dp=2,tp=2";
    request.options.steps = 1;
    request.options.globalBatch = 2;
    request.options.sequenceLength = 8;
    Progress progress;
    const auto out = actions::trainModel(request, progress);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_TRUE(out->memory.has_value()) << out->memoryNotCompared;
    const auto& m = *out->memory;
    ASSERT_EQ(m.lines.size(), 4u * 4u);
    for (const int rank : { 0, 1, 2, 3 }) {
        for (const char* category : { "weights", "gradients", "optimizer", "activations" }) {
            EXPECT_GT(line(m, category, rank).trainer, 0) << category << " " << rank;
            EXPECT_GT(line(m, category, rank).planner, 0) << category << " " << rank;
        }
        // Both TP ranks of a replica hold the same share's sizes.
        EXPECT_EQ(line(m, "weights", rank).trainer, line(m, "weights", 0).trainer);
    }
    EXPECT_NE(m.plannerConfig.find("sp=on"), std::string::npos) << m.plannerConfig;
    EXPECT_NE(line(m, "activations").why.find("needs it for MoE"), std::string::npos);
}

TEST(TrainAction, ABf16MixedRunIsSetAgainstThePlannersEighteenBytesAParameter)
{
    // bf16-mixed as the planner counts it (Megatron without the distributed optimizer): bf16
    // weights 2 B + fp32 main gradients 4 B + fp32 masters 4 B + two fp32 Adam moments 8 B =
    // 18 B a parameter. The trainer holds each as doubles, its values in those formats, and
    // keeps the backward's activations as fp32 values rounded to bf16.
    constexpr std::int64_t P = kStoriesParameters;
    constexpr std::int64_t n = 8;
    {
        const auto out = trainStories(train::TrainPrecision::MixedBf16, "");
        ASSERT_TRUE(out.memory.has_value()) << out.memoryNotCompared;
        EXPECT_TRUE(out.memoryNotCompared.empty()) << out.memoryNotCompared;
        const auto& m = *out.memory;
        EXPECT_EQ(line(m, "weights").planner, 2 * P);
        EXPECT_EQ(line(m, "gradients").planner, 4 * P);
        EXPECT_EQ(line(m, "optimizer").planner, (4 + 2 * 4) * P);
        EXPECT_EQ(line(m, "weights").planner + line(m, "gradients").planner
                + line(m, "optimizer").planner,
            18 * P);
        EXPECT_EQ(line(m, "weights").trainer, 8 * P);
        EXPECT_EQ(line(m, "gradients").trainer, 8 * P);
        EXPECT_EQ(line(m, "optimizer").trainer, 3 * 8 * P);
        // The same hand count as the fp64 run's (46,240 elements), 4 B each.
        constexpr std::int64_t kept
            = 5 * ((6 * 64 + 2 * 32 + 3 * 172) * n + 8 * n * n) + (2 * 64 + 512) * n;
        EXPECT_EQ(line(m, "activations").trainer, 4 * kept);
        EXPECT_GT(line(m, "activations").planner, 0);
        EXPECT_NE(line(m, "weights").why.find("bf16 copy"), std::string::npos)
            << line(m, "weights").why;
        EXPECT_NE(line(m, "weights").why.find("values rounded to BF16"), std::string::npos)
            << line(m, "weights").why;
        EXPECT_NE(m.plannerConfig.find("weights bf16"), std::string::npos) << m.plannerConfig;
        EXPECT_EQ(out.record.findMetric("planner_weights_bytes")->value, double(2 * P));
        EXPECT_EQ(out.record.findProperty("memory_not_compared"), nullptr);
    }
    {
        // tp=2: every rank's share (the hand count of the tp=2 test above) at the same 18 B.
        constexpr std::int64_t S = 5 * (45'312 / 2 + 2 * 64) + 256 * 64 + 64;
        constexpr std::int64_t kept
            = 5 * ((4 * 64 + 2 * 32 + 2 * 16 + 3 * 86) * n + 4 * n * n) + (2 * 64 + 256) * n;
        const auto out = trainStories(train::TrainPrecision::MixedBf16, "tp=2");
        ASSERT_TRUE(out.memory.has_value()) << out.memoryNotCompared;
        const auto& m = *out.memory;
        ASSERT_EQ(m.lines.size(), 2u * 4u);
        for (const int rank : { 0, 1 }) {
            EXPECT_EQ(line(m, "weights", rank).planner, 2 * S) << rank;
            EXPECT_EQ(line(m, "gradients", rank).planner, 4 * S) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).planner, 12 * S) << rank;
            EXPECT_EQ(line(m, "weights", rank).trainer, 8 * S) << rank;
            EXPECT_EQ(line(m, "optimizer", rank).trainer, 3 * 8 * S) << rank;
            EXPECT_EQ(line(m, "activations", rank).trainer, 4 * kept) << rank;
        }
    }
}
