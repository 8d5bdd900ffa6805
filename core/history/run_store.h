#pragma once

#include "base/result.h"
#include "base/strong_id.h"
#include "history/run_record.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace day0::history {

namespace detail {
struct StoreState;
}

/// Which runs to list; empty fields match every run.
struct RunFilter {
    std::string model; ///< substring of the model name, case-insensitive
    std::optional<RunKind> kind;
    std::string tool; ///< exact "tool" property (bench, train, eval, ...)
    std::optional<RunStatus> status;
    std::optional<Timestamp> since; ///< created at or after
    std::optional<Timestamp> until; ///< created before
    std::string label; ///< substring of the label, case-insensitive
    std::string precision; ///< exact precision name ("bf16")
    /// Substring of the label, model, plan, precision, backend, host, message or tool,
    /// case-insensitive (the search box of the runs panel).
    std::string text;
    std::int64_t limit = 0; ///< at most this many runs, newest first; 0 = all
    std::int64_t offset = 0; ///< skip this many of the newest matches
};

/// How many child rows a run has, so a summary can be shown without loading 100k layer rows.
struct RunCounts {
    std::int64_t metrics = 0;
    std::int64_t properties = 0;
    std::int64_t layerMetrics = 0;
    std::int64_t memory = 0;
    std::int64_t artifacts = 0;
    std::int64_t events = 0;
};

/// The SQLite run store (DESIGN.md §5): every plan, verification, run, comparison, trace and
/// validation, with its metrics, per-anchor layer metrics, memory breakdown, artifacts and log.
///
/// A run is written in one transaction, so a killed writer leaves either the whole run or none
/// of it. Several processes (the GUI and the CLI) may write the same file at once: WAL journaling
/// lets readers go on while a writer commits, and writers wait for each other up to the busy
/// timeout. A file that is not a run store, is corrupt, or comes from a newer schema gives an
/// error naming the file and is never modified.
///
/// Thread-safe: calls on one RunStore are serialised by an internal mutex; open one RunStore per
/// thread to overlap reads with a writer.
class RunStore {
public:
    /// How to open a store.
    struct Options {
        bool createIfMissing = true; ///< false: a missing file is an error instead of a new store
        std::chrono::milliseconds busyTimeout { 15000 }; ///< how long to wait for another writer
    };

    /// Opens (and, if allowed, creates along with its folder) the store at `file` and migrates it
    /// to the current schema.
    static Result<RunStore> open(const std::filesystem::path& file, const Options& options);
    static Result<RunStore> open(const std::filesystem::path& file)
    {
        return open(file, Options {});
    }

    RunStore(RunStore&&) noexcept;
    RunStore& operator=(RunStore&&) noexcept;
    ~RunStore();

    /// Writes a whole run in one transaction and returns its id. The uuid, creation time and host
    /// are filled in when the record leaves them empty. Fails without writing anything when the
    /// record is invalid (RunRecord::validate) or the store cannot be written.
    Result<RunId> commit(const RunRecord& record);
    /// Writes several runs in one transaction (imports, benchmarks): all or none.
    Result<std::vector<RunId>> commitAll(std::span<const RunRecord> records);

    /// The headers of the matching runs, newest first.
    Result<std::vector<RunInfo>> list(const RunFilter& filter = {}) const;
    /// How many runs match (ignores limit and offset).
    Result<std::int64_t> count(const RunFilter& filter = {}) const;
    /// The distinct non-empty model names of the stored runs, sorted.
    Result<std::vector<std::string>> modelNames() const;
    /// One run with everything it holds; `withLayers` false skips the layer metrics.
    Result<RunRecord> load(RunId id, bool withLayers = true) const;
    /// Child row counts of one run.
    Result<RunCounts> counts(RunId id) const;
    /// Finds a run by reference: its id ("42"), its uuid or a unique prefix of at least 4
    /// characters, "last" (the newest run) or "last~N" (the N-th before it). The error names the
    /// store and the reference.
    Result<RunId> resolve(std::string_view reference) const;
    /// Deletes a run and everything it holds; false when there was no such run.
    Result<bool> remove(RunId id);

    /// Runs SQLite's integrity and foreign-key checks; the error lists the first problems.
    Result<void> checkIntegrity() const;
    /// The store file.
    [[nodiscard]] const std::filesystem::path& file() const;

private:
    explicit RunStore(std::unique_ptr<detail::StoreState> state);
    std::unique_ptr<detail::StoreState> m_state;
};

} // namespace day0::history
