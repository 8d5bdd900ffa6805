// exec::runStreamed (issue #22) on the tiny Llama checkpoint (and a tiny Qwen3-MoE): the same
// result as Engine::run, progress counted in bytes read with the rate in its stage,
// cancellation, the next layer read ahead within the budget, routed experts in the resident
// peak, emulated precisions and inject mode, the streamed sequence of a sampled corpus, and the
// memory-size parser of --memory-budget.
#include "checkpoint/safetensors.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/layer_stream.h"
#include "exec/sequence_decoder.h"
#include "exec/streamed_sequence.h"
#include "tiny_models.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace {

using namespace day0;

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

exec::RunOptions options()
{
    exec::RunOptions o;
    o.promptIds = { 3, 7, 11, 2 };
    o.newTokens = 3;
    return o;
}

TEST(LayerStream, StreamedRunMatchesTheEngineBitForBit)
{
    auto opened = exec::openCheckpoint(kTiny);
    ASSERT_TRUE(opened) << opened.error().message;
    Progress p;
    auto engine = exec::Engine::create(opened->spec, *opened->weights, false, p, {});
    ASSERT_TRUE(engine) << engine.error().message;
    auto normal = engine->run(options(), p, {});
    ASSERT_TRUE(normal) << normal.error().message;
    Progress progress;
    auto streamed = exec::runStreamed(kTiny, opened->spec, options(), {}, progress, {});
    ASSERT_TRUE(streamed) << streamed.error().message;
    EXPECT_EQ(streamed->run.generated, normal->generated);
    const auto* a = normal->dump.tensor("lm_head");
    const auto* b = streamed->run.dump.tensor("lm_head");
    ASSERT_TRUE(a != nullptr && b != nullptr);
    ASSERT_EQ(a->byteSize(), b->byteSize());
    EXPECT_EQ(std::memcmp(a->rawData(), b->rawData(), std::size_t(a->byteSize())), 0);
    // Progress counts the bytes read, every step reading every weight once.
    const auto& stats = streamed->stats;
    EXPECT_EQ(stats.phasesLoaded, 3 * (opened->spec.numLayers + 3));
    EXPECT_GT(stats.bytesRead, 0u);
    EXPECT_EQ(progress.total(), std::int64_t(stats.bytesRead));
    EXPECT_EQ(progress.done(), progress.total());
    EXPECT_NE(progress.stage().find("decode step 2: "), std::string::npos) << progress.stage();
    EXPECT_NE(progress.stage().find("/s)"), std::string::npos) << progress.stage();
    EXPECT_GT(stats.peakRssBytes, 0u);
}

TEST(LayerStream, BudgetTooSmallForALayerIsRefusedByName)
{
    auto spec = exec::loadCheckpointModel(kTiny);
    ASSERT_TRUE(spec);
    Progress progress;
    exec::StreamOptions tight;
    tight.memoryBudget = 1024;
    auto r = exec::runStreamed(kTiny, *spec, options(), tight, progress, {});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("alone needs"), std::string::npos) << r.error().message;
}

TEST(LayerStream, CancelledRunStops)
{
    auto spec = exec::loadCheckpointModel(kTiny);
    ASSERT_TRUE(spec);
    std::stop_source stop;
    stop.request_stop();
    Progress progress;
    auto r = exec::runStreamed(kTiny, *spec, options(), {}, progress, stop.get_token());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled) << r.error().message;
}

/// The lm_head logits of two runs are the same bytes.
void expectSameLogits(const exec::RunResult& a, const exec::RunResult& b)
{
    EXPECT_EQ(a.generated, b.generated);
    const auto* x = a.dump.tensor("lm_head");
    const auto* y = b.dump.tensor("lm_head");
    ASSERT_TRUE(x != nullptr && y != nullptr);
    ASSERT_EQ(x->byteSize(), y->byteSize());
    EXPECT_EQ(std::memcmp(x->rawData(), y->rawData(), std::size_t(x->byteSize())), 0);
}

// The next layer is read and converted on the loader thread while this one computes, only where
// the two fit the budget together: unbounded, every load after the run's first is read ahead;
// with a budget of the largest layer alone no second layer is, and the weights resident stay
// within it.
// The logits are the same bytes either way.
TEST(LayerStream, TheNextLayerIsReadAheadOnlyWhereItFitsTheBudget)
{
    auto spec = exec::loadCheckpointModel(kTiny);
    ASSERT_TRUE(spec);
    Progress progress;
    auto unbounded = exec::runStreamed(kTiny, *spec, options(), {}, progress, {});
    ASSERT_TRUE(unbounded) << unbounded.error().message;
    const auto& ahead = unbounded->stats;
    // Three steps: the embedding of the first is read on the run's thread; every other load
    // (the next step's embedding during the head) is read ahead.
    EXPECT_EQ(ahead.phasesReadAhead, ahead.phasesLoaded - 1);
    EXPECT_GT(ahead.largestPairBytes, ahead.largestPhaseBytes);
    EXPECT_LE(ahead.residentPeakBytes, ahead.largestPairBytes);
    EXPECT_GT(ahead.readAheadSeconds, 0.0);

    exec::StreamOptions tight;
    tight.memoryBudget = ahead.largestPhaseBytes;
    auto bounded = exec::runStreamed(kTiny, *spec, options(), tight, progress, {});
    ASSERT_TRUE(bounded) << bounded.error().message;
    // Two decoder layers do not fit it (unbounded, the run held more); a small phase (the
    // final norm) still fits beside a layer.
    EXPECT_GT(ahead.residentPeakBytes, tight.memoryBudget);
    EXPECT_LT(bounded->stats.phasesReadAhead, ahead.phasesReadAhead);
    EXPECT_EQ(bounded->stats.phasesLoaded, ahead.phasesLoaded);
    EXPECT_LE(bounded->stats.residentPeakBytes, tight.memoryBudget);
    EXPECT_EQ(bounded->stats.bytesRead, ahead.bytesRead);
    expectSameLogits(bounded->run, unbounded->run);

    // A budget every pair fits reads as much ahead as none.
    exec::StreamOptions roomy;
    roomy.memoryBudget = ahead.largestPairBytes;
    auto fits = exec::runStreamed(kTiny, *spec, options(), roomy, progress, {});
    ASSERT_TRUE(fits) << fits.error().message;
    EXPECT_EQ(fits->stats.phasesReadAhead, ahead.phasesReadAhead);
    EXPECT_LE(fits->stats.residentPeakBytes, roomy.memoryBudget);
    expectSameLogits(fits->run, unbounded->run);
}

/// A copy of the tiny Llama in a scratch folder of its own (its file may be cut short).
std::filesystem::path copyOfTiny(const std::string& name)
{
    const auto dir = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const char* file : { "config.json", "model.safetensors" }) {
        std::filesystem::copy_file(std::filesystem::path(kTiny) / file, dir / file);
    }
    return dir;
}

// The file cut short while the run is under way, just as the loader thread starts reading layer
// 1 ahead: the run fails naming the file, the byte and the tensor, instead of crashing or
// hanging, and the loader thread is joined (the test returns).
TEST(LayerStream, AReadFailingOnTheLoaderThreadFailsTheRunByName)
{
    const auto dir = copyOfTiny("day0_stream_read_error");
    auto spec = exec::loadCheckpointModel(dir);
    ASSERT_TRUE(spec) << spec.error().message;
    auto file = checkpoint::SafetensorsFile::open(dir / "model.safetensors");
    ASSERT_TRUE(file) << file.error().message;
    const auto* first = file->find("model.layers.1.input_layernorm.weight");
    ASSERT_NE(first, nullptr);
    const auto cut = file->header().dataOffset + first->begin; // layer 1 onwards is gone
    exec::StreamOptions o;
    std::string failedOn;
    bool cutOnLoader = false;
    o.beforeRead = [&](const std::string& tensor, bool readAhead) {
        if (failedOn.empty() && tensor.starts_with("model.layers.1.")) {
            failedOn = tensor;
            cutOnLoader = readAhead;
            std::filesystem::resize_file(dir / "model.safetensors", cut);
        }
    };
    Progress progress;
    auto r = exec::runStreamed(dir, *spec, options(), o, progress, {});
    ASSERT_FALSE(r);
    EXPECT_TRUE(cutOnLoader) << "layer 1 was read on the run's thread, not ahead";
    EXPECT_EQ(r.error().code, ErrorCode::BadInput) << r.error().message;
    EXPECT_NE(r.error().message.find("model.safetensors"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("the file ends there"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(failedOn), std::string::npos) << r.error().message;
    std::filesystem::remove_all(dir);
}

// A stop requested while the loader thread reads a layer ahead ends the run as cancelled; the
// loader is joined and nothing after that layer is read.
TEST(LayerStream, CancelWhileTheLoaderReadsAheadStopsTheRun)
{
    auto spec = exec::loadCheckpointModel(kTiny);
    ASSERT_TRUE(spec);
    std::stop_source stop;
    exec::StreamOptions o;
    bool onLoader = false;
    int readsAfterStop = 0;
    o.beforeRead = [&](const std::string& tensor, bool readAhead) {
        if (stop.stop_requested()) {
            ++readsAfterStop;
            EXPECT_TRUE(tensor.starts_with("model.layers.1.")) << tensor << " read after the stop";
        } else if (tensor.starts_with("model.layers.1.")) {
            onLoader = readAhead;
            stop.request_stop();
        }
    };
    Progress progress;
    auto r = exec::runStreamed(kTiny, *spec, options(), o, progress, stop.get_token());
    ASSERT_FALSE(r);
    EXPECT_TRUE(onLoader);
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled) << r.error().message;
    // The layer under way gets its tensors (not converted); no later phase is loaded (the
    // forward stops before the final norm's and the head's weights).
    EXPECT_LT(readsAfterStop, 9);
    EXPECT_LT(progress.done(), progress.total());
}

// A MoE layer's routed experts, read once its router has chosen, count in the weights resident
// at most: with a budget that leaves no room for reading a second layer ahead, the peak holds
// the layer's other tensors and the top-2 experts its tokens chose at least.
TEST(LayerStream, RoutedExpertsCountInTheResidentPeak)
{
    const auto moe = test::tinyQwen3Moe();
    const auto dir = std::filesystem::temp_directory_path()
        / ("day0_stream_moe_" + std::to_string(::getpid()));
    test::writeCheckpoint(moe, dir);
    std::uint64_t others = 0;
    std::uint64_t oneExpert = 0;
    for (const auto& [name, t] : moe.weights) {
        if (!name.starts_with("model.layers.0.")) {
            continue;
        }
        if (name.find(".experts.0.") != std::string::npos) {
            oneExpert += std::uint64_t(t.numel()) * 4;
        } else if (name.find(".experts.") == std::string::npos) {
            others += std::uint64_t(t.numel()) * 4;
        }
    }
    auto spec = exec::loadCheckpointModel(dir);
    ASSERT_TRUE(spec) << spec.error().message;
    Progress progress;
    auto unbounded = exec::runStreamed(dir, *spec, options(), {}, progress, {});
    ASSERT_TRUE(unbounded) << unbounded.error().message;
    exec::StreamOptions tight;
    tight.memoryBudget = unbounded->stats.largestPhaseBytes;
    auto r = exec::runStreamed(dir, *spec, options(), tight, progress, {});
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GT(r->stats.expertBytesSkipped, 0u);
    EXPECT_GE(r->stats.residentPeakBytes, others + 2 * oneExpert);
    EXPECT_LE(r->stats.residentPeakBytes, tight.memoryBudget);
    expectSameLogits(r->run, unbounded->run);
}

TEST(LayerStream, EmulatedPrecisionsStreamBitForBit)
{
    auto opened = exec::openCheckpoint(kTiny);
    ASSERT_TRUE(opened) << opened.error().message;
    Progress p;
    auto engine = exec::Engine::create(opened->spec, *opened->weights, false, p, {});
    ASSERT_TRUE(engine) << engine.error().message;
    for (const char* precision : { "bf16", "fp8-e4m3", "int8" }) {
        auto o = options();
        auto plan = exec::parsePrecisionPlan(precision);
        ASSERT_TRUE(plan) << plan.error().message;
        o.precision = *plan;
        auto normal = engine->run(o, p, {});
        ASSERT_TRUE(normal) << normal.error().message;
        auto streamed = exec::runStreamed(kTiny, opened->spec, o, {}, p, {});
        ASSERT_TRUE(streamed) << precision << ": " << streamed.error().message;
        SCOPED_TRACE(precision);
        expectSameLogits(streamed->run, *normal);
        // The rounded copies of the running layer's matrices count against a budget.
        auto fp32 = exec::runStreamed(kTiny, opened->spec, options(), {}, p, {});
        ASSERT_TRUE(fp32);
        EXPECT_GT(streamed->stats.largestPhaseBytes, fp32->stats.largestPhaseBytes);
    }
}

TEST(LayerStream, InjectModeStreamsBitForBit)
{
    auto opened = exec::openCheckpoint(kTiny);
    ASSERT_TRUE(opened) << opened.error().message;
    Progress p;
    auto f64 = exec::Engine::create(opened->spec, *opened->weights, true, p, {});
    ASSERT_TRUE(f64) << f64.error().message;
    auto ro = options();
    ro.precision.base = exec::PrecisionMode::F64;
    auto reference = f64->run(ro, p, {});
    ASSERT_TRUE(reference) << reference.error().message;
    auto engine = exec::Engine::create(opened->spec, *opened->weights, false, p, {});
    ASSERT_TRUE(engine) << engine.error().message;
    auto o = options();
    o.precision.base = exec::PrecisionMode::BF16;
    o.forcedTokens.assign(reference->generated.begin(), reference->generated.end() - 1);
    o.injectFrom = &reference->dump;
    auto normal = engine->run(o, p, {});
    ASSERT_TRUE(normal) << normal.error().message;
    auto streamed = exec::runStreamed(kTiny, opened->spec, o, {}, p, {});
    ASSERT_TRUE(streamed) << streamed.error().message;
    expectSameLogits(streamed->run, *normal);
}

TEST(LayerStream, StreamedSequenceFeedsAsTheDecoderDoes)
{
    auto opened = exec::openCheckpoint(kTiny);
    ASSERT_TRUE(opened) << opened.error().message;
    Progress p;
    auto engine = exec::Engine::create(opened->spec, *opened->weights, false, p, {});
    ASSERT_TRUE(engine) << engine.error().message;
    for (const auto base : { exec::PrecisionMode::F32, exec::PrecisionMode::BF16 }) {
        exec::PrecisionPlan plan;
        plan.base = base;
        auto decoder = exec::SequenceDecoder::open(*engine, plan, 6);
        ASSERT_TRUE(decoder) << decoder.error().message;
        auto streamed = exec::StreamedSequence::open(kTiny, opened->spec, plan, 6, {}, 3, p, {});
        ASSERT_TRUE(streamed) << streamed.error().message;
        const std::vector<std::vector<std::int64_t>> feeds { { 3, 7, 11 }, { 2 }, { 5 } };
        for (const auto& ids : feeds) {
            auto a = decoder->feed(ids, {});
            auto b = streamed->feed(ids);
            ASSERT_TRUE(a && b);
            EXPECT_EQ(*a, *b) << exec::precisionName(base);
        }
        EXPECT_FALSE(streamed->feed(std::vector<std::int64_t> { 1, 2, 3, 4 })) << "over capacity";
    }
}

TEST(LayerStream, MemorySizes)
{
    EXPECT_EQ(*exec::parseMemorySize("512M"), 512ull << 20);
    EXPECT_EQ(*exec::parseMemorySize("2G"), 2ull << 30);
    EXPECT_EQ(*exec::parseMemorySize("1.5GiB"), 3ull << 29);
    EXPECT_EQ(*exec::parseMemorySize("300MB"), 300ull << 20);
    EXPECT_EQ(*exec::parseMemorySize("4096"), 4096ull);
    EXPECT_EQ(*exec::parseMemorySize("64k"), 64ull << 10);
    for (const char* bad : { "", "lots", "-1G", "0", "5X", "1.5.5G" }) {
        EXPECT_FALSE(exec::parseMemorySize(bad)) << bad;
    }
}

} // namespace
