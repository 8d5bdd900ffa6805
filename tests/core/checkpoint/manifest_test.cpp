#include "base/sha256.h"
#include "checkpoint/manifest.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>

namespace day0::checkpoint {
namespace {

TEST(Sha256, KnownVectorsAndStreaming)
{
    EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const auto dir = test::scratch("sha");
    std::string big(3 * 1000 * 1000 + 17, 'x');
    test::writeBytes(dir / "big", big);
    Progress progress;
    auto h = sha256File(dir / "big", &progress, {}, 4096);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, sha256Hex(big));
    EXPECT_EQ(progress.done(), std::int64_t(big.size()));
    std::stop_source stop;
    stop.request_stop();
    EXPECT_EQ(
        sha256File(dir / "big", nullptr, stop.get_token()).error().code, ErrorCode::Cancelled);
}

TEST(Manifest, ParsesBothFormats)
{
    const std::string h(64, 'a');
    auto sums = parseSha256Sums(h + "  b.safetensors\n" + h + " *a.safetensors\n# c\n\n"
            + "SHA256 (c.json) = " + std::string(64, 'B') + "\n\\" + h + "  d\\\\e\n",
        "SHA256SUMS");
    ASSERT_TRUE(sums.ok()) << sums.error().message;
    ASSERT_EQ(sums->files.size(), 4u);
    EXPECT_EQ(sums->files[0].file, "a.safetensors");
    EXPECT_EQ(sums->find("c.json")->sha256, std::string(64, 'b'));
    EXPECT_NE(sums->find("d\\e"), nullptr);
    EXPECT_FALSE(parseSha256Sums("zz  x\n", "S").ok());
    EXPECT_FALSE(parseSha256Sums(h + "  ../x\n", "S").ok());
    EXPECT_FALSE(parseSha256Sums(h + "  x\n" + h + "  x\n", "S").ok());

    Manifest m;
    m.files = { { "a", 3, h } };
    auto back = parseManifest(serializeManifest(m), "day0-manifest.json");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back->files[0].size, 3u);
    EXPECT_FALSE(parseManifest(R"({"files":[{"file":"a","sha256":"xyz"}]})", "m").ok());
}

TEST(Manifest, ReportsEveryBadFile)
{
    const auto dir = test::scratch("verify");
    for (const auto* name :
        { "a.safetensors", "b.safetensors", "c.safetensors", "d.safetensors", "config.json" }) {
        test::writeBytes(dir / name, std::string(1000 + std::strlen(name), name[0]));
    }
    Progress progress;
    auto m = buildManifest(dir, manifestCandidates(dir), { 3, 64 }, progress, {});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(progress.done(), progress.total());
    ASSERT_TRUE(writeManifest(dir, *m).ok());
    auto found = findManifest(dir);
    ASSERT_TRUE(found.ok() && found->has_value());
    EXPECT_EQ((*found)->files.size(), 5u);

    // Flip a byte (same size), truncate one, delete one, add an unlisted shard.
    test::writeBytes(dir / "a.safetensors", std::string(1013, 'b'));
    test::writeBytes(dir / "b.safetensors", "short");
    std::filesystem::remove(dir / "c.safetensors");
    test::writeBytes(dir / "e.safetensors", "new");
    Progress p2;
    auto report = verifyIntegrity(
        dir, **found, { "a.safetensors", "e.safetensors" }, { 2, 1 << 20 }, p2, {});
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->failures(), 4u);
    std::map<std::string, FileStatus> status;
    for (const auto& f : report->files) {
        status[f.file] = f.status;
        if (f.status != FileStatus::Ok) {
            EXPECT_NE(f.message.find(f.file), std::string::npos) << f.message;
        }
    }
    EXPECT_EQ(status["a.safetensors"], FileStatus::HashMismatch);
    EXPECT_EQ(status["b.safetensors"], FileStatus::SizeMismatch);
    EXPECT_EQ(status["c.safetensors"], FileStatus::Missing);
    EXPECT_EQ(status["d.safetensors"], FileStatus::Ok);
    EXPECT_EQ(status["e.safetensors"], FileStatus::Unlisted);

    std::stop_source stop;
    stop.request_stop();
    Progress p3;
    EXPECT_EQ(verifyIntegrity(dir, **found, {}, {}, p3, stop.get_token()).error().code,
        ErrorCode::Cancelled);
}

} // namespace
} // namespace day0::checkpoint
