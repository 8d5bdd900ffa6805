// The streamed run's figures of checkpoint_bench: its loader's conversions from the page cache
// (exec/piece_reader.h, no page of the memory map faulted in) and the whole streamed run against
// a plain sequential read with the page cache dropped, with the CPU time that bounds it.
// Included by checkpoint_bench.cpp only.
#pragma once

#include "base/progress.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_bench_files.h"
#include "exec/checkpoint_weights.h"
#include "exec/layer_stream.h"
#include "exec/piece_reader.h"

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

namespace day0::bench::checkpoint_stream {

namespace fs = std::filesystem;
namespace ck = day0::checkpoint;
using namespace day0::bench::checkpoint_files;

/// The streamed run's loader (exec/piece_reader.h): the tensor's stored bytes read by pread() a
/// chunk at a time (whole 128-row blocks for block-scaled FP8) over one worker per core, each
/// chunk converted while it is in the caches; the memory map is never faulted in. From the page
/// cache (warm), so that the figure is the loader's own cost, not the disk's.
struct StreamedLoad {
    day0::exec::detail::PieceReader reader;
    day0::exec::detail::StreamPiece fp8;
    day0::exec::detail::StreamPiece bf16;
    std::vector<float> fp8ScalesF32; ///< fp8Scales() as the checkpoint stores them (F32)
    std::optional<ck::SafetensorsFile> fp8Map;
    std::optional<ck::SafetensorsFile> bf16Map;
    day0::numerics::Tensor out; ///< touched once, as the fixture's output
};

inline StreamedLoad& streamedLoad()
{
    static StreamedLoad* s = [] {
        auto& f = fixture();
        auto* l = new StreamedLoad;
        l->reader.setWorkers(std::max(1u, std::thread::hardware_concurrency()));
        auto fp8Map = ck::SafetensorsFile::open(f.fp8File);
        auto bf16Map = ck::SafetensorsFile::open(f.tensorFile);
        if (!fp8Map || !bf16Map) {
            std::abort(); // the fixture wrote both
        }
        l->fp8Map.emplace(std::move(*fp8Map));
        l->bf16Map.emplace(std::move(*bf16Map));
        const auto rows = std::int64_t(f.fp8Bytes) / kFp8Cols;
        for (const double v : fp8Scales()) {
            l->fp8ScalesF32.push_back(float(v));
        }
        auto& p = l->fp8;
        p.name = "w";
        p.shape = { rows, kFp8Cols };
        p.stored = day0::DType::F8E4M3;
        p.file = f.fp8File.string();
        p.bytes = l->fp8Map->data(l->fp8Map->tensors()[0]);
        p.offset = l->fp8Map->header().dataOffset + l->fp8Map->tensors()[0].begin;
        p.scaleBytes = std::as_bytes(std::span(l->fp8ScalesF32));
        p.scaleDtype = day0::DType::F32;
        p.blockRows = kFp8Block;
        p.blockCols = kFp8Block;
        p.exactFp8 = true;
        auto& b = l->bf16;
        b.name = "w";
        b.shape = { std::int64_t(f.tensorBytes / 2) };
        b.stored = day0::DType::BF16;
        b.file = f.tensorFile.string();
        b.bytes = l->bf16Map->data(l->bf16Map->tensors()[0]);
        b.offset = l->bf16Map->header().dataOffset + l->bf16Map->tensors()[0].begin;
        l->out = day0::numerics::Tensor::zeros({ rows, kFp8Cols }, day0::DType::F32);
        return l;
    }();
    return *s;
}

/// Reads `piece` through the streamed loader into the shared output (aborts on a failed read:
/// the fixture wrote the file).
inline void readStreamed(const day0::exec::detail::StreamPiece& piece)
{
    auto& l = streamedLoad();
    auto r = l.reader.read(piece, l.out, day0::DType::F32);
    if (!r) {
        std::fprintf(stderr, "streamed read of %s failed: %s\n", piece.file.c_str(),
            r.error().message.c_str());
        std::abort();
    }
}

inline void streamedFp8BlockScaled(benchmark::State& state)
{
    auto& l = streamedLoad();
    for (auto _ : state) {
        readStreamed(l.fp8);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(fixture().fp8Bytes));
}

inline void streamedBf16(benchmark::State& state)
{
    auto& l = streamedLoad();
    for (auto _ : state) {
        readStreamed(l.bf16);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(fixture().tensorBytes));
}

/// Drops `path`'s pages from the page cache (clean pages: no privilege needed).
inline void dropCache(const fs::path& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

inline void sequentialRead(benchmark::State& state)
{
    auto& f = fixture();
    const fs::path file = f.streamDir / "model.safetensors";
    std::vector<char> buffer(std::size_t(16) << 20);
    for (auto _ : state) {
        state.PauseTiming();
        dropCache(file);
        state.ResumeTiming();
        const int fd = ::open(file.c_str(), O_RDONLY);
        std::uint64_t total = 0;
        for (ssize_t n = 0; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) {
            total += std::uint64_t(n);
        }
        ::close(fd);
        benchmark::DoNotOptimize(total);
    }
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(f.streamBytes));
}

inline double g_streamLoadSeconds = 0.0; ///< streamedRun's seconds per run inside its loads
inline double g_streamThreadCpu = 0.0; ///< streamedRun's CPU seconds per run on the calling thread
inline double g_streamProcessCpu = 0.0; ///< streamedRun's CPU seconds per run on all the threads
inline double g_streamAheadSeconds = 0.0; ///< streamedRun's loader seconds per run reading ahead
inline std::int64_t g_streamLoads = 0; ///< streamedRun's layer loads per run
inline std::int64_t g_streamLoadsAhead = 0; ///< of them, read ahead by the loader

/// CPU seconds the calling thread has run.
inline double threadCpuSeconds()
{
    timespec ts {};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// CPU seconds every thread of this process has run.
inline double processCpuSeconds()
{
    timespec ts {};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

inline void streamedRun(benchmark::State& state)
{
    auto& f = fixture();
    auto spec = day0::exec::loadCheckpointModel(f.streamDir);
    if (!spec) {
        state.SkipWithError(spec.error().message.c_str());
        return;
    }
    day0::exec::RunOptions options;
    options.promptIds = { 1 }; // one token: the run is bound by its reads, not its GEMMs
    options.newTokens = 1;
    std::uint64_t bytes = 0;
    double reading = 0.0;
    double cpu = 0.0;
    double processCpu = 0.0;
    double ahead = 0.0;
    std::int64_t loads = 0;
    std::int64_t loadsAhead = 0;
    for (auto _ : state) {
        state.PauseTiming();
        dropCache(f.streamDir / "model.safetensors");
        state.ResumeTiming();
        day0::Progress progress;
        const double cpuBefore = threadCpuSeconds();
        const double processBefore = processCpuSeconds();
        auto r = day0::exec::runStreamed(f.streamDir, *spec, options, {}, progress, {});
        cpu += threadCpuSeconds() - cpuBefore;
        processCpu += processCpuSeconds() - processBefore;
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            break;
        }
        bytes += r->stats.bytesRead;
        reading += r->stats.readSeconds;
        ahead += r->stats.readAheadSeconds;
        loads = r->stats.phasesLoaded;
        loadsAhead = r->stats.phasesReadAhead;
    }
    state.SetBytesProcessed(std::int64_t(bytes));
    // The run's time in the stream's loads (reading on its thread, waiting for the loader), the
    // rest being the forward's compute.
    const double runs = double(std::max<std::int64_t>(1, state.iterations()));
    g_streamLoadSeconds = reading / runs;
    g_streamThreadCpu = cpu / runs;
    g_streamProcessCpu = processCpu / runs;
    g_streamAheadSeconds = ahead / runs;
    g_streamLoads = loads;
    g_streamLoadsAhead = loadsAhead;
}

} // namespace day0::bench::checkpoint_stream
