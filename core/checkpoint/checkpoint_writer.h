#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/manifest.h"
#include "checkpoint/output_file.h"
#include "checkpoint/safetensors_writer.h"

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// How to lay out a written checkpoint.
struct ShardingOptions {
    std::uint64_t maxShardBytes
        = 5'000'000'000; ///< HF's default "5GB"; a bigger tensor gets its own shard
};

/// What writeShardedCheckpoint wrote.
struct WrittenShards {
    std::vector<std::string> files; ///< shard file names, in order
    std::uint64_t tensorBytes = 0; ///< sum of tensor bytes (the index's total_size)
    std::size_t tensors = 0;
};

/// Orders tensor names the way people read them: digit runs compare as numbers, so
/// "layers.2" comes before "layers.10".
bool naturalLess(const std::string& a, const std::string& b);

/// Writes `tensors` into `dir` as Hugging Face shards (model-0000i-of-0000N.safetensors, filled in
/// natural name order up to maxShardBytes each) plus model.safetensors.index.json with
/// metadata.total_size. Each file is written under a temporary name and renamed. Progress counts
/// tensor bytes written.
Result<WrittenShards> writeShardedCheckpoint(const std::filesystem::path& dir,
    std::vector<TensorSource> tensors, const ShardingOptions& options, Progress& progress,
    std::stop_token stop);

/// Copies the top-level files of `src` that are not weights, indexes or manifests (config.json,
/// tokenizer files, generation_config.json, code...) into `dst`, skipping names in `skip`.
Result<void> copyAuxiliaryFiles(const std::filesystem::path& src, const std::filesystem::path& dst,
    const std::vector<std::string>& skip);

/// Hashes every file of the output folder into day0-manifest.json, then renames the folder into
/// place. Progress (a separate stage) counts bytes hashed.
Result<Manifest> finishOutput(
    OutputDir& out, const HashOptions& hash, Progress& progress, std::stop_token stop);

} // namespace day0::checkpoint
