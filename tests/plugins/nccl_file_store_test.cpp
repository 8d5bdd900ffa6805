// The file rendezvous of the NCCL unique id: round trip, stale and foreign files, timeouts.
#include "file_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace day0::nccl {
namespace {

namespace fs = std::filesystem;

fs::path tempFile(const std::string& name)
{
    const auto dir = fs::temp_directory_path() / ("day0_nccl_store_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto path = dir / name;
    fs::remove(path);
    return path;
}

FileStoreOptions quick()
{
    FileStoreOptions o;
    o.timeout = Seconds(0.3);
    o.pollInterval = Seconds(0.01);
    return o;
}

const std::vector<std::uint8_t> kId = [] {
    std::vector<std::uint8_t> v(128);
    for (std::size_t i = 0; i < v.size(); ++i) {
        v[i] = std::uint8_t(i * 7 + 3);
    }
    return v;
}();

TEST(NcclFileStore, PublishedIdIsReadBack)
{
    const auto path = tempFile("roundtrip");
    ASSERT_TRUE(publishBlob(path, kId, 8).ok());
    const auto got = waitForBlob(path, kId.size(), 8, quick());
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, kId);
}

TEST(NcclFileStore, ReaderWaitsForALatePublisher)
{
    const auto path = tempFile("late");
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        (void)publishBlob(path, kId, 2);
    });
    auto o = quick();
    o.timeout = Seconds(5.0);
    const auto got = waitForBlob(path, kId.size(), 2, o);
    writer.join();
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, kId);
}

TEST(NcclFileStore, AFileForAnotherWorldSizeIsNotJoined)
{
    const auto path = tempFile("world");
    ASSERT_TRUE(publishBlob(path, kId, 4).ok());
    const auto got = waitForBlob(path, kId.size(), 8, quick());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code, ErrorCode::CheckFailed);
    EXPECT_NE(got.error().message.find("written for 4 ranks, this run has 8"), std::string::npos)
        << got.error().message;
}

TEST(NcclFileStore, AStaleFileIsWaitedPastUntilRankZeroReplacesIt)
{
    const auto path = tempFile("stale");
    ASSERT_TRUE(publishBlob(path, std::vector<std::uint8_t>(kId.size(), 0xEE), 2).ok());
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(3));
    auto o = quick();
    o.notBefore = fs::file_time_type::clock::now() - std::chrono::minutes(10);
    const auto stale = waitForBlob(path, kId.size(), 2, o);
    ASSERT_FALSE(stale.ok());
    EXPECT_NE(stale.error().message.find("earlier run"), std::string::npos);

    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        (void)publishBlob(path, kId, 2);
    });
    o.timeout = Seconds(5.0);
    const auto fresh = waitForBlob(path, kId.size(), 2, o);
    writer.join();
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    EXPECT_EQ(*fresh, kId);
}

TEST(NcclFileStore, ForeignOrTruncatedContentsAreRejected)
{
    EXPECT_FALSE(parseBlob("hello", 128, 2).ok());
    const auto path = tempFile("truncated");
    ASSERT_TRUE(publishBlob(path, kId, 2).ok());
    std::ifstream in(path, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(parseBlob(contents, 128, 2).ok());
    const auto cut = parseBlob(contents.substr(0, contents.size() - 1), 128, 2);
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().message.find("expected 128"), std::string::npos);
    EXPECT_FALSE(parseBlob(contents, 64, 2).ok());
    EXPECT_FALSE(publishBlob(path, kId, 0).ok());
}

TEST(NcclFileStore, WaitingStopsWhenCancelled)
{
    const auto path = tempFile("cancel");
    std::stop_source stop;
    stop.request_stop();
    auto o = quick();
    o.timeout = Seconds(60.0);
    const auto got = waitForBlob(path, kId.size(), 2, o, stop.get_token());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code, ErrorCode::Cancelled);
}

} // namespace
} // namespace day0::nccl
