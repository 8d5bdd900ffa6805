// The verify action (actions::verifyCheckpoint) on its own, as `day0 verify`, the model panel's
// Verify and Write Manifest, the demo and validate's weights step call it.
#include "actions/verify.h"
#include "checkpoint/manifest.h"
#include "shrunk.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace day0::actions {
namespace {

namespace ck = day0::checkpoint;
namespace fs = std::filesystem;

/// A fresh shrunk Llama checkpoint (with its manifest), one per test.
fs::path shrunk(const std::string& name) { return test::shrunk("llama-3.1-8b", name, true); }

fs::path firstWeights(const fs::path& dir)
{
    fs::path first;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".safetensors" && (first.empty() || e.path() < first)) {
            first = e.path();
        }
    }
    return first;
}

Result<VerifyOutcome> verify(const fs::path& path, VerifyOptions options = {})
{
    Progress progress;
    return verifyCheckpoint(path.string(), options, progress, {});
}

TEST(VerifyAction, AGoodCheckpointPassesEveryCheckAndIsRecordedOk)
{
    const auto dir = shrunk("good");
    auto v = verify(dir);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v->exitCode(), 0);
    ASSERT_TRUE(v->integrity);
    EXPECT_TRUE(v->integrity->ok());
    EXPECT_GT(v->integrity->bytesHashed, 0U);
    ASSERT_TRUE(v->architecture);
    EXPECT_TRUE(v->architecture->ok());
    EXPECT_TRUE(v->warnings.empty());
    EXPECT_EQ(v->record.info.kind, history::RunKind::Verify);
    EXPECT_EQ(v->record.info.status, history::RunStatus::Ok);
    const auto json = verifyJson(*v);
    EXPECT_TRUE(json.at("ok").get<bool>());
    EXPECT_EQ(json.at("integrity").at("failures").get<int>(), 0);
}

TEST(VerifyAction, AChangedByteFailsItsFileAndTheRecordNamesIt)
{
    const auto dir = shrunk("corrupt");
    const auto file = firstWeights(dir);
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-1, std::ios::end);
        f.put('\x5a');
    }
    auto v = verify(dir);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v->exitCode(), 1);
    EXPECT_TRUE(v->checksFailed());
    EXPECT_FALSE(v->structureBroken());
    ASSERT_TRUE(v->integrity);
    EXPECT_EQ(v->integrity->failures(), 1U);
    EXPECT_EQ(v->record.info.status, history::RunStatus::Failed);
    EXPECT_NE(v->record.info.message.find(file.filename().string()), std::string::npos)
        << v->record.info.message;
}

TEST(VerifyAction, WithoutAManifestItWarnsAndWritingOneIsRefusedTwice)
{
    const auto dir = shrunk("manifest");
    fs::remove(dir / ck::kManifestName);
    auto bare = verify(dir);
    ASSERT_TRUE(bare.ok()) << bare.error().message;
    EXPECT_FALSE(bare->integrity);
    ASSERT_EQ(bare->warnings.size(), 1U);
    EXPECT_NE(bare->warnings[0].find("file hashes not checked"), std::string::npos);
    EXPECT_EQ(bare->exitCode(), 0);

    VerifyOptions write;
    write.writeManifest = true;
    auto written = verify(dir, write);
    ASSERT_TRUE(written.ok()) << written.error().message;
    ASSERT_TRUE(written->written);
    EXPECT_GE(written->written->files.size(), 2U); // the weights and config.json
    EXPECT_TRUE(fs::exists(dir / ck::kManifestName));
    EXPECT_EQ(verifyJson(*written).at("manifest_written"), std::string(ck::kManifestName));

    auto again = verify(dir, write);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message.find("already exists"), std::string::npos);
    write.replaceManifest = true;
    EXPECT_TRUE(verify(dir, write).ok());
    auto single = verify(firstWeights(dir), write);
    ASSERT_FALSE(single.ok());
    EXPECT_NE(single.error().message.find("needs a checkpoint folder"), std::string::npos);

    auto checked = verify(dir);
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    ASSERT_TRUE(checked->integrity);
    EXPECT_TRUE(checked->integrity->ok());
}

TEST(VerifyAction, OneFileOfAFolderIsCheckedAgainstItsOwnEntryOnly)
{
    const auto dir = shrunk("one-file");
    auto v = verify(firstWeights(dir));
    ASSERT_TRUE(v.ok()) << v.error().message;
    ASSERT_TRUE(v->integrity);
    EXPECT_EQ(v->integrity->files.size(), 1U);
    EXPECT_TRUE(v->integrity->ok());
}

TEST(VerifyAction, AMissingShardBreaksTheStructure)
{
    const auto dir = shrunk("missing");
    fs::remove(firstWeights(dir));
    auto v = verify(dir);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->structureBroken());
    EXPECT_EQ(v->exitCode(), 2);
    EXPECT_EQ(v->record.info.status, history::RunStatus::Error);
}

TEST(VerifyAction, ACancelledVerificationIsAnErrorNotAVerdict)
{
    const auto dir = shrunk("cancel");
    std::stop_source source;
    source.request_stop();
    Progress progress;
    auto v = verifyCheckpoint(dir.string(), {}, progress, source.get_token());
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.error().code, ErrorCode::Cancelled);
}

TEST(VerifyAction, AMissingPathIsAnErrorNamingIt)
{
    auto v = verify(fs::path(::testing::TempDir()) / "no-such-checkpoint");
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.error().message.find("no-such-checkpoint"), std::string::npos);
}

} // namespace
} // namespace day0::actions
