#include "checkpoint/gguf.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace day0::checkpoint {
namespace {

TEST(Gguf, ReadsTinyLlama)
{
    auto file = GgufFile::open(test::testData("llama-2-tiny-random.gguf"));
    ASSERT_TRUE(file.ok()) << file.error().message;
    const auto& h = file->header();
    EXPECT_EQ(h.version, 3u);
    EXPECT_EQ(h.stringValue("general.architecture"), "llama");
    const auto* blocks = h.find("llama.block_count");
    ASSERT_NE(blocks, nullptr);
    EXPECT_EQ(blocks->value.get<int>(), 1);
    const auto* tokens = h.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->type, GgufValueType::Array);
    EXPECT_EQ(tokens->arrayType, GgufValueType::String);
    EXPECT_EQ(tokens->value.size(), 32000u);
    ASSERT_EQ(h.tensors.size(), 12u);
    const GgufTensor* embd = nullptr;
    for (const auto& t : h.tensors) {
        if (t.name == "token_embd.weight") {
            embd = &t;
        }
    }
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->type.name, "F16");
    EXPECT_EQ(embd->ne, (std::vector<std::int64_t> { 8, 32000 }));
    EXPECT_EQ(embd->shape(), (std::vector<std::int64_t> { 32000, 8 }));
    EXPECT_EQ(embd->bytes, 32000u * 8u * 2u);
    EXPECT_EQ(file->data(*embd).size(), embd->bytes);
    EXPECT_EQ(h.dataOffset % h.alignment, 0u);
}

TEST(Gguf, ReadsVocabOnlyFile)
{
    auto file = GgufFile::open(test::testData("ggml-vocab-bert-bge.gguf"));
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_TRUE(file->header().tensors.empty());
    EXPECT_EQ(file->header().find("tokenizer.ggml.tokens")->value.size(), 30522u);
}

TEST(Gguf, RejectsTruncationAndBadCounts)
{
    const auto whole = [] {
        std::ifstream in(test::testData("llama-2-tiny-random.gguf"), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }();
    const auto parse = [](const std::string& bytes) {
        return parseGgufHeader(
            std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size(), "t.gguf");
    };
    ASSERT_TRUE(parse(whole).ok());
    // Cut inside the metadata, inside tensor infos and inside tensor data: all refused, no
    // crash.
    for (const std::size_t cut : { std::size_t(3), std::size_t(20), std::size_t(1000),
             whole.size() / 2, whole.size() - 1 }) {
        auto r = parse(whole.substr(0, cut));
        EXPECT_FALSE(r.ok()) << cut;
    }
    std::string badVersion = whole;
    badVersion[4] = 9;
    EXPECT_NE(parse(badVersion).error().message.find("version 9"), std::string::npos);
    std::string hugeCount = whole;
    std::memset(hugeCount.data() + 8, 0xFF, 8); // tensor count
    EXPECT_NE(parse(hugeCount).error().message.find("cannot fit"), std::string::npos);
    EXPECT_FALSE(parse("GGML-not-gguf").ok());
}

} // namespace
} // namespace day0::checkpoint
