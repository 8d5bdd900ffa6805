#pragma once

// A sharded run whose ranks stream their weights (`day0 validate --stream`'s multi-rank step):
// each rank maps its safetensors file (its `day0 shard` rank file, or the full checkpoint it
// slices in memory) and holds one phase at a time — the embedding, one decoder layer, the final
// norm and head — loaded through the same slicing and conversion as a whole load
// (loadRankWeights), so the logits are bit-identical to the unstreamed run's. The mapped pages of
// each tensor are released (MADV_DONTNEED) once it is converted and the next layer's are
// prefetched (MADV_WILLNEED).

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "exec/forward.h"
#include "model/model_spec.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace day0::parallel {

/// How the ranks of a sharded run stream their weights.
struct RankStreamOptions {
    /// When set, rank r streams from the safetensors checkpoint at file(r) instead of loading
    /// its slices whole from the run's weight source.
    std::function<std::filesystem::path(int rank)> file;
    bool presliced = false; ///< file(r) is rank r's `day0 shard` rank file
    /// Bytes one rank may hold at once (its phase's fp32 slices and the transient copies of the
    /// tensor being converted); 0: unbounded, still one phase at a time. The in-process ranks
    /// share one process, so a run's budget B gives each of its W ranks B / W
    /// (rankShareOfBudget).
    std::uint64_t rankBudget = 0;

    [[nodiscard]] bool on() const { return bool(file); }
};

/// What streaming cost one rank, over every step.
struct RankStreamStats {
    std::int64_t bytesRead = 0; ///< mapped bytes read and converted
    std::int64_t phasesLoaded = 0;
    std::string largestPhase; ///< "model.layers.3"
    std::int64_t largestPhaseBytes = 0; ///< what it needs at once (see RankStreamOptions)
};

/// Each of `ranks` in-process ranks' share of a run's memory budget: budget / ranks (0: none).
std::uint64_t rankShareOfBudget(std::uint64_t budget, int ranks);

/// What a streamed plan run's --memory-budget gives each rank, and why.
struct BudgetShare {
    std::uint64_t perRank = 0; ///< bytes one rank may hold at once (0: unbounded)
    int sharers = 1; ///< how many ranks divide the budget (1: it is each rank's own)
    /// How the share was formed, for the progress line and the output, e.g. "512 MiB per node /
    /// 4 processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE)".
    std::string basis;
};

/// The launcher variables that count the processes on this node, in the order they are read:
/// Open MPI's, then MPICH/Hydra's.
inline constexpr const char* kLocalSizeVariables[]
    = { "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS" };

/// Reads an environment variable (null when unset); std::getenv by default, a map under test.
using EnvLookup = std::function<const char*(const char* name)>;

/// One rank's share when the W ranks are threads of this process: `budget` is the node's,
/// budget / W each; with `perRank` it is each rank's own. 0: unbounded.
BudgetShare inProcessShareOfBudget(std::uint64_t budget, int ranks, bool perRank);

/// One MPI process's share (one rank each) of a budget that is per node: budget / (processes on
/// this node), as the communicator counted them (`nodeProcesses`: comm::Communicator::
/// processesOnThisNode, MPI's shared-memory split), else as the launcher counts them
/// (kLocalSizeVariables); when neither says, all `worldSize` processes are taken to share this
/// node, which never exceeds the budget and says so in `basis`. With `perRank` the budget is each
/// process's own. A count that is not a whole number from 1 to worldSize is refused, naming where
/// it came from and its value.
Result<BudgetShare> processShareOfBudget(
    std::uint64_t budget, int worldSize, bool perRank, std::optional<int> nodeProcesses,
    const EnvLookup& env
    = [](const char* name) { return static_cast<const char*>(std::getenv(name)); });

namespace detail {

/// One rank's weights, one phase at a time (ParallelForward's phase hook). Single-threaded.
class RankStream {
public:
    /// Maps `path`, assigns every weight the forward reads to its phase, and refuses before any
    /// weight is read: a model that single-rank streaming refuses (exec::checkStreamable), a
    /// weight of no phase, and a phase that alone exceeds `options.rankBudget` (the error names
    /// the phase and its bytes).
    static Result<std::unique_ptr<RankStream>> open(const model::ModelSpec& spec,
        const std::filesystem::path& path, const checkpoint::ShardLayout& layout,
        const checkpoint::RankCoord& coord, const RankStreamOptions& options);

    ~RankStream();
    RankStream(const RankStream&) = delete;
    RankStream& operator=(const RankStream&) = delete;

    /// The table the rank's forward reads: the current phase's slices only.
    exec::detail::WeightTable& table();
    /// Releases the current phase and loads `phase` (ParallelForward::kEmbedPhase, a layer, or
    /// numLayers for the norm and head); cancellable between tensors.
    Result<void> enter(int phase, std::stop_token stop);
    /// Releases the phase held (after the run).
    void release();
    [[nodiscard]] const RankStreamStats& stats() const;

private:
    struct Impl;
    explicit RankStream(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace detail

} // namespace day0::parallel
