#pragma once

// How a streamed run (layer_stream.h) reads a tensor: its stored bytes come from its file by
// pread(), a chunk at a time, into one buffer the reader keeps, and each chunk is converted into
// the output while it is still in the caches. The checkpoint's memory map is never faulted in:
// the first touch of a page costs 30-40 µs on a virtual machine that shadows the page tables,
// and faulting every page of every layer in, then dropping it (MADV_DONTNEED), took 0.75-1.0 s
// of CPU per GiB of BF16 converted to F32 in checkpoint_bench's streamed run, against
// 0.35-0.40 s read this way (the copy out of the page cache included). A tensor of several chunks
// is spread over worker threads, each taking the next chunk in file order into a buffer of its
// own, so the file is still read front to back while the copies and conversions share the cores.

#include "base/dtype.h"
#include "base/result.h"
#include "numerics/tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec::detail {

/// One tensor of a streamed phase: where its bytes lie and how they become the compute type.
struct StreamPiece {
    std::string name; ///< the forward's name (the checkpoint's)
    numerics::Shape shape;
    DType stored = DType::F32;
    std::string file; ///< the file holding it (the checkpoint's root joined with its name)
    std::uint64_t offset = 0; ///< of its first byte in `file`
    std::span<const std::byte> bytes; ///< the same bytes in the checkpoint's memory map
    /// Block-scaled FP8: the per-block scales (in the memory map), their dtype and block size.
    std::span<const std::byte> scaleBytes;
    DType scaleDtype = DType::F32;
    std::int64_t blockRows = 128;
    std::int64_t blockCols = 128;
    bool exactFp8 = false; ///< the values are on the fp8 grid (block scaled or not)
    int expert = -1; ///< a routed expert's index in its MoE layer; -1: read whenever it runs
};

/// Reads stream pieces from their files into their compute-type tensors. Keeps each file open
/// and one read buffer per worker (each at most readBufferBytes() of the largest piece). Not
/// thread-safe: one caller at a time (it starts and joins its own workers).
class PieceReader {
public:
    PieceReader();
    ~PieceReader();
    PieceReader(const PieceReader&) = delete;
    PieceReader& operator=(const PieceReader&) = delete;

    /// Threads a piece of several chunks is read and converted on, the caller's included
    /// (at least 1; 1 until set): workers - 1 helper threads are started and kept until the
    /// reader goes. Its buffers then hold up to `workers` chunks at once.
    void setWorkers(std::size_t workers);
    [[nodiscard]] std::size_t workers() const { return m_buffers.size(); }

    /// Converts `p` into `out` (its shape, type `compute`) exactly as Engine::create's loader
    /// does: widening is exact, and a block-scaled FP8 value is v · scale in double, rounded
    /// once (the same bits whatever the number of workers). The error names the file; the
    /// caller adds the tensor. A stop requested through `stop` ends the read between chunks,
    /// leaving `out` partly converted (the caller's run is over).
    Result<void> read(
        const StreamPiece& p, numerics::Tensor& out, DType compute, std::stop_token stop = {});

    /// The read buffer `p` needs: a chunk of its stored bytes (whole 128-row blocks of a
    /// block-scaled tensor), never more than the tensor.
    static std::uint64_t readBufferBytes(const StreamPiece& p);

private:
    /// One worker's read buffer.
    struct Buffer {
        std::unique_ptr<std::byte[]> data;
        std::size_t capacity = 0;
    };
    Result<int> fileOf(const std::string& file);
    /// Reads `size` bytes of `p` (open as `fd`) from `at` (past its offset) into `into`.
    static Result<std::span<const std::byte>> readChunk(
        int fd, const StreamPiece& p, std::uint64_t at, std::size_t size, Buffer& into);
    /// Reads chunk k of `chunks` (`where(k)`: its first stored byte and its size) and hands it
    /// to `convert(k, bytes)`, the chunks taken in order by up to workers() threads.
    template <class Where, class Convert>
    Result<void> forEachChunk(int fd, const StreamPiece& p, std::size_t chunks, Where where,
        Convert convert, const std::stop_token& stop);

    class Helpers;

    std::map<std::string, int> m_files; ///< open descriptors, by path
    std::vector<Buffer> m_buffers = std::vector<Buffer>(1); ///< one per worker
    std::unique_ptr<Helpers> m_pool; ///< the workers after the caller's; none for one
};

} // namespace day0::exec::detail
