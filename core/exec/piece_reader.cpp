#include "exec/piece_reader.h"

#include "numerics/dtype_convert.h"
#include "numerics/widen_fp8.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace day0::exec::detail {

namespace {

// Small enough that a chunk read by pread is still in the caches when the conversion reads it,
// large enough that the BF16 widening takes its streaming stores (512 Ki elements and up) and
// the system calls cost nothing beside the copy.
constexpr std::uint64_t kChunkBytes = std::uint64_t(1) << 20;

/// The block-scaled layout of `p`: [rows, cols] with one scale per block.
struct Grid {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t gridCols = 0;
    bool matrix = false; ///< rows · cols covers every element, so chunks may be row blocks
};

Grid gridOf(const StreamPiece& p)
{
    Grid g;
    g.rows = p.shape.empty() ? 1 : p.shape[0];
    g.cols = p.shape.size() > 1 ? p.shape[1] : 1;
    g.gridCols = (g.cols + p.blockCols - 1) / p.blockCols;
    g.matrix = g.rows * g.cols == numerics::numelOf(p.shape);
    return g;
}

/// Rows per chunk of a block-scaled piece: whole blocks of rows, as many as fit a chunk.
std::int64_t rowsPerChunk(const StreamPiece& p, const Grid& g)
{
    const auto rowBytes = std::uint64_t(g.cols) * std::uint64_t(dtypeSize(p.stored));
    const auto blocks = std::max<std::uint64_t>(
        1, kChunkBytes / std::max<std::uint64_t>(1, rowBytes * std::uint64_t(p.blockRows)));
    return std::min(g.rows, std::int64_t(blocks) * p.blockRows);
}

} // namespace

PieceReader::~PieceReader()
{
    for (const auto& [path, fd] : m_files) {
        ::close(fd);
    }
}

std::uint64_t PieceReader::readBufferBytes(const StreamPiece& p)
{
    const auto stored = std::uint64_t(p.bytes.size());
    const Grid g = gridOf(p);
    if (!p.scaleBytes.empty() && g.matrix) {
        const auto rowBytes = std::uint64_t(g.cols) * std::uint64_t(dtypeSize(p.stored));
        return std::min(stored, std::uint64_t(rowsPerChunk(p, g)) * rowBytes);
    }
    const auto element = std::uint64_t(dtypeSize(p.stored));
    return std::min(stored, std::max(element, kChunkBytes / element * element));
}

Result<int> PieceReader::fileOf(const std::string& file)
{
    if (const auto it = m_files.find(file); it != m_files.end()) {
        return it->second;
    }
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Error::badInput(
            fmt::format("{}: cannot open for reading: {}", file, std::strerror(errno)));
    }
    m_files.emplace(file, fd);
    return fd;
}

Result<std::span<const std::byte>> PieceReader::readChunk(
    const StreamPiece& p, std::uint64_t at, std::size_t size)
{
    auto fd = fileOf(p.file);
    if (!fd) {
        return fd.error();
    }
    if (size > m_capacity) {
        m_buffer = std::make_unique_for_overwrite<std::byte[]>(size);
        m_capacity = size;
    }
    std::size_t done = 0;
    while (done < size) {
        const auto from = p.offset + at + done;
        const ssize_t n = ::pread(*fd, m_buffer.get() + done, size - done, off_t(from));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return Error::badInput(fmt::format("{}: reading {} bytes at byte {}: {}", p.file,
                size - done, from, n == 0 ? "the file ends there" : std::strerror(errno)));
        }
        done += std::size_t(n);
    }
    return std::span<const std::byte>(m_buffer.get(), size);
}

Result<void> PieceReader::read(const StreamPiece& p, numerics::Tensor& out, DType compute)
{
    const auto count = std::size_t(out.numel());
    const auto inSize = std::size_t(dtypeSize(p.stored));
    const auto outSize = std::size_t(dtypeSize(compute));
    if (p.bytes.size() < count * inSize) {
        return Error::internal(fmt::format("{}: {} stored bytes for {} elements of {}", p.file,
            p.bytes.size(), count, dtypeName(p.stored)));
    }
    const std::span<std::byte> dst(out.rawData(), std::size_t(out.byteSize()));
    const Grid g = gridOf(p);
    const bool scaled = !p.scaleBytes.empty();
    const bool fp8 = p.stored == DType::F8E4M3 || p.stored == DType::F8E5M2;
    std::vector<double> scales;
    if (scaled) {
        scales.resize(std::size_t(((g.rows + p.blockRows - 1) / p.blockRows) * g.gridCols));
        for (std::size_t i = 0; i < scales.size(); ++i) {
            scales[i] = numerics::loadAsDouble(p.scaleBytes, p.scaleDtype, i);
        }
    }
    if (scaled && g.matrix && compute == DType::F32 && fp8) {
        // Each block's codes scaled as they widen: whole blocks of rows a chunk.
        const std::int64_t step = rowsPerChunk(p, g);
        for (std::int64_t r = 0; r < g.rows; r += step) {
            const std::int64_t n = std::min(step, g.rows - r);
            auto chunk = readChunk(p, std::uint64_t(r * g.cols), std::size_t(n * g.cols));
            if (!chunk) {
                return chunk.error();
            }
            numerics::detail::widenFp8BlockScaledToF32(chunk->data(), p.stored,
                scales.data() + (r / p.blockRows) * g.gridCols, n, g.cols, p.blockRows, p.blockCols,
                out.data<float>() + r * g.cols);
        }
        return success();
    }
    const std::size_t step = std::size_t(readBufferBytes(p)) / inSize;
    for (std::size_t i = 0; i < count; i += step) {
        const std::size_t n = std::min(step, count - i);
        auto chunk = readChunk(p, i * inSize, n * inSize);
        if (!chunk) {
            return chunk.error();
        }
        DAY0_TRY(numerics::convertElements(
            *chunk, p.stored, dst.subspan(i * outSize, n * outSize), compute, n));
    }
    if (!scaled) {
        return success();
    }
    // The FP8 values widened (exactly) into the output, then scaled in place.
    for (std::int64_t r = 0; r < g.rows; ++r) {
        const double* scaleRow = scales.data() + (r / p.blockRows) * g.gridCols;
        for (std::int64_t c = 0; c < g.cols; ++c) {
            if (compute == DType::F64) {
                double& v = out.data<double>()[r * g.cols + c];
                v *= scaleRow[c / p.blockCols];
            } else {
                float& v = out.data<float>()[r * g.cols + c];
                v = float(double(v) * scaleRow[c / p.blockCols]);
            }
        }
    }
    return success();
}

} // namespace day0::exec::detail
