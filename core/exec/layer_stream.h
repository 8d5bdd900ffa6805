#pragma once

// A reference run over weights streamed layer by layer from a safetensors checkpoint (`day0 run
// CKPT --stream`): the forward visits its layers in order; each layer's tensors are read from
// their files a chunk at a time, a tensor's chunks spread over worker threads (piece_reader.h),
// into reused buffers. While a layer computes, a loader thread reads and converts the next one
// where the two fit the memory budget together (else only the next layer's pages are read into
// the page cache, MADV_WILLNEED, and it loads when the forward enters it). Logits and dumps are
// those of a normal run.

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/checkpoint.h"
#include "exec/engine.h"
#include "exec/layer_slice.h"
#include "model/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace day0::exec {

/// How a streamed run holds its weights.
struct StreamOptions {
    /// Bytes of weights resident at once (converted buffers and the read of one tensor);
    /// 0: unbounded, which holds the running layer and the next one read ahead. A layer that
    /// alone needs more is refused before the run, by name; the next layer is read ahead only
    /// where it fits beside the running one.
    std::uint64_t memoryBudget = 0;
    /// MoE layers: convert every routed expert, not only those the router chose for the step's
    /// tokens (the results are the same; only the bytes read differ).
    bool allExperts = false;
    /// Called on the reading thread just before each tensor is read, with the tensor's name and
    /// whether the loader thread reads it ahead (true) or the run's own thread does (false):
    /// for tests that make a read fail or stop a run at a chosen tensor and thread. May be
    /// empty; must not call into the stream.
    std::function<void(const std::string& tensor, bool readAhead)> beforeRead;
};

/// What streaming the weights cost, over every step of the run.
struct StreamStats {
    std::uint64_t bytesRead = 0; ///< checkpoint bytes read and converted
    /// The run's time in loads: reading and converting on its own thread, and waiting for a
    /// layer read ahead (the rest of a read ahead overlapped the compute).
    double readSeconds = 0.0;
    std::int64_t phasesLoaded = 0; ///< layer loads (embedding, layers, norm, head; per step)
    std::int64_t phasesReadAhead = 0; ///< of them, read by the loader thread ahead of time
    double readAheadSeconds = 0.0; ///< the loader thread's time reading them
    /// What a layer and the next one read ahead beside it hold at once, at most (converted
    /// buffers, the running layer's rounded copies, the reads); 0: nothing is read ahead.
    std::uint64_t largestPairBytes = 0;
    std::string largestPhase; ///< the layer that needs the most memory ("model.layers.3")
    std::uint64_t largestPhaseBytes = 0; ///< what it needs (converted + largest stored tensor)
    std::uint64_t residentPeakBytes = 0; ///< converted weight buffers held at once, at most
    std::uint64_t peakRssBytes = 0; ///< the process's peak resident set (VmHWM) after the run
    std::uint64_t memoryBudget = 0; ///< the budget the run honoured (0: none)
    /// Routed experts' stored bytes never read because no token of the step chose them.
    std::uint64_t expertBytesSkipped = 0;
};

/// A streamed run's result and what the streaming cost.
struct StreamedRun {
    RunResult run;
    StreamStats stats;
};

/// Runs `options` on the safetensors checkpoint at `path` (model `spec`) with its weights
/// streamed layer by layer. Runs on the CPU in any precision (an emulated one rounds the running
/// layer's matrices only), inject mode included, of the decoder families whose layers read only
/// their own weights (Llama, Mistral, Mixtral, Qwen2/3 and their MoE, DeepSeek-V2/V3, Kimi-K2)
/// from BF16/F16/F32/F64 or block-FP8 tensors; anything else (a backend, an image, GGUF, other
/// quantisation formats and families) is refused by name.
/// Progress counts bytes read; cancellable between tensors. `slice` (prepared by
/// prepareLayerSlice): only its layers' weights are read and run.
Result<StreamedRun> runStreamed(const std::filesystem::path& path, const model::ModelSpec& spec,
    const RunOptions& options, const StreamOptions& stream, Progress& progress,
    std::stop_token stop, const LayerSlice* slice = nullptr);

/// Why runStreamed would refuse `spec` and `options` before reading a weight, by name ("--stream:
/// ..."); success when it would not. For front ends that refuse at argument time.
Result<void> checkStreamable(const model::ModelSpec& spec, const RunOptions& options);

/// Opens `path` for a streamed read: its files opened and checked, a GGUF file refused by name
/// (streamed runs read safetensors). Shared by the single-rank and the per-rank streams.
Result<checkpoint::Checkpoint> openStreamedCheckpoint(const std::filesystem::path& path);

/// "512M", "2G", "1.5GiB", "300MB", "4096" (bytes) → bytes (K/M/G/T are binary multiples);
/// the error names the text.
Result<std::uint64_t> parseMemorySize(std::string_view text);

/// A streamed run's bound as the command line gives it: --memory-budget SIZE (a node's, shared
/// by its ranks) or --memory-budget-per-rank SIZE (each rank's own).
struct MemoryBudget {
    std::uint64_t bytes = 0; ///< 0: unbounded
    bool perRank = false;
};

/// The two flags' texts (empty: not given) → the bound; both given is refused (two meanings of
/// one bound), and a size that does not parse names its flag.
Result<MemoryBudget> parseMemoryBudget(std::string_view budget, std::string_view perRank);

/// The peak resident set (VmHWM) of this process in bytes; 0 where /proc cannot be read.
std::uint64_t peakResidentBytes();

namespace detail {

struct WeightTable;
class LayerStream;

/// The run of `options` over a layer stream (engine.cpp): Engine's run with the weight table
/// the stream fills and a hook at every layer boundary; cancelled through stream.stopToken().
/// `slice`: decoder layers A..B only.
Result<RunResult> runOverStream(const model::ModelSpec& spec, bool fp64, const RunOptions& options,
    LayerStream& stream, Progress& progress, const LayerSlice* slice = nullptr);

/// The weights of a checkpoint, one layer ("phase": the embedding, each decoder layer, the final
/// norm, the head) at a time. Called from one thread, one run at a time (it may read ahead on
/// threads of its own, joined before it returns from a call that needs them).
class LayerStream {
public:
    virtual ~LayerStream() = default;
    /// The table the forward reads; holds the current phase's tensors only.
    virtual WeightTable& table() = 0;
    /// Before a forward step: loads the embedding (a slice: nothing until its first layer is
    /// entered) and prefetches the first layer.
    virtual Result<void> beginStep() = 0;
    /// At a layer boundary: the forward finished the module whose anchor this is
    /// ("model.embed_tokens", "model.layers.N", "model.norm"); releases its weights and loads
    /// the next phase's. A failure is kept for endStep and stops the run (stopToken).
    virtual void enter(const std::string& anchor) = 0;
    /// After a forward step: releases the last phase; the first failure of the step, if any.
    virtual Result<void> endStep() = 0;
    /// A MoE layer's router `router` ("model.layers.3.mlp.gate") chose `experts` for the step's
    /// tokens: loads those of them not loaded yet, before the experts run.
    virtual void routed(const std::string& router, std::span<const std::int64_t> experts) = 0;
    /// Requested when the caller's token is or a load failed.
    [[nodiscard]] virtual std::stop_token stopToken() const = 0;
};

} // namespace detail

} // namespace day0::exec
