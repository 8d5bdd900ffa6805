// Batched prefill (issue #23): prompts admitted at the same step boundary run as one forward
// whose linear layers take every prompt's rows at once, each prompt attending causally over its
// own cache. Each prompt's logits and greedy tokens must equal it prefilled alone
// (exec::SequenceDecoder, day0 run's forward).
#include "exec/precision.h"
#include "exec/sequence_decoder.h"
#include "serve/bench_check.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

using namespace day0;
using namespace day0::serve;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// Six prompts of different lengths (1 to 40 tokens).
const std::vector<std::vector<std::int64_t>>& prompts()
{
    static const std::vector<std::vector<std::int64_t>> p = [] {
        std::vector<std::vector<std::int64_t>> out { { 1, 2, 3 }, { 7 },
            { 9, 8, 7, 6, 5, 4, 3, 2, 1 }, { 100, 200 }, {}, { 5, 17, 250 } };
        for (int t = 0; t < 40; ++t) {
            out[4].push_back(1 + (t * 37) % 250);
        }
        return out;
    }();
    return p;
}

} // namespace

TEST(SchedulerPrefill, SixPromptsOfDifferentLengthsPrefilledTogetherEqualEachAlone)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto plan = *exec::parsePrecisionPlan("fp32");
    const auto& engine = *loaded->engine;
    std::vector<exec::SequenceDecoder> alone;
    std::vector<exec::SequenceDecoder> together;
    std::vector<std::vector<double>> aloneLogits;
    for (const auto& prompt : prompts()) {
        auto a = exec::SequenceDecoder::open(engine, plan, std::int64_t(prompt.size()) + 8);
        auto b = exec::SequenceDecoder::open(engine, plan, std::int64_t(prompt.size()) + 8);
        ASSERT_TRUE(a && b);
        alone.push_back(std::move(*a));
        together.push_back(std::move(*b));
        auto logits = alone.back().feed(prompt, {});
        ASSERT_TRUE(logits) << logits.error().message;
        aloneLogits.push_back(std::move(*logits));
    }
    std::vector<exec::SequenceDecoder*> seqs;
    std::vector<std::span<const std::int64_t>> tokens;
    for (std::size_t i = 0; i < together.size(); ++i) {
        seqs.push_back(&together[i]);
        tokens.emplace_back(prompts()[i]);
    }
    auto batched = exec::SequenceDecoder::feedBatch(seqs, tokens, {});
    ASSERT_TRUE(batched) << batched.error().message;
    ASSERT_EQ(batched->size(), prompts().size());
    for (std::size_t i = 0; i < prompts().size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(together[i].position(), std::int64_t(prompts()[i].size()));
        ASSERT_EQ((*batched)[i].size(), aloneLogits[i].size());
        double worst = 0.0;
        for (std::size_t v = 0; v < aloneLogits[i].size(); ++v) {
            worst = std::max(worst, std::abs((*batched)[i][v] - aloneLogits[i][v]));
        }
        // The same arithmetic over more rows: fp32 rounding at most.
        EXPECT_LT(worst, 1e-4);
        EXPECT_EQ(exec::greedyToken((*batched)[i]), exec::greedyToken(aloneLogits[i]));
    }
    // The caches the batched prefill wrote decode on as the ones written alone: four greedy
    // steps, alone and batched.
    std::vector<std::int64_t> next;
    for (std::size_t i = 0; i < prompts().size(); ++i) {
        next.push_back(exec::greedyToken((*batched)[i]));
    }
    std::vector<std::int64_t> aloneNext = next;
    for (int step = 0; step < 4; ++step) {
        auto rows = exec::SequenceDecoder::feedBatch(seqs, next, {});
        ASSERT_TRUE(rows) << rows.error().message;
        for (std::size_t i = 0; i < prompts().size(); ++i) {
            const std::int64_t feed[] = { aloneNext[i] };
            auto logits = alone[i].feed(feed, {});
            ASSERT_TRUE(logits) << logits.error().message;
            aloneNext[i] = exec::greedyToken(*logits);
            next[i] = exec::greedyToken((*rows)[i]);
        }
        EXPECT_EQ(next, aloneNext) << "step " << step;
    }
}

TEST(SchedulerPrefill, ABatchedPrefillOverflowingASequenceIsRefusedByName)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto plan = *exec::parsePrecisionPlan("fp32");
    auto a = exec::SequenceDecoder::open(*loaded->engine, plan, 8);
    auto b = exec::SequenceDecoder::open(*loaded->engine, plan, 2);
    ASSERT_TRUE(a && b);
    std::vector<exec::SequenceDecoder*> seqs { &*a, &*b };
    const std::vector<std::int64_t> three { 1, 2, 3 };
    std::vector<std::span<const std::int64_t>> tokens { three, three };
    auto r = exec::SequenceDecoder::feedBatch(seqs, tokens, {});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("overflow the sequence's capacity of 2"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(a->position(), 0) << "nothing advanced";
}

TEST(SchedulerPrefill, RequestsAdmittedTogetherPrefillAsOneForwardWithTheirGreedyTokens)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto plan = *exec::parsePrecisionPlan("fp32");
    const std::vector<std::int64_t> counts { 12, 20, 7, 16, 3, 25 };
    std::vector<std::vector<std::int64_t>> alone;
    for (std::size_t i = 0; i < prompts().size(); ++i) {
        auto g = greedyDecode(*loaded->engine, plan, prompts()[i], counts[i], {});
        ASSERT_TRUE(g) << g.error().message;
        alone.push_back(g->tokens);
    }
    SchedulerOptions o;
    o.maxRunning = 8;
    o.plan = plan;
    Scheduler scheduler(std::move(*loaded->engine), o);
    const auto request = [](std::vector<std::int64_t> prompt, std::int64_t count) {
        GenerationRequest r;
        r.prompt = std::move(prompt);
        r.maxTokens = count;
        r.ignoreEos = true;
        r.sampling.temperature = 0.0;
        return r;
    };
    // A long request keeps the loop busy with its prefill while the six arrive, so they are
    // admitted at the same step boundary.
    std::vector<std::int64_t> longPrompt;
    for (int t = 0; t < 480; ++t) {
        longPrompt.push_back(1 + (t * 13) % 250);
    }
    auto blocker = scheduler.submit(request(longPrompt, 2));
    ASSERT_TRUE(blocker.stream) << blocker.reason;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (std::size_t i = 0; i < prompts().size(); ++i) {
        auto submitted = scheduler.submit(request(prompts()[i], counts[i]));
        ASSERT_TRUE(submitted.stream) << submitted.reason;
        streams.push_back(submitted.stream);
    }
    for (std::size_t i = 0; i < streams.size(); ++i) {
        std::vector<std::int64_t> got;
        RequestStream::Batch batch;
        do {
            batch = streams[i]->take(std::chrono::milliseconds(200));
            for (const auto& e : batch.tokens) {
                got.push_back(e.token);
            }
        } while (!batch.finish);
        EXPECT_EQ(*batch.finish, Finish::Length) << batch.error;
        EXPECT_EQ(got, alone[i]) << "request " << i;
    }
    const auto m = scheduler.metrics();
    EXPECT_GE(m.prefillBatches, 1);
    EXPECT_GE(m.prefillBatchSequences, 2 * m.prefillBatches);
    EXPECT_NE(renderPrometheus(m).find("day0_prefill_batches_total "), std::string::npos);
}

TEST(SchedulerPrefill, TurnedOffEachPromptPrefillsAlone)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    SchedulerOptions o;
    o.batchPrefill = false;
    Scheduler scheduler(std::move(*loaded->engine), o);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& prompt : prompts()) {
        GenerationRequest r;
        r.prompt = prompt;
        r.maxTokens = 2;
        r.ignoreEos = true;
        auto submitted = scheduler.submit(std::move(r));
        ASSERT_TRUE(submitted.stream) << submitted.reason;
        streams.push_back(submitted.stream);
    }
    for (auto& s : streams) {
        RequestStream::Batch batch;
        do {
            batch = s->take(std::chrono::milliseconds(200));
        } while (!batch.finish);
        EXPECT_EQ(*batch.finish, Finish::Length) << batch.error;
    }
    EXPECT_EQ(scheduler.metrics().prefillBatches, 0);
}
