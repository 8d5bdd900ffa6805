// Batched serving over a plan's sharded ranks (issue #23): the scheduler's batched prefill and
// batched decode run as one step over the ranks (ServedRanks::feedBatch: each rank one forward
// over every sequence's rows on its shard, each sequence attending over its own cache). Six
// greedy requests of different prompt and output lengths, submitted at once, must get the
// single-rank reference's tokens (exec::SequenceDecoder, `day0 run`'s forward), under tensor
// parallelism, sequence parallelism and two pipeline stages, for a dense model, MoE and MLA.
#include "actions/serve_sharded.h"
#include "exec/precision.h"
#include "parallel/served_ranks.h"
#include "parallel_testkit.h"
#include "serve/bench_check.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

using namespace day0;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// Submits every prompt at once (greedy, ignore_eos, counts[i] tokens each); their tokens.
std::vector<std::vector<std::int64_t>> serveAll(serve::Scheduler& scheduler,
    const std::vector<std::vector<std::int64_t>>& prompts, const std::vector<std::int64_t>& counts)
{
    std::vector<std::shared_ptr<serve::RequestStream>> streams;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        serve::GenerationRequest r;
        r.prompt = prompts[i];
        r.maxTokens = counts[i];
        r.ignoreEos = true;
        r.sampling.temperature = 0.0;
        auto submitted = scheduler.submit(std::move(r));
        EXPECT_EQ(submitted.admission, serve::Scheduler::Admission::Accepted) << submitted.reason;
        streams.push_back(submitted.stream);
    }
    std::vector<std::vector<std::int64_t>> out(prompts.size());
    for (std::size_t i = 0; i < streams.size(); ++i) {
        if (!streams[i]) {
            continue;
        }
        serve::RequestStream::Batch batch;
        do {
            batch = streams[i]->take(std::chrono::milliseconds(200));
            for (const auto& e : batch.tokens) {
                out[i].push_back(e.token);
            }
        } while (!batch.finish);
        EXPECT_EQ(*batch.finish, serve::Finish::Length) << batch.error;
    }
    return out;
}

/// Six requests of `checkpoint` served over `plan` with batched steps: each one's tokens equal
/// the single-rank reference's, and the steps did run several sequences at once.
void expectShardedBatchEqualsReference(const std::string& checkpoint, const std::string& plan)
{
    SCOPED_TRACE(checkpoint + " --plan " + plan);
    Progress progress;
    auto loaded = serve::loadServedModel(checkpoint, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto precision = *exec::parsePrecisionPlan("fp32");
    // Different prompt and output lengths: the rows of a step sit at different positions of
    // their caches, and sequences leave the batch at different steps.
    const std::vector<std::vector<std::int64_t>> prompts { { 1, 2, 3 }, { 7 },
        { 9, 8, 7, 6, 5, 4, 3, 2, 1 }, { 100, 200 }, { 42, 42, 42, 42 }, { 5, 17, 150 } };
    const std::vector<std::int64_t> counts { 6, 10, 4, 8, 2, 12 };
    std::vector<std::vector<std::int64_t>> reference;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        auto g = serve::greedyDecode(*loaded->engine, precision, prompts[i], counts[i], {});
        ASSERT_TRUE(g) << g.error().message;
        reference.push_back(g->tokens);
    }
    auto layout = checkpoint::parseShardLayout(plan);
    ASSERT_TRUE(layout) << layout.error().message;
    auto ranks = parallel::ServedRanks::start(checkpoint, *layout, progress, {});
    ASSERT_TRUE(ranks) << ranks.error().message;
    EXPECT_EQ((*ranks)->batchRefusal(), "");
    serve::SchedulerOptions o;
    o.maxRunning = 8;
    o.plan = precision;
    o.source = actions::shardedSource(std::shared_ptr<parallel::ServedRanks>(std::move(*ranks)));
    serve::Scheduler scheduler(loaded->spec, o);
    EXPECT_EQ(scheduler.decodePath(), "batched");
    EXPECT_EQ(serveAll(scheduler, prompts, counts), reference);
    const auto m = scheduler.metrics();
    // The prompts admitted at a step boundary prefill together: all six (28 tokens) in one step
    // when they arrive before the loop's first step, else in two or three (the loop may take the
    // first ones before the rest are submitted); then decode steps of several rows.
    EXPECT_GE(m.prefillBatches, 1);
    EXPECT_GE(m.prefillBatchSequences, 2 * m.prefillBatches);
    EXPECT_GT(m.decodeBatches, 0);
    EXPECT_GT(m.decodeBatchRows, 2 * m.decodeBatches);
}

} // namespace

TEST(ServeSharded, BatchedStepsOverTheRanksGiveTheReferencesTokens)
{
    for (const char* plan : { "tp=2", "tp=2,sp=1", "tp=2,pp=2", "pp=2" }) {
        expectShardedBatchEqualsReference(kTiny, plan);
    }
}

TEST(ServeSharded, MoeAndMlaRowsOfABatchedShardedStepKeepTheirOwnExpertsAndCaches)
{
    const auto scratch = test::processScratch("serve_sharded");
    // Qwen3-MoE with its experts over two ranks; DeepSeek-V3's MLA (latent caches per
    // sequence) and group-routed experts.
    const auto& moe = test::cachedShrunkModel("qwen3-30b-a3b", scratch);
    expectShardedBatchEqualsReference(moe.dir.string(), "tp=2,ep=2");
    const auto& mla = test::cachedShrunkModel("deepseek-v3", scratch);
    expectShardedBatchEqualsReference(mla.dir.string(), "tp=2");
}

TEST(ServeSharded, TurnedOffTheStepsRunOneSequenceAtATime)
{
    Progress progress;
    auto loaded
        = serve::loadServedModel(kTiny, false, progress, {}, serve::ServedWeights::SpecOnly);
    ASSERT_TRUE(loaded) << loaded.error().message;
    auto ranks
        = parallel::ServedRanks::start(kTiny, *checkpoint::parseShardLayout("tp=2"), progress, {});
    ASSERT_TRUE(ranks) << ranks.error().message;
    serve::SchedulerOptions o;
    o.plan = *exec::parsePrecisionPlan("fp32");
    o.batchDecode = false;
    o.source = actions::shardedSource(std::shared_ptr<parallel::ServedRanks>(std::move(*ranks)));
    serve::Scheduler scheduler(loaded->spec, o);
    EXPECT_EQ(scheduler.decodePath(), "sequential (turned off)");
    const auto tokens = serveAll(scheduler, { { 1, 2, 3 }, { 4, 5 } }, { 3, 3 });
    EXPECT_EQ(tokens[0].size(), 3u);
    EXPECT_EQ(tokens[1].size(), 3u);
    EXPECT_EQ(scheduler.metrics().decodeBatches, 0);
    EXPECT_EQ(scheduler.metrics().prefillBatches, 0);
}

TEST(ServeSharded, RecurrentMixersOverRanksStepOneSequenceAtATimeAndSaySo)
{
    // Qwen3-Next's Gated DeltaNet layers keep a state per sequence the sharded batched step does
    // not split: its sequences step one at a time over the ranks, and the decode path names why.
    const auto scratch = test::processScratch("serve_sharded_recurrent");
    const auto& m = test::cachedShrunkHybrid("qwen3-next-80b-a3b", scratch);
    Progress progress;
    auto ranks
        = parallel::ServedRanks::start(m.dir, *checkpoint::parseShardLayout("tp=2"), progress, {});
    ASSERT_TRUE(ranks) << ranks.error().message;
    EXPECT_NE((*ranks)->batchRefusal().find("layer 0's mixer"), std::string::npos)
        << (*ranks)->batchRefusal();
    const std::int64_t a[] = { 1, 2, 3 };
    const std::int64_t b[] = { 4 };
    const std::span<const std::int64_t> ids[] = { a, b };
    const std::int64_t sequences[] = { *(*ranks)->open(8), *(*ranks)->open(8) };
    const std::int64_t starts[] = { 0, 0 };
    const auto refused = (*ranks)->feedBatch(sequences, ids, starts);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("a batched step over --plan tp=2"), std::string::npos)
        << refused.error().message;
    serve::SchedulerOptions o;
    o.plan = *exec::parsePrecisionPlan("fp32");
    o.source = actions::shardedSource(std::shared_ptr<parallel::ServedRanks>(std::move(*ranks)));
    serve::Scheduler scheduler(m.spec, o);
    EXPECT_EQ(scheduler.decodePath().rfind("sequential (plan tp=2,", 0), 0u)
        << scheduler.decodePath();
    const auto tokens = serveAll(scheduler, { { 1, 2, 3 }, { 4, 5 } }, { 3, 3 });
    EXPECT_EQ(tokens[0].size(), 3u);
    EXPECT_EQ(tokens[1].size(), 3u);
}
