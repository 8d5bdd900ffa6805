#include "exec/piece_reader.h"

#include "numerics/dtype_convert.h"
#include "numerics/widen_fp8.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
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
    m_pool.reset(); // the helpers stop before the buffers and files go
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

/// Helper threads started once and woken for each piece (starting threads for every tensor
/// cost more than a tensor of a few chunks gains from them on a virtual machine).
class PieceReader::Helpers {
public:
    explicit Helpers(std::size_t count)
    {
        m_threads.reserve(count);
        for (std::size_t i = 0; i < count; ++i) {
            m_threads.emplace_back([this, i] { serve(i + 1); });
        }
    }
    ~Helpers()
    {
        {
            std::lock_guard lock(m_mutex);
            m_quit = true;
        }
        m_wake.notify_all();
        m_threads.clear(); // joins
    }
    Helpers(const Helpers&) = delete;
    Helpers& operator=(const Helpers&) = delete;

    /// Runs `job(w)` on helpers w = 1..`helpers` and job(0) on the caller; returns when all
    /// are done.
    void run(std::size_t helpers, const std::function<void(std::size_t)>& job)
    {
        {
            std::lock_guard lock(m_mutex);
            m_job = &job;
            m_participants = helpers;
            m_pending = helpers;
            ++m_generation;
        }
        m_wake.notify_all();
        job(0);
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [&] { return m_pending == 0; });
        m_job = nullptr;
    }

private:
    void serve(std::size_t w)
    {
        std::uint64_t seen = 0;
        std::unique_lock lock(m_mutex);
        for (;;) {
            m_wake.wait(lock, [&] { return m_quit || m_generation != seen; });
            if (m_quit) {
                return;
            }
            seen = m_generation;
            if (w > m_participants) {
                continue;
            }
            const auto* job = m_job;
            lock.unlock();
            (*job)(w);
            lock.lock();
            if (--m_pending == 0) {
                m_done.notify_one();
            }
        }
    }

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    const std::function<void(std::size_t)>* m_job = nullptr;
    std::size_t m_participants = 0;
    std::size_t m_pending = 0;
    std::uint64_t m_generation = 0;
    bool m_quit = false;
    std::vector<std::jthread> m_threads;
};

PieceReader::PieceReader() = default;

void PieceReader::setWorkers(std::size_t workers)
{
    const std::size_t count = std::max<std::size_t>(1, workers);
    if (count == m_buffers.size()) {
        return;
    }
    m_pool.reset();
    m_buffers.resize(count);
    if (count > 1) {
        m_pool = std::make_unique<Helpers>(count - 1);
    }
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
    int fd, const StreamPiece& p, std::uint64_t at, std::size_t size, Buffer& into)
{
    if (size > into.capacity) {
        into.data = std::make_unique_for_overwrite<std::byte[]>(size);
        into.capacity = size;
    }
    std::size_t done = 0;
    while (done < size) {
        const auto from = p.offset + at + done;
        const ssize_t n = ::pread(fd, into.data.get() + done, size - done, off_t(from));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return Error::badInput(fmt::format("{}: reading {} bytes at byte {}: {}", p.file,
                size - done, from, n == 0 ? "the file ends there" : std::strerror(errno)));
        }
        done += std::size_t(n);
    }
    return std::span<const std::byte>(into.data.get(), size);
}

template <class Where, class Convert>
Result<void> PieceReader::forEachChunk(int fd, const StreamPiece& p, std::size_t chunks,
    Where where, Convert convert, const std::stop_token& stop)
{
    // The workers take the chunks in file order, so the file is read front to back (the
    // kernel's read-ahead sees one sequential stream) whichever worker gets which chunk.
    std::atomic<std::size_t> next { 0 };
    std::atomic<bool> failed { false };
    std::mutex errorMutex;
    std::optional<Error> error;
    std::size_t errorChunk = chunks;
    const auto work = [&](Buffer& buffer) {
        while (!failed.load(std::memory_order_relaxed) && !stop.stop_requested()) {
            const std::size_t k = next.fetch_add(1, std::memory_order_relaxed);
            if (k >= chunks) {
                break;
            }
            const auto [at, size] = where(k);
            auto chunk = readChunk(fd, p, at, size, buffer);
            Result<void> converted = chunk ? convert(k, *chunk) : Result<void>(chunk.error());
            if (!converted) {
                // The first failing chunk's error, whichever worker met it first.
                std::lock_guard lock(errorMutex);
                if (k < errorChunk) {
                    errorChunk = k;
                    error = converted.error();
                }
                failed.store(true, std::memory_order_relaxed);
            }
        }
    };
    const std::size_t workers = std::min(m_buffers.size(), chunks);
    if (workers <= 1) {
        work(m_buffers[0]);
    } else {
        m_pool->run(workers - 1, [&](std::size_t w) { work(m_buffers[w]); });
    }
    // Every chunk is converted (or the read failed or stopped).
    if (error) {
        return *error;
    }
    return success();
}

Result<void> PieceReader::read(
    const StreamPiece& p, numerics::Tensor& out, DType compute, std::stop_token stop)
{
    const auto count = std::size_t(out.numel());
    const auto inSize = std::size_t(dtypeSize(p.stored));
    const auto outSize = std::size_t(dtypeSize(compute));
    if (p.bytes.size() < count * inSize) {
        return Error::internal(fmt::format("{}: {} stored bytes for {} elements of {}", p.file,
            p.bytes.size(), count, dtypeName(p.stored)));
    }
    auto fd = fileOf(p.file);
    if (!fd) {
        return fd.error();
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
        // Each block's codes scaled as they widen (the fastest kernel this CPU has, as
        // checkpoint_bench's block-scaled figure): whole blocks of rows a chunk.
        const std::int64_t step = rowsPerChunk(p, g);
        const auto chunks = std::size_t((g.rows + step - 1) / step);
        const auto rowsOf = [&](std::size_t k) {
            const std::int64_t r = std::int64_t(k) * step;
            return std::pair(r, std::min(step, g.rows - r));
        };
        return forEachChunk(
            *fd, p, chunks,
            [&](std::size_t k) {
                const auto [r, n] = rowsOf(k);
                return std::pair(std::uint64_t(r * g.cols), std::size_t(n * g.cols));
            },
            [&](std::size_t k, std::span<const std::byte> chunk) -> Result<void> {
                const auto [r, n] = rowsOf(k);
                numerics::detail::widenFp8BlockScaledToF32(chunk.data(), p.stored,
                    scales.data() + (r / p.blockRows) * g.gridCols, n, g.cols, p.blockRows,
                    p.blockCols, out.data<float>() + r * g.cols,
                    numerics::detail::fastestFp8Kernel());
                return success();
            },
            stop);
    }
    const std::size_t step = std::size_t(readBufferBytes(p)) / inSize;
    const std::size_t chunks = (count + step - 1) / step;
    DAY0_TRY(forEachChunk(
        *fd, p, chunks,
        [&](std::size_t k) {
            const std::size_t i = k * step;
            return std::pair(std::uint64_t(i * inSize), std::min(step, count - i) * inSize);
        },
        [&](std::size_t k, std::span<const std::byte> chunk) {
            const std::size_t i = k * step;
            const std::size_t n = chunk.size() / inSize;
            return numerics::convertElements(
                chunk, p.stored, dst.subspan(i * outSize, n * outSize), compute, n);
        },
        stop));
    if (!scaled || stop.stop_requested()) {
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
