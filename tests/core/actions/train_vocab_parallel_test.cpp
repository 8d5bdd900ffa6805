// The vocab-parallel embedding and head of tensor-parallel checkpoint training (Megatron's
// VocabParallelEmbedding and vocab-parallel cross-entropy, exec::GradientOptions::vocabTotal):
// each TP rank holds its rows of model.embed_tokens.weight and lm_head.weight. That the tp=2
// loss curves equal one rank's (fp64, <= 1e-9) is train_checkpoint_test.cpp's
// CheckpointTrainableTensorParallel tests, which run through this split.
#include "actions/checkpoint_trainable.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "comm/in_process_communicator.h"
#include "shrunk.h"
#include "train/synthetic_corpus.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace day0;

namespace {

std::filesystem::path shrunkLlama(std::int64_t vocab)
{
    return actions::test::shrunkGqaLlama("llama-vocab-" + std::to_string(vocab), vocab);
}

/// The bytes each of tp=2's ranks holds of the embedding and the head in its flat buffer (8 B
/// a value, as the trainer stores it), against the whole model's.
void expectHalfTheVocabularyPerRank(const actions::CheckpointTrainable& m, const char* label)
{
    const auto whole = m.parameters();
    std::int64_t wholeBytes = 0;
    for (const auto& p : whole) {
        if (p.name == "model.embed_tokens.weight" || p.name == "lm_head.weight") {
            wholeBytes += 8 * p.numel();
        }
    }
    std::vector<std::int64_t> rankBytes(2, 0);
    const auto outcome = comm::runInProcess(2, [&](comm::Communicator& group) -> Result<void> {
        auto shard = m.tensorParallel(2, group.rank(), group);
        if (!shard) {
            return shard.error();
        }
        const auto params = (*shard)->parameters();
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (params[i].name != "model.embed_tokens.weight"
                && params[i].name != "lm_head.weight") {
                continue;
            }
            EXPECT_FALSE((*shard)->replicated(i)) << params[i].name;
            EXPECT_EQ(params[i].shape[0] * 2, m.spec().vocabSize) << params[i].name;
            EXPECT_EQ(params[i].shape[1], m.spec().hiddenSize) << params[i].name;
            rankBytes[std::size_t(group.rank())] += 8 * params[i].numel();
        }
        return success();
    });
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    std::printf("%s: embedding%s %lld B whole, %lld B and %lld B on the two tp=2 ranks\n", label,
        m.spec().tieEmbeddings ? " (tied head)" : " and head", static_cast<long long>(wholeBytes),
        static_cast<long long>(rankBytes[0]), static_cast<long long>(rankBytes[1]));
    EXPECT_GT(wholeBytes, 0);
    EXPECT_EQ(rankBytes[0] * 2, wholeBytes);
    EXPECT_EQ(rankBytes[1] * 2, wholeBytes);
}

} // namespace

TEST(TrainVocabParallel, EachTensorParallelRankHoldsHalfTheEmbeddingAndTheHead)
{
    auto llama = actions::CheckpointTrainable::load(shrunkLlama(250));
    ASSERT_TRUE(llama.ok()) << llama.error().message;
    ASSERT_FALSE(llama->spec().tieEmbeddings);
    expectHalfTheVocabularyPerRank(*llama, "llama-3.1-8b");
    auto deepseek
        = actions::CheckpointTrainable::load(actions::test::shrunk("deepseek-v3", "deepseek"));
    ASSERT_TRUE(deepseek.ok()) << deepseek.error().message;
    expectHalfTheVocabularyPerRank(*deepseek, "deepseek-v3");
}

TEST(TrainVocabParallel, TheRanksMeasuredWeightBuffersShrinkByHalfTheVocabulary)
{
    // The trainer's own buffer sizes (TrainerBuffers::weights, measured from what each rank
    // holds) at tp=1 and tp=2: the rank's share loses half of every split tensor, the
    // embedding and the head among them.
    auto m = actions::CheckpointTrainable::load(shrunkLlama(250));
    ASSERT_TRUE(m.ok()) << m.error().message;
    const train::SyntheticCorpus corpus(250, 5);
    train::TrainOptions o;
    o.steps = 1;
    o.globalBatch = 2;
    o.sequenceLength = 8;
    auto one = train::runTraining(*m, corpus, o);
    o.tp = 2;
    auto two = train::runTraining(*m, corpus, o);
    ASSERT_TRUE(one.ok() && two.ok());
    const std::int64_t whole = one->buffersPerRank[0].weights;
    // Replicated at tp=2: the norms (2 per layer and the final one).
    const std::int64_t h = m->spec().hiddenSize;
    const std::int64_t norms = 8 * (2 * m->spec().numLayers + 1) * h;
    for (const auto& b : two->buffersPerRank) {
        std::printf("weights buffer: %lld B at tp=1, %lld B on a tp=2 rank\n",
            static_cast<long long>(whole), static_cast<long long>(b.weights));
        EXPECT_EQ(b.weights, (whole - norms) / 2 + norms);
    }
}

TEST(TrainVocabParallel, RefusesAVocabularyTheRanksDoNotDivideByName)
{
    auto m = actions::CheckpointTrainable::load(shrunkLlama(251));
    ASSERT_TRUE(m.ok()) << m.error().message;
    train::TrainOptions o;
    o.steps = 1;
    o.tp = 2;
    const auto r = train::runTraining(*m, train::SyntheticCorpus(251, 5), o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_NE(r.error().message.find("tp=2 does not divide vocab_size=251"), std::string::npos)
        << r.error().message;
}
