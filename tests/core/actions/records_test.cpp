#include "actions/records.h"
#include "base/resources.h"
#include "checkpoint/checkpoint_report.h"
#include "checkpoint/shrink.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace day0::actions {
namespace {

namespace ck = day0::checkpoint;
namespace fs = std::filesystem;

/// A fresh shrunk Kimi-K2 checkpoint (sharded, with manifest) under the test's temp folder.
fs::path shrunkCheckpoint(const std::string& name)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const fs::path dir = fs::path(::testing::TempDir()) / "records_test" / name;
    fs::remove_all(dir);
    Progress progress;
    auto r = ck::shrinkModel("kimi-k2", dir, {}, progress, {});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return dir;
}

std::string lastShard(const fs::path& dir)
{
    std::string shard;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".safetensors") {
            shard = std::max(shard, e.path().filename().string());
        }
    }
    return shard;
}

struct Verified {
    ck::Checkpoint checkpoint;
    std::optional<ck::IntegrityReport> integrity;
    ck::TensorReport tensors;
};

Verified verify(const fs::path& dir)
{
    auto opened = ck::Checkpoint::open(dir);
    EXPECT_TRUE(opened.ok()) << opened.error().message;
    Progress progress;
    auto integrity = ck::verifyCheckpointFiles(*opened, {}, progress, {});
    EXPECT_TRUE(integrity.ok()) << integrity.error().message;
    auto tensors = ck::reportTensors(*opened);
    EXPECT_TRUE(tensors.ok()) << tensors.error().message;
    return { std::move(*opened), std::move(*integrity), std::move(*tensors) };
}

TEST(VerifyRunRecord, AGoodCheckpointIsOkWithTheCountsOfDay0Verify)
{
    const auto dir = shrunkCheckpoint("good");
    const auto v = verify(dir);
    ASSERT_TRUE(v.integrity);
    const auto r = verifyRunRecord(dir.string(), v.checkpoint, &*v.integrity, &v.tensors, 1.5);
    EXPECT_EQ(r.info.kind, history::RunKind::Verify);
    EXPECT_EQ(r.info.status, history::RunStatus::Ok);
    EXPECT_EQ(r.info.message, "ok");
    EXPECT_EQ(r.info.modelName, "good");
    EXPECT_EQ(r.info.modelFingerprint.size(), 64U);
    EXPECT_DOUBLE_EQ(r.info.duration->value, 1.5);
    EXPECT_EQ(r.findProperty("path")->value, dir.string());
    EXPECT_EQ(r.findProperty("format")->value, "sharded safetensors");
    EXPECT_EQ(r.findProperty("manifest")->value, ck::kManifestName);
    EXPECT_EQ(r.findMetric("files")->value, double(v.checkpoint.files().size()));
    EXPECT_EQ(r.findMetric("tensors")->value, double(v.checkpoint.tensors().size()));
    EXPECT_EQ(r.findMetric("integrity_failures")->value, 0);
    EXPECT_EQ(r.findMetric("bytes_hashed")->value, double(v.integrity->bytesHashed));
    EXPECT_EQ(r.findMetric("tensors_ok")->value, double(v.checkpoint.tensors().size()));
    // The names in the order `day0 verify` writes them (sorted, as its JSON object is).
    std::vector<std::string> counts;
    for (const auto& m : r.metrics) {
        if (m.name.starts_with("tensors_")) {
            counts.push_back(m.name);
        }
    }
    EXPECT_EQ(counts,
        (std::vector<std::string> { "tensors_missing", "tensors_ok", "tensors_unexpected",
            "tensors_wrong_dtype", "tensors_wrong_shape" }));
    EXPECT_TRUE(r.events.empty());
    EXPECT_TRUE(r.validate().ok());

    // Without a manifest or a checked architecture, those parts are left out.
    ck::TensorReport unchecked;
    const auto bare = verifyRunRecord(dir.string(), v.checkpoint, nullptr, &unchecked, 0.1);
    EXPECT_EQ(bare.info.status, history::RunStatus::Ok);
    EXPECT_EQ(bare.findProperty("manifest"), nullptr);
    EXPECT_EQ(bare.findMetric("integrity_failures"), nullptr);
    EXPECT_EQ(bare.findMetric("tensors_ok"), nullptr);
}

TEST(VerifyRunRecord, FailedChecksNameTheFileOrTensor)
{
    const auto dir = shrunkCheckpoint("bad");
    const std::string shard = lastShard(dir);
    {
        std::fstream f(dir / shard, std::ios::in | std::ios::out | std::ios::binary);
        const auto at = std::streamoff(fs::file_size(dir / shard)) - 9;
        f.seekg(at);
        const char c = char(f.get() ^ 0x5a); // same size, another hash
        f.seekp(at);
        f.put(c);
    }
    const auto v = verify(dir);
    ASSERT_TRUE(v.integrity);
    ASSERT_FALSE(v.integrity->ok());
    const auto r = verifyRunRecord(dir.string(), v.checkpoint, &*v.integrity, &v.tensors, 1.0);
    EXPECT_EQ(r.info.status, history::RunStatus::Failed);
    EXPECT_TRUE(r.info.message.starts_with("checks failed: ")) << r.info.message;
    EXPECT_NE(r.info.message.find(shard), std::string::npos) << r.info.message;
    EXPECT_EQ(r.findMetric("integrity_failures")->value, 1);
    ASSERT_EQ(r.events.size(), 1U);
    EXPECT_EQ(r.events.front().level, LogLevel::Error);
    EXPECT_NE(r.events.front().message.find(shard), std::string::npos);

    // Files intact, but config.json asks for one more layer: the missing tensors fail it.
    const auto more = shrunkCheckpoint("more-layers");
    nlohmann::json config;
    std::ifstream(more / "config.json") >> config;
    const int layers = config["num_hidden_layers"].get<int>();
    config["num_hidden_layers"] = layers + 1;
    std::ofstream(more / "config.json") << config.dump(2);
    auto opened = ck::Checkpoint::open(more);
    ASSERT_TRUE(opened.ok());
    auto tensors = ck::reportTensors(*opened);
    ASSERT_TRUE(tensors.ok());
    const auto m = verifyRunRecord(more.string(), *opened, nullptr, &*tensors, 1.0);
    EXPECT_EQ(m.info.status, history::RunStatus::Failed);
    EXPECT_GT(m.findMetric("tensors_missing")->value, 0);
    EXPECT_NE(m.info.message.find(fmt::format("model.layers.{}.", layers)), std::string::npos)
        << m.info.message;
}

TEST(VerifyRunRecord, ABrokenStructureIsAnErrorWithTheProblemAsEvent)
{
    const auto dir = shrunkCheckpoint("broken");
    const std::string shard = lastShard(dir);
    fs::resize_file(dir / shard, fs::file_size(dir / shard) - 4);
    auto opened = ck::Checkpoint::open(dir);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    ASSERT_TRUE(opened->hasErrors());
    const auto r = verifyRunRecord(dir.string(), *opened, nullptr, nullptr, 0.2);
    EXPECT_EQ(r.info.status, history::RunStatus::Error);
    EXPECT_EQ(r.info.message, "structure broken");
    bool named = false;
    for (const auto& e : r.events) {
        named = named || e.message.find(shard) != std::string::npos;
    }
    EXPECT_TRUE(named);
}

} // namespace
} // namespace day0::actions
