// Checkpoints and stability drills: a killed rank's job resumes bit-identically, a corrupt
// newest checkpoint is refused by its manifest, failing and silent ranks are detected.
#include "base/file_util.h"
#include "comm/in_process_communicator.h"
#include "train/checkpoints.h"
#include "train/next_token_mlp.h"
#include "train/synthetic_corpus.h"
#include "train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace day0;
using namespace day0::train;
namespace fs = std::filesystem;

namespace {

/// A fresh folder under the temporary directory, removed at the end of the test.
struct ScratchDir {
    fs::path path;
    explicit ScratchDir(const std::string& name)
        : path(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid())))
    {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~ScratchDir() { fs::remove_all(path); }
};

/// fp32, dp=2, ZeRO-1 and top-K with error feedback: every piece of per-rank state (master
/// shard, moments, residual) must come back from a checkpoint for a resumed run to match.
TrainOptions drillRun(const fs::path& dir)
{
    TrainOptions o;
    o.steps = 40;
    o.globalBatch = 8;
    o.sequenceLength = 16;
    o.seed = 5;
    o.schedule = { ScheduleKind::WarmupCosine, 2e-2, 2e-3, 4, 40 };
    o.precision = TrainPrecision::F32;
    o.dp = 2;
    o.zero = 1;
    o.compression = *CompressionOptions::parse("topk:0.05");
    o.checkpointDir = dir;
    o.checkpointEvery = 5;
    o.keepLast = 2;
    return o;
}

void expectBitIdentical(const TrainResult& a, const TrainResult& b)
{
    ASSERT_EQ(a.history.size(), b.history.size());
    for (std::size_t i = 0; i < a.history.size(); ++i) {
        EXPECT_EQ(a.history[i].step, b.history[i].step);
        EXPECT_EQ(a.history[i].loss, b.history[i].loss) << "step " << i;
        EXPECT_EQ(a.history[i].gradNorm, b.history[i].gradNorm) << "step " << i;
        EXPECT_EQ(a.history[i].lr, b.history[i].lr) << "step " << i;
    }
    EXPECT_EQ(a.finalWeights, b.finalWeights);
}

std::vector<std::string> entries(const fs::path& dir)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
        names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

bool anyContains(const std::vector<std::string>& lines, const std::string& text)
{
    return std::any_of(lines.begin(), lines.end(),
        [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

} // namespace

TEST(TrainDrill, KillAtARandomStepResumesToABitIdenticalLossCurve)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    ScratchDir plainDir("day0_train_plain");
    auto plain = runTraining(model, corpus, drillRun(plainDir.path));
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    // Only the newest two checkpoints are kept, and no temporary is left behind.
    EXPECT_EQ(
        entries(plainDir.path), (std::vector<std::string> { "step-00000035", "step-00000040" }));

    // The kill step, drawn from a fixed seed: not on a checkpoint boundary's far side only.
    std::uint64_t state = 2026;
    const std::int64_t killAt = 1 + std::int64_t(splitMix64(state) % 38);
    ScratchDir drillDir("day0_train_drill");
    TrainOptions o = drillRun(drillDir.path);
    o.drill = Drill { DrillKind::Kill, killAt, 1 };
    o.maxRestarts = 1;
    auto drilled = runTraining(model, corpus, o);
    ASSERT_TRUE(drilled.ok()) << drilled.error().message;
    EXPECT_EQ(drilled->restarts, 1);
    const std::int64_t lastCheckpoint = killAt / 5 * 5;
    std::printf("killed rank 1 at step %lld, resumed from step %lld:\n", (long long)killAt,
        (long long)drilled->resumedFromStep);
    for (const auto& e : drilled->events) {
        std::printf("  %s\n", e.c_str());
    }
    EXPECT_EQ(drilled->resumedFromStep, lastCheckpoint == 0 ? -1 : lastCheckpoint);
    EXPECT_TRUE(
        anyContains(drilled->events, fmt::format("drill: rank 1 killed at step {}", killAt)));
    expectBitIdentical(*plain, *drilled);

    // Every kill step gives the same curve (the seed's draw is one of them).
    for (const std::int64_t step : { 5, 9, 39 }) {
        ScratchDir d("day0_train_drill_each");
        TrainOptions each = drillRun(d.path);
        each.drill = Drill { DrillKind::Kill, step, 0 };
        each.maxRestarts = 1;
        auto r = runTraining(model, corpus, each);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_EQ(r->resumedFromStep, step / 5 * 5);
        expectBitIdentical(*plain, *r);
    }
}

TEST(TrainDrill, AKilledRankWithoutRestartsFailsTheJobByName)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    ScratchDir dir("day0_train_kill_norestart");
    TrainOptions o = drillRun(dir.path);
    o.drill = Drill { DrillKind::Kill, 7, 1 };
    auto r = runTraining(model, corpus, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "drill: rank 1 killed at step 7");
}

TEST(TrainDrill, AFlippedByteInTheNewestCheckpointFallsBackToThePreviousAndSaysWhy)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    ScratchDir dir("day0_train_corrupt");
    TrainOptions o = drillRun(dir.path);
    o.keepLast = 3;
    auto plain = runTraining(model, corpus, o);
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    const auto victim = dir.path / "step-00000040" / "rank-00001.bin";
    {
        std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(100);
        char c = 0;
        f.read(&c, 1);
        c = char(c ^ 0x01);
        f.seekp(100);
        f.write(&c, 1);
    }
    o.resume = true;
    auto resumed = runTraining(model, corpus, o);
    ASSERT_TRUE(resumed.ok()) << resumed.error().message;
    for (const auto& e : resumed->events) {
        std::printf("  %s\n", e.c_str());
    }
    EXPECT_EQ(resumed->resumedFromStep, 35);
    EXPECT_TRUE(anyContains(resumed->events,
        "checkpoint step-00000040 refused: step-00000040/rank-00001.bin: SHA-256 "));
    EXPECT_TRUE(anyContains(resumed->events, "but the manifest records"));
    EXPECT_TRUE(anyContains(resumed->events, "resuming from step-00000035 (after step 35)"));
    expectBitIdentical(*plain, *resumed);
    // The rerun rewrote step 40 as a valid checkpoint in place of the corrupt one.
    std::vector<std::string> notes;
    CheckpointStore store(dir.path, 3);
    auto newest = store.findNewestValid({ 0, 2, configurationKey(model, o) }, notes);
    ASSERT_TRUE(newest.ok() && newest->has_value());
    EXPECT_EQ((*newest)->meta.step, 40);
    EXPECT_TRUE(notes.empty());

    // A checkpoint of another configuration is refused outright, not skipped.
    TrainOptions other = o;
    other.dp = 1;
    other.globalBatch = 8;
    auto refused = runTraining(model, corpus, other);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("written by another configuration"), std::string::npos)
        << refused.error().message;
}

TEST(TrainDrill, ARankFailingMidAllReduceStopsTheJobWithItsReason)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = drillRun({});
    o.checkpointDir.clear();
    o.checkpointEvery = 0;
    o.drill = Drill { DrillKind::Fail, 3, 1 };
    auto r = runTraining(model, corpus, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::CheckFailed);
    EXPECT_EQ(r.error().message, "drill: rank 1 failed during the gradient all-reduce of step 3");
}

TEST(TrainDrill, ASilentRankIsDetectedWithinTheCommunicatorTimeout)
{
    const NextTokenMlp model({});
    const SyntheticCorpus corpus(32, 3);
    TrainOptions o = drillRun({});
    o.checkpointDir.clear();
    o.checkpointEvery = 0;
    o.commTimeout = Seconds { 0.5 };
    o.drill = Drill { DrillKind::Hang, 2, 1 };
    auto r = runTraining(model, corpus, o);
    ASSERT_FALSE(r.ok());
    const auto& m = r.error().message;
    std::printf("%s\n", m.c_str());
    EXPECT_NE(m.find("step 2 rank 0: gradient all-reduce failed after"), std::string::npos) << m;
    EXPECT_NE(m.find("timed out after"), std::string::npos) << m;
    EXPECT_NE(m.find("ranks not arrived: 1"), std::string::npos) << m;
    // The wait the message reports is the timeout's (not the silent rank's 1.2 s sleep).
    double waited = 0.0;
    const auto at = m.find("failed after ");
    ASSERT_NE(at, std::string::npos);
    waited = std::stod(m.substr(at + 13));
    EXPECT_GE(waited, 0.45);
    EXPECT_LT(waited, 1.2);
}

TEST(TrainCheckpoint, ShardsRoundTripAndTruncationsAreNamed)
{
    RankShard s { 12, 1, 100, { 1.0, 2.0 }, { 0.1, 0.2 }, { 0.01, 0.02 }, { -1.0, 0.5 } };
    const auto bytes = encodeShard(s);
    auto back = decodeShard(bytes, "x.bin");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->step, 12);
    EXPECT_EQ(back->shardBegin, 100);
    EXPECT_EQ(back->residual, s.residual);
    auto cut = decodeShard(std::string_view(bytes).substr(0, bytes.size() - 3), "x.bin");
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().message.find("x.bin: ends at byte"), std::string::npos);
    EXPECT_NE(cut.error().message.find("'residual'"), std::string::npos);
    EXPECT_FALSE(decodeShard("garbage", "y.bin").ok());
}

TEST(TrainCheckpoint, EveryStepFolderIsSeenInStepOrderWhateverItsDigits)
{
    // "step-100000000" sorts before "step-00000002" as text and is longer than eight digits:
    // the store reads the number, so it is the newest, looked at first, and refused with a note.
    ScratchDir dir("day0_train_steps");
    const CheckpointStore store(dir.path, 3);
    std::vector<StepRecord> history;
    for (const std::int64_t step : { 1, 2 }) {
        history.push_back({ step - 1, 1.0, 1.0, 1e-3 }); // the steps before the checkpoint
        auto saved = comm::runInProcess(1, [&](comm::Communicator& c) -> Result<void> {
            RankShard s { step, 0, 0, { 1.0 }, { 0.0 }, { 0.0 }, {} };
            return store.save(c, s, { step, 1, "steps" }, history);
        });
        ASSERT_TRUE(saved.ok()) << saved.error().message;
    }
    fs::create_directories(dir.path / "step-100000000");
    std::vector<std::string> notes;
    auto newest = store.findNewestValid({ 0, 1, "steps" }, notes);
    ASSERT_TRUE(newest.ok()) << newest.error().message;
    ASSERT_TRUE(newest->has_value()) << fmt::format("{}", fmt::join(notes, "; "));
    EXPECT_EQ((*newest)->meta.step, 2);
    ASSERT_EQ(notes.size(), 1U);
    EXPECT_NE(notes.front().find("step-100000000"), std::string::npos) << notes.front();
}
