#pragma once

#include "base/result.h"
#include "base/units.h"

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::nccl {

/// A one-shot rendezvous through a shared file: rank 0 publishes a small blob (the NCCL unique
/// id), the other ranks poll until it appears. The file holds a header (magic, format version,
/// world size, payload size) before the payload and is written atomically (temporary file +
/// rename), so a reader never sees half of it; a file left by an earlier run is recognised by
/// its world size or its age and waited past until rank 0 replaces it.
struct FileStoreOptions {
    Seconds timeout { 120.0 }; ///< how long a reader waits
    Seconds pollInterval { 0.02 };
    /// Files last written before this time are stale (default: never stale). Readers pass their
    /// own start time minus the launch skew they tolerate.
    std::filesystem::file_time_type notBefore = std::filesystem::file_time_type::min();
};

/// Rank 0: writes `payload` for a world of `worldSize` ranks.
Result<void> publishBlob(
    const std::filesystem::path& file, const std::vector<std::uint8_t>& payload, int worldSize);

/// Other ranks: waits for a blob of `expectedBytes` for a world of `worldSize` ranks and returns
/// it. Errors (CheckFailed) after the timeout, naming the file and what was found there;
/// Cancelled when `stop` is requested.
Result<std::vector<std::uint8_t>> waitForBlob(const std::filesystem::path& file,
    std::size_t expectedBytes, int worldSize, const FileStoreOptions& options,
    std::stop_token stop = {});

/// Parses a blob file's contents: the payload, or why it is not (yet) a valid blob for this
/// world ("written for 4 ranks, this run has 8").
Result<std::vector<std::uint8_t>> parseBlob(
    std::string_view contents, std::size_t expectedBytes, int worldSize);

} // namespace day0::nccl
