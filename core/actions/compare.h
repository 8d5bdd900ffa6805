#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "numerics/dump.h"
#include "numerics/dump_compare.h"
#include "numerics/tolerance.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace day0::actions {

/// Two dumps compared capture by capture (`day0 compare`, the precision panel's Compare Dumps).
struct CompareRequest {
    std::filesystem::path reference; ///< the reference dump folder
    std::filesystem::path target; ///< the target dump folder
    /// The reference computed in the target's dtype: measured noise floors. Empty: none.
    std::filesystem::path floor;
    /// The target's inject-mode dump: each capture judged on its own error. Empty: none.
    std::filesystem::path local;
    std::string tolerances; ///< a bundled table name or a JSON file; empty: day0-default
    std::string precision; ///< target precision for the rules; empty: the target dump's
    bool allowMismatch = false; ///< different models or inputs: a warning, not an error
};

/// What the comparison found, with the dumps it read (kept for the cell details) and its run
/// record (compareRunRecord, kind compare, with its duration).
struct CompareOutcome {
    std::shared_ptr<const numerics::Dump> reference;
    std::shared_ptr<const numerics::Dump> target;
    std::shared_ptr<const numerics::Dump> local; ///< null without an inject-mode dump
    std::shared_ptr<const numerics::ToleranceTable> table;
    numerics::DumpComparison comparison;
    history::RunRecord record;
};

/// A comparison as it grows: the dumps it reads and the rows judged so far.
struct ComparisonSoFar {
    std::shared_ptr<const numerics::Dump> reference;
    std::shared_ptr<const numerics::Dump> target;
    std::shared_ptr<const numerics::Dump> local;
    std::shared_ptr<const numerics::ToleranceTable> table;
    numerics::DumpComparison comparison; ///< rows and counts so far; no first divergence yet
};
using ComparisonGrowing = std::function<void(ComparisonSoFar&&)>;

/// Reads the dumps and compares them. `growing` (may be empty) gets the comparison so far
/// after about every tenth of the captures, on the comparing thread. Errors name the dump
/// (reference, target, floor, inject-mode) or the option, and dumps that cannot be compared name
/// both folders; a failed tolerance is an outcome (comparisonExitCode), not an error. Cancellable
/// between captures.
Result<CompareOutcome> compareDumpFolders(const CompareRequest& request, Progress& progress,
    std::stop_token stop, const ComparisonGrowing& growing = {});

/// `day0 compare`'s and `day0 run --reference`'s exit status: 1 when a capture failed its
/// tolerance, else 0.
int comparisonExitCode(const numerics::DumpComparison& comparison);

/// The inject-mode dump `day0 run --dump DIR --inject` writes beside its target dump
/// (`<target>-inject`), when that folder exists.
std::optional<std::filesystem::path> injectDumpBeside(const std::filesystem::path& target);

} // namespace day0::actions
