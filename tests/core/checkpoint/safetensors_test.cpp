#include "base/file_util.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace day0::checkpoint {
namespace {

using test::rawSafetensors;

Result<SafetensorsHeader> parse(const std::string& bytes)
{
    const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
    return parseSafetensorsHeader(span, bytes.size(), "t.safetensors");
}

std::string errorOf(const std::string& header, const std::string& data)
{
    auto r = parse(rawSafetensors(header, data));
    EXPECT_FALSE(r.ok()) << header;
    return r.ok() ? std::string() : r.error().message;
}

TEST(Safetensors, ReadsRealCandleFiles)
{
    auto voices = SafetensorsFile::open(test::testData("voices.safetensors"));
    ASSERT_TRUE(voices.ok()) << voices.error().message;
    ASSERT_EQ(voices->tensors().size(), 2u);
    const auto* tokens = voices->find("tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->dtype, DType::I64);
    EXPECT_EQ(tokens->shape, (std::vector<std::int64_t> { 1, 982, 33 }));
    EXPECT_EQ(tokens->begin, 0u);
    EXPECT_EQ(tokens->end, 259248u);
    const auto* mask = voices->find("mask");
    ASSERT_NE(mask, nullptr);
    EXPECT_EQ(mask->dtype, DType::U8);
    EXPECT_EQ(voices->data(*mask).size(), 982u * 33u);
    // Zero copy: the view points into the mapped file right after the header.
    EXPECT_EQ(voices->data(*tokens).data(), voices->mapped().data() + voices->header().dataOffset);

    auto jfk = SafetensorsFile::open(test::testData("jfk-codes.safetensors"));
    ASSERT_TRUE(jfk.ok()) << jfk.error().message;
    ASSERT_EQ(jfk->tensors().size(), 1u);
    EXPECT_EQ(jfk->tensors()[0].name, "codes");
    EXPECT_EQ(jfk->tensors()[0].shape, (std::vector<std::int64_t> { 1, 2, 828 }));
    EXPECT_EQ(jfk->header().headerSize, 72u);
}

TEST(Safetensors, AcceptsWhitespacePaddingScalarsAndEmptyTensors)
{
    const std::string data(4 + 0 + 2, '\0');
    auto r = parse(rawSafetensors(
        R"(  {"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F16","shape":[0,3],"data_offsets":[4,4]},"h":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},"__metadata__":{"format":"pt"}}   )",
        data));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->tensors.size(), 3u);
    EXPECT_EQ(r->metadata.at("format"), "pt");
    EXPECT_EQ(r->tensors[0].numel(), 1u);
}

TEST(Safetensors, RejectsEveryMalformation)
{
    const std::string eight(8, '\0');
    // Too short, header too long, header past the end.
    EXPECT_NE(parse("abc").error().message.find("too short"), std::string::npos);
    std::string huge(8, '\0');
    huge[4] = 1; // 2^32 bytes
    EXPECT_NE(parse(huge + "{}").error().message.find("exceeds"), std::string::npos);
    std::string past = rawSafetensors("{}", "");
    past[0] = 100;
    EXPECT_NE(parse(past).error().message.find("past the end"), std::string::npos);
    // Not UTF-8, not JSON, not an object.
    EXPECT_NE(errorOf("{\"a\xff\":1}", "").find("UTF-8"), std::string::npos);
    EXPECT_NE(errorOf("{\"a\":", "").find("invalid JSON"), std::string::npos);
    EXPECT_NE(errorOf("[1,2]", "").find("not a JSON object"), std::string::npos);
    // Unknown dtype, bad shape, bad offsets, extra fields.
    EXPECT_NE(errorOf(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", "xx")
                  .find("unknown dtype 'Q4'"),
        std::string::npos);
    EXPECT_NE(errorOf(R"({"w":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}})", "xx")
                  .find("tensor 'w'"),
        std::string::npos);
    EXPECT_NE(errorOf(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[2,0]}})", "xx")
                  .find("end before"),
        std::string::npos);
    EXPECT_NE(errorOf(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1}})", "xx")
                  .find("unknown field"),
        std::string::npos);
    // Size mismatch and overflow.
    EXPECT_NE(errorOf(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx")
                  .find("is 8 bytes"),
        std::string::npos);
    EXPECT_NE(
        errorOf(
            R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight)
            .find("overflows"),
        std::string::npos);
    EXPECT_NE(errorOf(R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})",
                  eight)
                  .find("overflows"),
        std::string::npos);
    // Overlap, gap, truncation, trailing bytes.
    EXPECT_NE(
        errorOf(
            R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
            std::string(6, 'x'))
            .find("overlap"),
        std::string::npos);
    EXPECT_NE(
        errorOf(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "xxxx").find("gap"),
        std::string::npos);
    EXPECT_NE(errorOf(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", "xxxx")
                  .find("ends at byte 8"),
        std::string::npos);
    EXPECT_NE(
        errorOf(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "xxxx").find("cover 2"),
        std::string::npos);
    // Duplicate names (the JSON attack of the reference tests), bad metadata.
    EXPECT_NE(
        errorOf(
            R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
            "xx")
            .find("duplicate key 'a'"),
        std::string::npos);
    EXPECT_NE(
        errorOf(R"({"__metadata__":{"n":1}})", "").find("must be a string"), std::string::npos);
}

TEST(SafetensorsWriter, RoundTripsWithAlignedHeaderAndAtomicRename)
{
    const auto dir = test::scratch("writer");
    const std::vector<float> f { 1.5f, -2.0f, 3.25f };
    const std::vector<std::uint8_t> u { 1, 2, 3, 4, 5 };
    const std::vector<std::uint16_t> h { 0x3C00 };
    std::vector<TensorSource> tensors;
    tensors.push_back(tensorFromBytes("z.u8", DType::U8, { 5 }, std::as_bytes(std::span(u))));
    tensors.push_back(tensorFromBytes("a.half", DType::F16, { 1, 1 }, std::as_bytes(std::span(h))));
    tensors.push_back(tensorFromBytes("m.f32", DType::F32, { 3 }, std::as_bytes(std::span(f))));
    const auto path = dir / "out.safetensors";
    auto written = writeSafetensors(path, tensors, { { "format", "pt" } });
    ASSERT_TRUE(written.ok()) << written.error().message;
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1)
        << "no temporary left";

    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->header().dataOffset % 8, 0u);
    EXPECT_EQ(file->metadata().at("format"), "pt");
    // Writer order: descending element size, then name, so each tensor is aligned to its size.
    ASSERT_EQ(file->tensors().size(), 3u);
    EXPECT_EQ(file->tensors()[0].name, "m.f32");
    EXPECT_EQ(file->tensors()[1].name, "a.half");
    EXPECT_EQ(file->tensors()[2].name, "z.u8");
    const auto bytes = file->data(*file->find("m.f32"));
    std::vector<float> back(3);
    std::memcpy(back.data(), bytes.data(), bytes.size());
    EXPECT_EQ(back, f);

    // A failing fill leaves neither the target nor a temporary behind.
    std::vector<TensorSource> failing;
    failing.push_back({ "x", DType::F32, { 2 },
        [](std::span<std::byte>) -> Result<void> { return Error::badInput("boom"); } });
    auto failed = writeSafetensors(dir / "failed.safetensors", failing);
    EXPECT_FALSE(failed.ok());
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
    // Duplicate names are refused before anything is written.
    std::vector<TensorSource> dup;
    dup.push_back(tensorFromBytes("d", DType::U8, { 1 }, std::as_bytes(std::span(u).first(1))));
    dup.push_back(tensorFromBytes("d", DType::U8, { 1 }, std::as_bytes(std::span(u).first(1))));
    EXPECT_FALSE(writeSafetensors(dir / "dup.safetensors", dup).ok());
}

} // namespace
} // namespace day0::checkpoint
