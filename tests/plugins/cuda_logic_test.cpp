// The CUDA plugin's host logic without a GPU: the caching pool (over malloc), the reduction of
// device tap statistics, which anchors are copied in full, the choice of cuBLAS path and the
// cache of resident weights.
#include "device_pool.h"
#include "gemm_plan.h"
#include "numerics/tensor.h"
#include "resident_weights.h"
#include "tap_logic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

namespace day0::cuda {
namespace {

struct CountingAllocator {
    int allocations = 0;
    int releases = 0;
    int failuresLeft = 0;
    DevicePool pool()
    {
        return DevicePool(
            [this](std::size_t bytes) -> Result<void*> {
                if (failuresLeft > 0) {
                    --failuresLeft;
                    return Error::unsupported("out of memory");
                }
                ++allocations;
                return std::malloc(bytes);
            },
            [this](void* p) {
                ++releases;
                std::free(p);
            });
    }
};

TEST(DevicePool, SizeClassesRoundUp)
{
    EXPECT_EQ(DevicePool::sizeClass(0), 512u);
    EXPECT_EQ(DevicePool::sizeClass(1), 512u);
    EXPECT_EQ(DevicePool::sizeClass(512), 512u);
    EXPECT_EQ(DevicePool::sizeClass(513), 1024u);
    EXPECT_EQ(DevicePool::sizeClass((1u << 20) - 1), std::size_t(1) << 20);
    EXPECT_EQ(DevicePool::sizeClass((1u << 20) + 1), std::size_t(2) << 20);
    EXPECT_EQ(DevicePool::sizeClass((std::size_t(5) << 20)), std::size_t(6) << 20);
}

TEST(DevicePool, ReusesFreedBlocksOfTheSameClass)
{
    CountingAllocator a;
    {
        DevicePool pool = a.pool();
        auto p1 = pool.allocate(1000);
        ASSERT_TRUE(p1.ok());
        EXPECT_EQ(pool.bytesInUse(), 1024u);
        ASSERT_TRUE(pool.release(*p1).ok());
        EXPECT_EQ(pool.bytesCached(), 1024u);
        auto p2 = pool.allocate(900); // same class
        ASSERT_TRUE(p2.ok());
        EXPECT_EQ(*p2, *p1);
        EXPECT_EQ(pool.rawAllocations(), 1u);
        auto p3 = pool.allocate(5000); // another class: a new block
        ASSERT_TRUE(p3.ok());
        EXPECT_EQ(pool.rawAllocations(), 2u);
        EXPECT_EQ(pool.peakBytes(), 1024u + 5120u);
        EXPECT_FALSE(pool.release(reinterpret_cast<void*>(0x10)).ok());
        EXPECT_TRUE(pool.release(nullptr).ok());
    }
    EXPECT_EQ(a.allocations, 2);
    EXPECT_EQ(a.releases, 2); // the destructor frees live and cached blocks
}

TEST(DevicePool, EmptiesItsCacheAndRetriesWhenTheDeviceIsFull)
{
    CountingAllocator a;
    DevicePool pool = a.pool();
    auto p = pool.allocate(4096);
    ASSERT_TRUE(pool.release(*p).ok());
    a.failuresLeft = 1;
    auto q = pool.allocate(100000);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(a.releases, 1); // the cached 4 KiB block went back first
    EXPECT_EQ(pool.bytesCached(), 0u);
    a.failuresLeft = 2;
    auto r = pool.allocate(10);
    EXPECT_FALSE(r.ok()); // nothing cached to give back: the error comes through
}

TEST(TapLogic, BlockPartialsCombineToTheReferenceStatistics)
{
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.5f, 2.0f);
    std::vector<float> v(1000);
    for (auto& x : v) {
        x = d(rng);
    }
    v[10] = std::numeric_limits<float>::quiet_NaN();
    v[20] = std::numeric_limits<float>::infinity();
    v[30] = -std::numeric_limits<float>::infinity();
    // Split as the kernel's grid-stride loop does across 7 blocks of 1 thread; one block empty.
    std::vector<TapBlock> blocks(8);
    for (auto& b : blocks) {
        b.min = std::numeric_limits<float>::max();
        b.max = -std::numeric_limits<float>::max();
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
        auto& b = blocks[i % 7];
        const float x = v[i];
        if (std::isnan(x)) {
            ++b.nan;
        } else if (std::isinf(x)) {
            ++b.inf;
        } else {
            ++b.finite;
            b.sum += x;
            b.sumSquares += double(x) * x;
            b.min = std::min(b.min, x);
            b.max = std::max(b.max, x);
        }
    }
    const auto got = combineTapBlocks(blocks, std::int64_t(v.size()));
    const auto expect
        = numerics::computeStats(numerics::Tensor::fromFloats({ std::int64_t(v.size()) }, v));
    EXPECT_EQ(got.count, expect.count);
    EXPECT_EQ(got.nanCount, 1);
    EXPECT_EQ(got.infCount, 2);
    EXPECT_DOUBLE_EQ(got.min, expect.min);
    EXPECT_DOUBLE_EQ(got.max, expect.max);
    EXPECT_DOUBLE_EQ(got.absMax, expect.absMax);
    EXPECT_NEAR(got.mean, expect.mean, 1e-12);
    EXPECT_NEAR(got.rms, expect.rms, 1e-12);

    const std::vector<TapBlock> empty(4);
    const auto none = combineTapBlocks(empty, 0);
    EXPECT_EQ(none.min, 0.0);
    EXPECT_EQ(none.rms, 0.0);
}

TEST(TapLogic, OnlySelectedAnchorsAreCopiedInFull)
{
    const TapSelection selection({ "model.layers.3", "model.norm" });
    EXPECT_TRUE(selection.copiesFull("model.layers.3"));
    EXPECT_TRUE(selection.copiesFull("model.layers.3.mlp"));
    EXPECT_TRUE(selection.copiesFull("model.layers.3#in0"));
    EXPECT_FALSE(selection.copiesFull("model.layers.30"));
    EXPECT_FALSE(selection.copiesFull("model.layers.2.mlp"));
    EXPECT_TRUE(selection.copiesFull("lm_head"));
    EXPECT_TRUE(selection.copiesFull("model.norm"));
    EXPECT_FALSE(TapSelection().copiesFull("model.layers.0"));
    EXPECT_TRUE(TapSelection({}, true).copiesFull("model.layers.0"));
}

TEST(GemmPlan, PathsFollowModeScalingAndDevice)
{
    using exec::Fp8Scaling;
    using exec::PrecisionMode;
    EXPECT_EQ(
        planGemm(PrecisionMode::BF16, Fp8Scaling::PerTensor, 7, 9, 8, 0).path, GemmPath::BF16);
    EXPECT_EQ(planGemm(PrecisionMode::F16, Fp8Scaling::PerTensor, 7, 9, 8, 0).path, GemmPath::F16);
    EXPECT_EQ(planGemm(PrecisionMode::F32, Fp8Scaling::PerTensor, 7, 9, 9, 0).path, GemmPath::F32);
    const auto fp8 = planGemm(PrecisionMode::F8E4M3, Fp8Scaling::PerTensor, 128, 64, 9, 0);
    EXPECT_EQ(fp8.path, GemmPath::Fp8);
    EXPECT_TRUE(fp8.roundOutputToBf16);
    // Ampere has no fp8 tensor cores; Ada (8.9) has.
    EXPECT_EQ(planGemm(PrecisionMode::F8E4M3, Fp8Scaling::PerTensor, 128, 64, 8, 0).path,
        GemmPath::F32OnRounded);
    EXPECT_EQ(
        planGemm(PrecisionMode::F8E4M3, Fp8Scaling::PerTensor, 128, 64, 8, 9).path, GemmPath::Fp8);
    // Misaligned widths, block scales and e5m2×e5m2 take the rounded fp32 path.
    EXPECT_EQ(planGemm(PrecisionMode::F8E4M3, Fp8Scaling::PerTensor, 100, 64, 9, 0).path,
        GemmPath::F32OnRounded);
    EXPECT_EQ(planGemm(PrecisionMode::F8E4M3, Fp8Scaling::Block, 128, 64, 9, 0).path,
        GemmPath::F32OnRounded);
    EXPECT_EQ(planGemm(PrecisionMode::F8E5M2, Fp8Scaling::PerTensor, 128, 64, 9, 0).path,
        GemmPath::F32OnRounded);
    const auto int8 = planGemm(PrecisionMode::Int8, Fp8Scaling::PerTensor, 128, 64, 9, 0);
    EXPECT_EQ(int8.path, GemmPath::F32OnRounded);
    EXPECT_TRUE(int8.roundInputOnHost);
    EXPECT_NE(describeGemm(fp8).find("fp8 e4m3"), std::string::npos);
}

} // namespace
} // namespace day0::cuda

namespace day0::cuda {
namespace {

/// A host "device" for the weight cache: copies into malloc'd blocks and counts them.
struct FakeDevice {
    int uploads = 0;
    int frees = 0;
    std::vector<void*> live;
    ResidentWeights cache(std::size_t budget)
    {
        return ResidentWeights(budget, [this](void* p) {
            ++frees;
            live.erase(std::find(live.begin(), live.end(), p));
            std::free(p);
        });
    }
    ResidentWeights::Upload upload(const std::vector<float>& host)
    {
        return [this, &host]() -> Result<void*> {
            ++uploads;
            void* p = std::malloc(host.size() * sizeof(float));
            std::memcpy(p, host.data(), host.size() * sizeof(float));
            live.push_back(p);
            return p;
        };
    }
};

ResidentWeights::Key keyOf(const std::vector<float>& w, int format = 0)
{
    return { w.data(), std::int64_t(w.size()), format };
}

TEST(ResidentWeights, AWeightIsUploadedOnceAndServedFromTheDeviceAfter)
{
    FakeDevice device;
    auto cache = device.cache(1 << 20);
    const std::vector<float> w(1000, 1.5f);
    void* first = *cache.find(keyOf(w), 4000, device.upload(w));
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(*cache.find(keyOf(w), 4000, device.upload(w)), first);
    }
    EXPECT_EQ(device.uploads, 1);
    EXPECT_EQ(cache.hits(), 5);
    EXPECT_EQ(static_cast<float*>(first)[999], 1.5f);
    // The same host buffer in another device format is another copy.
    EXPECT_NE(*cache.find(keyOf(w, 1), 2000, device.upload(w)), first);
    EXPECT_EQ(device.uploads, 2);
    EXPECT_EQ(cache.bytes(), 6000U);
}

TEST(ResidentWeights, TheLeastRecentlyUsedCopyIsEvictedWithinTheBudget)
{
    FakeDevice device;
    auto cache = device.cache(10000);
    const std::vector<float> a(1000), b(1000), c(1000);
    ASSERT_TRUE(cache.find(keyOf(a), 4000, device.upload(a)).ok());
    ASSERT_TRUE(cache.find(keyOf(b), 4000, device.upload(b)).ok());
    ASSERT_TRUE(cache.find(keyOf(a), 4000, device.upload(a)).ok()); // a is now the most recent
    ASSERT_TRUE(cache.find(keyOf(c), 4000, device.upload(c)).ok()); // evicts b
    EXPECT_EQ(cache.evictions(), 1);
    EXPECT_EQ(cache.entries(), 2U);
    EXPECT_LE(cache.bytes(), cache.budget());
    ASSERT_TRUE(cache.find(keyOf(a), 4000, device.upload(a)).ok());
    EXPECT_EQ(device.uploads, 3) << "a stayed resident";
    ASSERT_TRUE(cache.find(keyOf(b), 4000, device.upload(b)).ok());
    EXPECT_EQ(device.uploads, 4) << "b was evicted and comes back";
    EXPECT_EQ(device.live.size(), cache.entries());
}

TEST(ResidentWeights, LargerThanTheBudgetIsNotKeptAndClearFreesEverything)
{
    FakeDevice device;
    {
        auto cache = device.cache(8000);
        const std::vector<float> big(4000), small(100);
        auto r = cache.find(keyOf(big), 16000, device.upload(big));
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(*r, nullptr);
        EXPECT_EQ(device.uploads, 0);
        ASSERT_TRUE(cache.find(keyOf(small), 400, device.upload(small)).ok());
        cache.clear();
        EXPECT_EQ(cache.entries(), 0U);
        EXPECT_EQ(cache.bytes(), 0U);
        EXPECT_TRUE(device.live.empty());
        // After clear the same address is uploaded again (its contents may have changed).
        ASSERT_TRUE(cache.find(keyOf(small), 400, device.upload(small)).ok());
        EXPECT_EQ(device.uploads, 2);
    }
    EXPECT_TRUE(device.live.empty()) << "the destructor frees what is left";
}

TEST(ResidentWeights, AFailedUploadIsReportedAndNotCached)
{
    FakeDevice device;
    auto cache = device.cache(8000);
    const std::vector<float> w(10);
    auto r = cache.find(keyOf(w), 40, []() -> Result<void*> {
        return Error::unsupported("cudaMalloc of 40 B failed: out of memory");
    });
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "cudaMalloc of 40 B failed: out of memory");
    EXPECT_EQ(cache.entries(), 0U);
    ASSERT_TRUE(cache.find(keyOf(w), 40, device.upload(w)).ok());
    EXPECT_EQ(device.uploads, 1);
}

} // namespace
} // namespace day0::cuda
