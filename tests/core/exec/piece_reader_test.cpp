// exec::detail::PieceReader (issue #22): a streamed run's tensors read from their files a chunk
// at a time (pread into a buffer per worker) give the bits of converting the whole tensor at
// once, over several chunks with a partial last one, at an unaligned offset, widened and
// block-scaled, on one worker or spread over several; a file that ends too soon or cannot be
// opened is an error naming it, the first failing chunk's whichever worker meets it.
#include "exec/piece_reader.h"
#include "numerics/dtype_convert.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace day0;
namespace fs = std::filesystem;

/// A file of `prefix` junk bytes followed by `data`, removed with the fixture.
struct PieceFile {
    fs::path path;
    PieceFile(const std::vector<std::byte>& data, std::size_t prefix)
    {
        path = fs::temp_directory_path()
            / ("day0_piece_reader_" + std::to_string(::getpid()) + ".bin");
        std::vector<std::byte> junk(prefix, std::byte(0x5A));
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(junk.data()), std::streamsize(junk.size()));
        out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    }
    ~PieceFile()
    {
        std::error_code ec;
        fs::remove(path, ec);
    }
};

std::vector<std::byte> randomBytes(std::size_t n, bool fp8)
{
    std::vector<std::byte> bytes(n);
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& b : bytes) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        auto v = std::uint8_t(x >> 24);
        if (fp8 && (v & 0x7F) == 0x7F) {
            v = std::uint8_t(v - 1); // E4M3's NaN codes left out: the products compare by value
        }
        b = std::byte(v);
    }
    return bytes;
}

exec::detail::StreamPiece pieceOf(const PieceFile& file, std::size_t prefix,
    const std::vector<std::byte>& data, numerics::Shape shape, DType stored)
{
    exec::detail::StreamPiece p;
    p.name = "w";
    p.shape = std::move(shape);
    p.stored = stored;
    p.file = file.path.string();
    p.offset = prefix;
    p.bytes = data;
    return p;
}

TEST(PieceReader, ChunkedReadsGiveTheBitsOfTheWholeConversion)
{
    // 1.5 Mi + 3 BF16 values: two full 1 MiB chunks and a partial one, at an odd offset.
    const std::int64_t n = (std::int64_t(3) << 19) + 3;
    const auto data = randomBytes(std::size_t(n) * 2, false);
    const std::size_t prefix = 13;
    PieceFile file(data, prefix);
    const auto piece = pieceOf(file, prefix, data, { n }, DType::BF16);
    EXPECT_LT(exec::detail::PieceReader::readBufferBytes(piece), data.size());
    exec::detail::PieceReader reader;
    for (const std::size_t workers : { 1, 2, 5 }) {
        reader.setWorkers(workers);
        for (const DType compute : { DType::F32, DType::F64 }) {
            auto out = numerics::Tensor::zeros({ n }, compute);
            auto read = reader.read(piece, out, compute);
            ASSERT_TRUE(read) << read.error().message;
            std::vector<std::byte> whole(std::size_t(out.byteSize()));
            ASSERT_TRUE(
                numerics::convertElements(data, DType::BF16, whole, compute, std::size_t(n)));
            EXPECT_EQ(std::memcmp(whole.data(), out.rawData(), whole.size()), 0)
                << dtypeName(compute) << ", " << workers << " workers";
        }
    }
}

TEST(PieceReader, BlockScaledFp8ReadsWholeRowBlocksAChunk)
{
    // [600, 4096] E4M3 with 128x128 F32 scales: chunks of 256 rows (two row blocks), the last
    // one 88 rows.
    const std::int64_t rows = 600;
    const std::int64_t cols = 4096;
    const auto data = randomBytes(std::size_t(rows * cols), true);
    const std::int64_t gridRows = (rows + 127) / 128;
    const std::int64_t gridCols = cols / 128;
    std::vector<float> scales(std::size_t(gridRows * gridCols));
    for (std::size_t i = 0; i < scales.size(); ++i) {
        scales[i] = float(1.0 + double(i % 23) / 29.0) / 448.0f;
    }
    const std::size_t prefix = 4097;
    PieceFile file(data, prefix);
    auto piece = pieceOf(file, prefix, data, { rows, cols }, DType::F8E4M3);
    piece.scaleBytes = std::as_bytes(std::span(scales));
    piece.scaleDtype = DType::F32;
    EXPECT_EQ(exec::detail::PieceReader::readBufferBytes(piece), std::uint64_t(256 * cols));
    for (const std::size_t workers : { 1, 2, 3 }) {
        SCOPED_TRACE(std::to_string(workers) + " workers");
        exec::detail::PieceReader reader;
        reader.setWorkers(workers);
        auto f32 = numerics::Tensor::zeros({ rows, cols }, DType::F32);
        auto f64 = numerics::Tensor::zeros({ rows, cols }, DType::F64);
        auto read = reader.read(piece, f32, DType::F32);
        ASSERT_TRUE(read) << read.error().message;
        read = reader.read(piece, f64, DType::F64);
        ASSERT_TRUE(read) << read.error().message;
        // v · scale in double, rounded once to F32 (or kept in F64): element by element.
        std::int64_t wrong32 = 0;
        std::int64_t wrong64 = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const double v
                    = numerics::loadAsDouble(data, DType::F8E4M3, std::size_t(r * cols + c));
                const double product
                    = v * double(scales[std::size_t((r / 128) * gridCols + c / 128)]);
                wrong32 += f32.data<float>()[r * cols + c] != float(product) ? 1 : 0;
                wrong64 += f64.data<double>()[r * cols + c] != product ? 1 : 0;
            }
        }
        EXPECT_EQ(wrong32, 0);
        EXPECT_EQ(wrong64, 0);
    }
}

TEST(PieceReader, AFileThatEndsTooSoonOrIsMissingIsNamed)
{
    const auto data = randomBytes(std::size_t(1) << 12, false);
    PieceFile file(data, 0);
    // The piece claims twice the bytes the file holds.
    const auto longer = randomBytes(data.size() * 2, false);
    const auto piece = pieceOf(file, 0, longer, { std::int64_t(longer.size() / 2) }, DType::BF16);
    exec::detail::PieceReader reader;
    auto out = numerics::Tensor::zeros(piece.shape, DType::F32);
    auto read = reader.read(piece, out, DType::F32);
    ASSERT_FALSE(read);
    EXPECT_NE(read.error().message.find(file.path.string()), std::string::npos)
        << read.error().message;
    EXPECT_NE(read.error().message.find("the file ends there"), std::string::npos)
        << read.error().message;
    auto missing = piece;
    missing.file = (file.path.string() + ".absent");
    read = reader.read(missing, out, DType::F32);
    ASSERT_FALSE(read);
    EXPECT_NE(read.error().message.find(missing.file + ": cannot open"), std::string::npos)
        << read.error().message;
}

TEST(PieceReader, SpreadOverWorkersTheFirstFailingChunkIsNamed)
{
    // 2.5 MiB on disk, the piece claims 6 MiB: chunks 0-1 read, chunk 2 is cut short at 2.5 MiB
    // and chunks 3-5 start past the end; the error names chunk 2's byte whichever worker fails
    // first.
    const auto data = randomBytes((std::size_t(5) << 19), false);
    PieceFile file(data, 0);
    const auto longer = randomBytes(std::size_t(6) << 20, false);
    const auto piece = pieceOf(file, 0, longer, { std::int64_t(longer.size() / 2) }, DType::BF16);
    exec::detail::PieceReader reader;
    reader.setWorkers(4);
    auto out = numerics::Tensor::zeros(piece.shape, DType::F32);
    auto read = reader.read(piece, out, DType::F32);
    ASSERT_FALSE(read);
    EXPECT_NE(read.error().message.find(fmt::format("{}: reading {} bytes at byte {}: the file "
                                                    "ends there",
                  file.path.string(), std::size_t(1) << 19, std::size_t(5) << 19)),
        std::string::npos)
        << read.error().message;
}

} // namespace
