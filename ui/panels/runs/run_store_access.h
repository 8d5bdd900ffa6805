#pragma once

#include "base/progress.h"
#include "history/bench_comparison.h"
#include "history/run_compare.h"
#include "history/run_store.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::ui {

// What the runs panel's background jobs do with the store: plain functions of a store file,
// each opening its own connection (safe on any thread, beside other processes), never creating a
// store that does not exist. Errors come back as text naming the store.

/// How many runs the store holds and its newest id: changes when a run is added or deleted.
struct StoreStamp {
    std::int64_t count = -1; ///< -1: no store file
    std::int64_t newest = -1;
    bool operator==(const StoreStamp&) const = default;
};

/// One listing of the store for a filter.
struct RunListing {
    std::vector<history::RunInfo> runs; ///< newest first, at most filter.limit
    std::int64_t matching = 0; ///< runs matching the filter, beyond the limit too
    std::vector<std::string> models; ///< every model name in the store
    StoreStamp stamp;
    std::string store; ///< the file, for display
    std::string error;
    bool missing = false; ///< the file does not exist (no run recorded yet)
};

/// Lists the runs of `file` that match `filter`.
RunListing readListing(const std::filesystem::path& file, const history::RunFilter& filter);

/// The stamp of `file` ({-1, -1} when it does not exist); nullopt when it cannot be read.
std::optional<StoreStamp> readStamp(const std::filesystem::path& file);

/// Runs loaded with everything they hold and compared (the first is A).
struct LoadedRuns {
    std::vector<RunId> ids;
    std::shared_ptr<const history::RunComparison> comparison; ///< a run against itself if one
    /// The load levels side by side when either run is a `bench serve` run (with why they are
    /// not compared when the other is not a bench of the same model); null otherwise.
    std::shared_ptr<const history::BenchComparison> bench;
    std::vector<history::Property> properties; ///< of run A
    std::string error;
};

/// Loads one or two runs and compares them with history::compareRuns. Cancellable.
LoadedRuns loadRuns(const std::filesystem::path& file, const std::vector<RunId>& ids,
    Progress& progress, std::stop_token stop);

/// Deletes runs; returns how many were deleted and the error that stopped it, if any.
std::pair<int, std::string> deleteStoredRuns(
    const std::filesystem::path& file, const std::vector<RunId>& ids);

/// Writes run `id` to `target` as `day0 runs export` does; the error, or "" on success.
std::string exportStoredRun(
    const std::filesystem::path& file, RunId id, const std::filesystem::path& target);

} // namespace day0::ui
