#pragma once

#include "base/result.h"
#include "comm/communicator.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace day0::train {

/// One step of a training run's record.
struct StepRecord {
    std::int64_t step = 0; ///< 0-based
    double loss = 0.0; ///< mean over the global batch, before the update
    double gradNorm = 0.0; ///< global L2 norm of the mean gradient, before clipping
    double lr = 0.0;
};

/// One rank's share of a training state: its range of the optimizer (the whole buffer without
/// ZeRO, its shard with ZeRO-1) and its error-feedback memory.
struct RankShard {
    std::int64_t step = 0; ///< steps completed
    int rank = 0;
    std::int64_t shardBegin = 0; ///< offset of master/expAvg/expAvgSq in the flat buffer
    std::vector<double> master; ///< optimizer-owned weights of the range
    std::vector<double> expAvg;
    std::vector<double> expAvgSq;
    std::vector<double> residual; ///< error feedback (empty without)
};

/// What a checkpoint belongs to; a resume refuses one written by another configuration.
struct CheckpointMeta {
    std::int64_t step = 0;
    int worldSize = 1;
    std::string configuration; ///< model, precision, zero, compression: must match on resume
};

/// A checkpoint found valid by findNewestValid.
struct FoundCheckpoint {
    std::filesystem::path folder;
    CheckpointMeta meta;
    std::vector<StepRecord> history; ///< the steps before meta.step
};

/// The folder name of the checkpoint after `step` completed steps: "step-00000040".
std::string checkpointFolderName(std::int64_t step);
/// The shard file of `rank`: "rank-00001.bin".
std::string shardFileName(int rank);

/// Serialises a shard (little-endian doubles behind a small header).
std::string encodeShard(const RankShard& shard);
/// Parses a shard; errors name `origin` and what is wrong.
Result<RankShard> decodeShard(std::string_view bytes, const std::string& origin);

/// Training checkpoints in one folder: `step-N/` holding one shard per rank, history.json and a
/// manifest.json with every file's SHA-256 and size, written under a temporary name and renamed
/// into place only when complete; only the newest `keepLast` are kept.
class CheckpointStore {
public:
    CheckpointStore(std::filesystem::path dir, int keepLast);

    /// Collective: every rank passes its shard; rank 0 creates the temporary folder and tells
    /// the others its name, each rank writes its shard, rank 0 adds the history and the
    /// manifest, renames the folder into place and prunes old checkpoints.
    Result<void> save(comm::Communicator& comm, const RankShard& shard, const CheckpointMeta& meta,
        const std::vector<StepRecord>& history) const;

    /// The newest checkpoint whose manifest parses, whose files all match their digests and
    /// sizes, and whose configuration is `expected` (a different configuration is an error:
    /// falling back would not help). Each newer one skipped adds a note saying why (the file
    /// and both digests). nullopt when there is none.
    Result<std::optional<FoundCheckpoint>> findNewestValid(
        const CheckpointMeta& expected, std::vector<std::string>& notes) const;

    /// Reads `rank`'s shard of a checkpoint found valid.
    Result<RankShard> loadShard(const FoundCheckpoint& found, int rank) const;

    [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }

private:
    std::filesystem::path m_dir;
    int m_keepLast;
};

} // namespace day0::train
