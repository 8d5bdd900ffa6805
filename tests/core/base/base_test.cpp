#include "base/dtype.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/progress.h"
#include "base/result.h"
#include "base/strong_id.h"
#include "base/thread_pool.h"
#include "base/units.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <type_traits>

using namespace day0;

TEST(Result, CarriesValueOrError)
{
    Result<int> good = 42;
    ASSERT_TRUE(good.ok());
    EXPECT_EQ(*good, 42);
    Result<int> bad = Error::badInput("config.json: 'hidden_size' is missing");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, ErrorCode::BadInput);
    EXPECT_EQ(exitCodeFor(bad.error()), 2);
    EXPECT_EQ(exitCodeFor(Error::checkFailed("x")), 1);
    EXPECT_EQ(exitCodeFor(Error::internal("x")), 3);
}

TEST(StrongId, DoesNotMixKinds)
{
    static_assert(!std::is_convertible_v<LayerId, RankId>);
    static_assert(!std::is_convertible_v<int, LayerId>);
    EXPECT_LT(LayerId(1), LayerId(2));
}

TEST(Units, FormatsBytesAndDurations)
{
    EXPECT_EQ(formatBytes(Bytes(512)), "512 B");
    EXPECT_EQ(formatBytes(Bytes::fromGiB(1.5)), "1.50 GiB");
    EXPECT_EQ(formatBytes(Bytes(141LL * 1024 * 1024 * 1024)), "141 GiB");
    EXPECT_EQ(formatDuration(Seconds(0.0123)), "12.3 ms");
    EXPECT_EQ(formatDuration(Seconds(4.56)), "4.56 s");
    EXPECT_EQ(formatCount(1.0264e12), "1.03T");
    EXPECT_EQ(formatExact(116829156672), "116,829,156,672");
    EXPECT_EQ(formatExact(576), "576");
    EXPECT_EQ(formatExact(0), "0");
    EXPECT_EQ(formatExact(-1572864), "-1,572,864");
    EXPECT_EQ(formatExact(-100), "-100");
}

TEST(DType, ParsesNamesAndAliases)
{
    EXPECT_EQ(parseDType("F8_E4M3"), DType::F8E4M3);
    EXPECT_FALSE(parseDType("bf16").has_value());
    EXPECT_EQ(parseDTypeLoose("bfloat16"), DType::BF16);
    EXPECT_EQ(parseDTypeLoose("torch.float16"), DType::F16);
    EXPECT_EQ(dtypeSize(DType::BF16), 2);
    EXPECT_EQ(dtypeName(DType::Bool), "BOOL");
}

TEST(JsonReader, ReportsFirstProblemWithField)
{
    auto json = nlohmann::json::parse(R"({"a": 3, "b": "x", "c": -1})");
    JsonReader r(json, "config.json");
    EXPECT_EQ(r.requireInt("a"), 3);
    EXPECT_TRUE(r.ok());
    r.requirePositive("c");
    r.requireInt("b");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "config.json: 'c' must be a positive integer, found -1");
}

TEST(Json, MalformedNamesOrigin)
{
    auto parsed = parseJson("{\"a\": ", "x/config.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.error().message.find("x/config.json: malformed JSON"), std::string::npos);
}

TEST(FileUtil, AtomicWriteLeavesNoTemporary)
{
    const auto dir = std::filesystem::temp_directory_path() / "day0_base_test";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(writeFileAtomic(dir / "out.txt", "hello").ok());
    EXPECT_EQ(*readFile(dir / "out.txt"), "hello");
    int entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) {
        ++entries;
    }
    EXPECT_EQ(entries, 1);
    EXPECT_FALSE(readFile(dir / "missing.txt").ok());
    EXPECT_FALSE(writeFileAtomic(dir / "no/such/dir/x", "y").ok());
    std::filesystem::remove_all(dir);
}

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce)
{
    ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallelFor(hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) {
        EXPECT_EQ(h.load(), 1);
    }
    EXPECT_EQ(pool.submit([] { return 7; }).get(), 7);
}

TEST(Progress, FractionIsClamped)
{
    Progress p;
    EXPECT_EQ(p.fraction(), 0.0);
    p.setTotal(4);
    p.advance(2);
    EXPECT_DOUBLE_EQ(p.fraction(), 0.5);
    p.advance(10);
    EXPECT_DOUBLE_EQ(p.fraction(), 1.0);
}
