// The scheduler's batched decode (issue #23): the running sequences' decode steps as one forward
// whose linear layers take every sequence's row at once, each row attending over its own cache.
// Greedy tokens must equal one sequence decoded alone (exec::SequenceDecoder, day0 run's forward).
#include "checkpoint/shrink.h"
#include "exec/batch_decode.h"
#include "exec/precision.h"
#include "model/config_reader.h"
#include "parallel_testkit.h"
#include "serve/bench_check.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

using namespace day0;
using namespace day0::serve;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// Submits every prompt at once (greedy, ignore_eos, `count` tokens each) and gathers the tokens.
std::vector<std::vector<std::int64_t>> serveAll(Scheduler& scheduler,
    const std::vector<std::vector<std::int64_t>>& prompts, const std::vector<std::int64_t>& counts)
{
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        GenerationRequest r;
        r.prompt = prompts[i];
        r.maxTokens = counts[i];
        r.ignoreEos = true;
        r.sampling.temperature = 0.0;
        auto submitted = scheduler.submit(std::move(r));
        EXPECT_EQ(submitted.admission, Scheduler::Admission::Accepted) << submitted.reason;
        streams.push_back(submitted.stream);
    }
    std::vector<std::vector<std::int64_t>> out(prompts.size());
    for (std::size_t i = 0; i < streams.size(); ++i) {
        if (!streams[i]) {
            continue;
        }
        RequestStream::Batch batch;
        do {
            batch = streams[i]->take(std::chrono::milliseconds(200));
            for (const auto& e : batch.tokens) {
                out[i].push_back(e.token);
            }
        } while (!batch.finish);
        EXPECT_EQ(*batch.finish, Finish::Length) << batch.error;
    }
    return out;
}

} // namespace

/// Six greedy sequences of `checkpoint` submitted at once: each one's tokens must equal it
/// decoded alone, with decode steps batched several rows a forward.
void expectBatchedEqualsAlone(const std::string& checkpoint)
{
    Progress progress;
    auto loaded = loadServedModel(checkpoint, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto plan = *exec::parsePrecisionPlan("fp32");
    // Different prompt lengths and output lengths, so the batch's rows sit at different
    // positions and sequences leave it at different steps (tokens below the shrunk models'
    // vocabulary of 250).
    const std::vector<std::vector<std::int64_t>> prompts { { 1, 2, 3 }, { 7 },
        { 9, 8, 7, 6, 5, 4, 3, 2, 1 }, { 100, 200 }, { 42, 42, 42, 42 }, { 5, 17, 249 } };
    const std::vector<std::int64_t> counts { 12, 20, 7, 16, 3, 25 };
    std::vector<std::vector<std::int64_t>> alone;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        auto g = greedyDecode(*loaded->engine, plan, prompts[i], counts[i], {});
        ASSERT_TRUE(g) << g.error().message;
        alone.push_back(g->tokens);
    }
    SchedulerOptions o;
    o.maxRunning = 8;
    o.plan = plan;
    Scheduler scheduler(std::move(*loaded->engine), o);
    EXPECT_EQ(scheduler.decodePath(), "batched");
    EXPECT_EQ(serveAll(scheduler, prompts, counts), alone);
    // The decode steps did run batched, several sequences per forward.
    const auto m = scheduler.metrics();
    EXPECT_TRUE(m.batchedDecode);
    EXPECT_GT(m.decodeBatches, 0);
    EXPECT_GT(m.decodeBatchRows, 2 * m.decodeBatches);
    EXPECT_NE(renderPrometheus(m).find("day0_decode_batched 1\n"), std::string::npos);
}

TEST(SchedulerBatch, BatchedDecodeGivesEachSequenceItsUnbatchedGreedyTokens)
{
    expectBatchedEqualsAlone(kTiny);
}

TEST(SchedulerBatch, MoeRowsRouteTheirOwnExpertsInABatchedStep)
{
    // Qwen3-MoE and Mixtral shrunk to 2 layers of 8 experts: each row of a batched step takes
    // its own top-k experts, so the tokens equal each sequence decoded alone.
    for (const char* config : { "qwen3-30b-a3b", "mixtral-8x7b" }) {
        SCOPED_TRACE(config);
        const auto dir = std::filesystem::path(::testing::TempDir()) / "scheduler_batch" / config;
        checkpoint::ShrinkOptions o;
        o.layers = 2;
        o.hidden = 64;
        o.heads = 4;
        o.experts = 8;
        o.vocab = 256;
        o.replace = true;
        Progress progress;
        auto shrunk = checkpoint::shrinkModel(config, dir, o, progress, {});
        ASSERT_TRUE(shrunk) << shrunk.error().message;
        expectBatchedEqualsAlone(dir.string());
    }
}

TEST(SchedulerBatch, MlaRowsAttendOverTheirOwnCachesInABatchedStep)
{
    // DeepSeek-V3 shrunk to 2 layers (MLA, a dense first layer, then shared and group-routed
    // experts): each row of a batched step (prefill or decode) writes its latent keys into its
    // own sequence's cache and attends over it, so the tokens equal each sequence decoded alone.
    const auto dir = std::filesystem::path(::testing::TempDir()) / "scheduler_batch" / "dsv3";
    checkpoint::ShrinkOptions o;
    o.layers = 2;
    o.hidden = 64;
    o.heads = 4;
    o.experts = 8;
    o.vocab = 256;
    o.replace = true;
    Progress progress;
    auto shrunk = checkpoint::shrinkModel("deepseek-v3", dir, o, progress, {});
    ASSERT_TRUE(shrunk) << shrunk.error().message;
    expectBatchedEqualsAlone(dir.string());
}

TEST(SchedulerBatch, RecurrentRowsAdvanceTheirOwnStatesInABatchedStep)
{
    // Qwen3-Next (three Gated DeltaNet layers, one gated full-attention layer, MoE with a gated
    // shared expert), Qwen3.5 (its split input projections, dense), Nemotron-H (Mamba-2, Mamba-2,
    // attention, relu² MLP) and Nemotron-3-Nano (Mamba-2 beside relu² MoE and attention): each
    // sequence's rows of a batched step (prefill or decode) run the conv window and the recurrent
    // state of that sequence only, so the tokens equal each sequence decoded alone.
    const auto scratch = test::processScratch("scheduler_batch_recurrent");
    for (const char* name :
        { "qwen3-next-80b-a3b", "qwen3.5-27b", "nemotron-h", "nemotron-3-nano-30b" }) {
        SCOPED_TRACE(name);
        const auto& m = test::cachedShrunkHybrid(name, scratch);
        EXPECT_EQ(exec::detail::batchDecodeRefusal(m.spec), "");
        expectBatchedEqualsAlone(m.dir.string());
    }
}

TEST(SchedulerBatch, KimiDeltaRowsAdvanceTheirOwnStatesInABatchedStep)
{
    // Kimi-Linear (three Kimi Delta Attention layers, the first with a dense MLP, then an MLA
    // layer without RoPE; sigmoid-routed MoE in the last three) and the same with Kimi-K3's
    // additions (latent MoE with its norm, MLA output gate, KDA safe gate and full-rank gate):
    // each sequence's rows of a batched step (prefill or decode) run the q, k and v conv windows
    // and the delta state of that sequence only, so the tokens equal each sequence decoded alone.
    const auto scratch = test::processScratch("scheduler_batch_kimi");
    for (const char* name : { "kimi-linear-48b-a3b", "kimi-linear-k3-additions" }) {
        SCOPED_TRACE(name);
        const auto& m = test::cachedShrunkHybrid(name, scratch);
        EXPECT_EQ(exec::detail::batchDecodeRefusal(m.spec), "");
        expectBatchedEqualsAlone(m.dir.string());
    }
}

TEST(SchedulerBatch, TurnedOffOrRefusedTheDecodeStepsRunOneAfterAnother)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    SchedulerOptions o;
    o.batchDecode = false;
    Scheduler scheduler(std::move(*loaded->engine), o);
    EXPECT_EQ(scheduler.decodePath(), "sequential (turned off)");
    const auto tokens = serveAll(scheduler, { { 1, 2 }, { 3 } }, { 4, 4 });
    EXPECT_EQ(tokens.size(), 2u);
    EXPECT_EQ(scheduler.metrics().decodeBatches, 0);
    EXPECT_NE(
        renderPrometheus(scheduler.metrics()).find("day0_decode_batched 0\n"), std::string::npos);
    // Families whose decode is not batched are named.
    auto dsa = model::loadModel("deepseek-v3.2");
    ASSERT_TRUE(dsa) << dsa.error().message;
    EXPECT_NE(exec::detail::batchDecodeRefusal(*dsa).find("DSA"), std::string::npos);
    auto gptOss = model::loadModel("gpt-oss-20b");
    ASSERT_TRUE(gptOss) << gptOss.error().message;
    EXPECT_NE(
        exec::detail::batchDecodeRefusal(*gptOss).find("mixture of experts"), std::string::npos);
    for (const char* batched : { "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "kimi-k2" }) {
        auto moe = model::loadModel(batched);
        ASSERT_TRUE(moe) << moe.error().message;
        EXPECT_EQ(exec::detail::batchDecodeRefusal(*moe), "") << batched;
    }
    auto llama = model::loadModel("llama-3.1-8b");
    ASSERT_TRUE(llama) << llama.error().message;
    EXPECT_EQ(exec::detail::batchDecodeRefusal(*llama), "");
}
