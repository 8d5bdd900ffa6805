#include "base/file_util.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/shard_index.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace day0::checkpoint {
namespace {

const std::vector<std::uint8_t> kBytes(64, 7);

void writeShard(const std::filesystem::path& path, const std::vector<std::string>& names)
{
    std::vector<TensorSource> tensors;
    for (const auto& n : names) {
        tensors.push_back(
            tensorFromBytes(n, DType::BF16, { 2, 4 }, std::as_bytes(std::span(kBytes).first(16))));
    }
    ASSERT_TRUE(writeSafetensors(path, tensors).ok());
}

void writeIndex(const std::filesystem::path& dir,
    const std::vector<std::pair<std::string, std::string>>& map, std::optional<std::uint64_t> total)
{
    ShardIndex index;
    index.weightMap = map;
    std::sort(index.weightMap.begin(), index.weightMap.end());
    index.totalSize = total;
    ASSERT_TRUE(writeFileAtomic(dir / kShardIndexName, serializeShardIndex(index)).ok());
}

bool hasProblem(const Checkpoint& c, const std::string& text)
{
    return std::any_of(c.problems().begin(), c.problems().end(), [&](const CheckpointProblem& p) {
        return p.error.message.find(text) != std::string::npos;
    });
}

TEST(Checkpoint, OpensShardedFolderAndViewsData)
{
    const auto dir = test::scratch("sharded_ok");
    writeShard(dir / shardFileName(1, 2), { "a", "b" });
    writeShard(dir / shardFileName(2, 2), { "c" });
    writeIndex(dir,
        { { "a", shardFileName(1, 2) }, { "b", shardFileName(1, 2) },
            { "c", shardFileName(2, 2) } },
        48);
    auto c = Checkpoint::open(dir);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->format(), CheckpointFormat::ShardedSafetensors);
    EXPECT_TRUE(c->problems().empty()) << c->problems().front().error.message;
    ASSERT_EQ(c->tensors().size(), 3u);
    EXPECT_EQ(c->totalTensorBytes(), 48u);
    const auto* t = c->find("c");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->file, shardFileName(2, 2));
    EXPECT_EQ(t->shape, (std::vector<std::int64_t> { 2, 4 }));
    auto data = c->data(*t);
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(std::to_integer<int>((*data)[0]), 7);
}

TEST(Checkpoint, ReportsEveryIndexInconsistency)
{
    const auto dir = test::scratch("sharded_bad");
    writeShard(dir / shardFileName(1, 3), { "a", "stray" });
    writeShard(dir / shardFileName(2, 3), { "b", "a" });
    writeIndex(dir,
        { { "a", shardFileName(1, 3) }, { "b", shardFileName(2, 3) },
            { "ghost", shardFileName(1, 3) }, { "lost", shardFileName(3, 3) } },
        999);
    auto c = Checkpoint::open(dir);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_TRUE(c->hasErrors());
    EXPECT_TRUE(hasProblem(*c, "model-00003-of-00003.safetensors: shard named by"));
    EXPECT_TRUE(hasProblem(*c, "tensor 'ghost' is mapped to this shard"));
    EXPECT_TRUE(hasProblem(*c, "tensor 'stray' is not listed"));
    EXPECT_TRUE(hasProblem(*c, "tensor 'a' is also in"));
    // total_size cannot be checked while a shard is missing.
    EXPECT_FALSE(hasProblem(*c, "total_size"));
}

TEST(Checkpoint, TotalSizeMismatchIsAWarning)
{
    const auto dir = test::scratch("total_size");
    writeShard(dir / shardFileName(1, 1), { "a" });
    writeIndex(dir, { { "a", shardFileName(1, 1) } }, 17);
    auto c = Checkpoint::open(dir);
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->problems().size(), 1u);
    EXPECT_TRUE(c->problems()[0].warning);
    EXPECT_FALSE(c->hasErrors());
}

TEST(Checkpoint, BrokenShardIsAProblemNotAFailure)
{
    const auto dir = test::scratch("broken_shard");
    writeShard(dir / "one.safetensors", { "a" });
    test::writeBytes(dir / "two.safetensors", test::rawSafetensors("{\"b\":", ""));
    auto c = Checkpoint::open(dir);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->format(), CheckpointFormat::SafetensorsFolder);
    ASSERT_EQ(c->problems().size(), 1u);
    EXPECT_EQ(c->problems()[0].file, "two.safetensors");
    EXPECT_EQ(c->tensors().size(), 1u);
}

TEST(Checkpoint, RefusesPicklesWithConversionAdvice)
{
    const auto dir = test::scratch("pickle");
    test::writeBytes(dir / "pytorch_model.bin", "PK\x03\x04 not really a zip");
    auto folder = Checkpoint::open(dir);
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.error().message.find("pytorch_model.bin"), std::string::npos);
    EXPECT_NE(folder.error().message.find("save_file"), std::string::npos);
    test::writeBytes(dir / "weights.data", "\x80\x02}q\x00.");
    auto sniffed = Checkpoint::open(dir / "weights.data");
    ASSERT_FALSE(sniffed.ok());
    EXPECT_NE(sniffed.error().message.find("never loaded"), std::string::npos);
}

TEST(Checkpoint, OpensGgufAndSingleFiles)
{
    auto gguf = Checkpoint::open(test::testData("llama-2-tiny-random.gguf"));
    ASSERT_TRUE(gguf.ok()) << gguf.error().message;
    EXPECT_EQ(gguf->format(), CheckpointFormat::Gguf);
    EXPECT_EQ(gguf->tensors().size(), 12u);
    const auto* out = gguf->find("output.weight");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->dtypeName, "F16");
    EXPECT_TRUE(gguf->data(*out).ok());
    auto st = Checkpoint::open(test::testData("voices.safetensors"));
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->tensors().size(), 2u);
    EXPECT_FALSE(Checkpoint::open(test::scratch("empty")).ok());
}

TEST(ShardIndex, ParsesAndRejects)
{
    auto ok = parseShardIndex(
        R"({"metadata":{"total_size":"12"},"weight_map":{"b":"s2","a":"s1"}})", "i.json");
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(*ok->totalSize, 12u);
    EXPECT_EQ(ok->weightMap.front().first, "a");
    EXPECT_EQ(*ok->shardOf("b"), "s2");
    EXPECT_EQ(ok->shardFiles().size(), 2u);
    EXPECT_TRUE(parseShardIndex(R"({"metadata":{},"weight_map":{}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"weight_map":{"a":"../etc/passwd"}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"weight_map":{"a":"/abs"}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"weight_map":{"a":"x","a":"y"}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"weight_map":{"a":3}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"metadata":{"total_size":-1},"weight_map":{}})", "i").ok());
    EXPECT_FALSE(parseShardIndex(R"({"weight_map":[]})", "i").ok());
}

} // namespace
} // namespace day0::checkpoint
