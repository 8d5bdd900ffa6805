#pragma once

#include "base/log.h"
#include "base/result.h"
#include "base/strong_id.h"
#include "base/units.h"
#include "history/layer_metrics.h"
#include "history/timestamp.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::history {

/// What produced a run: one value per workbench verb that records results.
enum class RunKind { Plan, Verify, Run, Compare, Trace, Validate };

/// How a run ended.
enum class RunStatus {
    Ok, ///< finished, every check passed
    Failed, ///< finished, a check failed (exit code 1)
    Error, ///< could not finish: bad input or an internal error
    Cancelled, ///< stopped by the user
};

/// "plan", "verify", ... (the names stored in the database and shown on the CLI).
std::string_view toString(RunKind kind);
std::string_view toString(RunStatus status);
/// Parses a kind name; the error lists the valid names.
Result<RunKind> parseRunKind(std::string_view text);
Result<RunStatus> parseRunStatus(std::string_view text);

/// The header of a run: one row of the runs table, all that a listing shows.
struct RunInfo {
    RunId id; ///< 0 until stored
    std::string uuid; ///< generated at commit when empty
    RunKind kind = RunKind::Run;
    Timestamp created {}; ///< set to the commit time when left at the epoch
    std::string label; ///< free text from the user ("fp8 kernels v2")
    RunStatus status = RunStatus::Ok;
    std::string modelName; ///< "kimi-k2", a folder name, ...
    std::string modelFingerprint; ///< hash of the model's config.json
    std::string plan; ///< plan string (DESIGN.md §3), "" when none
    std::string precision; ///< "bf16", "fp8", ...
    std::string backend; ///< "cpu-reference", "cuda", ...
    std::string host; ///< filled with the host name at commit when empty
    std::string softwareVersion; ///< day0 version that produced the run
    std::string command; ///< the command line, when it came from the CLI
    std::string message; ///< one-line outcome or error message
    std::optional<Seconds> duration; ///< wall time of the work
    /// The run's "tool" property (bench, train, eval, shrink, ...), read with the header from a
    /// store so a listing can tell a kind's tools apart; "" when none. Derived, not stored: a
    /// record sets it with setProperty("tool", ...).
    std::string tool;
};

/// The kind as a listing shows it: "run", or "run (bench)" with the run's tool.
std::string kindLabel(const RunInfo& info);

/// A named scalar result (tokens/s, peak memory, max relative error, verdict counts...).
/// NaN values are kept.
struct Metric {
    std::string name;
    double value = 0.0;
    std::string unit; ///< "s", "B", "tok/s", "" for plain numbers
};

/// A named text setting of the run beyond the header (cluster, mode, dump folder names...).
struct Property {
    std::string key;
    std::string value;
};

/// Bytes of one memory component on one rank and pipeline stage.
struct MemoryEntry {
    int rank = -1; ///< -1: not rank-specific (a single device or the worst rank)
    int stage = -1; ///< pipeline stage, -1 when not staged
    std::string component; ///< "weights", "gradients", "optimizer", "activations", "kv_cache", ...
    Bytes bytes;
};

/// A file or folder a run produced or used (a dump folder, a trace, a report).
struct Artifact {
    std::string kind; ///< "dump", "trace", "report", "junit", "checkpoint", ...
    std::string path;
    std::optional<Bytes> size;
    std::string sha256; ///< lowercase hex, "" when not computed
};

/// Builds an Artifact for an existing file or folder, with its size (a folder's is the sum of
/// its files). The error names the path.
Result<Artifact> makeArtifact(std::string kind, const std::filesystem::path& path);

/// "debug", "info", "warning", "error": how event levels are stored and shown.
std::string_view levelName(LogLevel level);
/// The inverse of levelName; unknown text reads as Info.
LogLevel parseLevel(std::string_view text);

/// One line of the run's event log.
struct Event {
    Timestamp time {};
    LogLevel level = LogLevel::Info;
    std::string message;
};

/// Everything one run produced. The engine fills it while working and commits it at once
/// (RunStore::commit or recordRun), so the store never holds half a run; loading a run from the
/// store gives the same structure back. Plain data, no Qt; not thread-safe.
struct RunRecord {
    RunInfo info;
    std::vector<Metric> metrics;
    std::vector<Property> properties;
    LayerMetrics layers;
    std::vector<MemoryEntry> memory;
    std::vector<Artifact> artifacts;
    std::vector<Event> events;

    RunRecord() = default;
    explicit RunRecord(RunKind kind) { info.kind = kind; }

    /// Adds a scalar metric.
    RunRecord& addMetric(std::string name, double value, std::string unit = {});
    /// Sets a text property (replaces an earlier value of the same key).
    RunRecord& setProperty(std::string key, std::string value);
    /// Adds a memory component.
    RunRecord& addMemory(int rank, int stage, std::string component, Bytes bytes);
    /// Adds an artifact.
    RunRecord& addArtifact(Artifact artifact);
    /// Appends an event stamped with the current time.
    RunRecord& addEvent(LogLevel level, std::string message);

    /// The metric with this name, if any.
    [[nodiscard]] const Metric* findMetric(std::string_view name) const;
    /// The property with this key, if any.
    [[nodiscard]] const Property* findProperty(std::string_view key) const;

    /// Checks what the store requires (unique metric names, unique anchor/metric pairs, unique
    /// memory components per rank and stage, non-empty names, a well-formed uuid); the error
    /// names the offending field.
    [[nodiscard]] Result<void> validate() const;
};

/// True when two records hold the same result: the same kind, label, status, model (name and
/// fingerprint), plan, precision, backend and message, and equal properties, metrics, memory and
/// layer metrics, in the same order (NaN equals NaN). Ids, uuids, times, durations, host,
/// command, software version, artifacts and events are not compared.
bool sameResult(const RunRecord& a, const RunRecord& b);

/// A random (version 4) UUID in its 36-character text form.
std::string makeUuid();
/// True for 36-character UUID text (8-4-4-4-12 hex digits).
bool isUuid(std::string_view text);

} // namespace day0::history
