#pragma once

#include "history/run_record.h"
#include "numerics/dump_compare.h"

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace day0::numerics {

/// What a comparison record carries beyond the comparison itself.
struct ComparisonRecordOptions {
    /// Compare for `day0 compare` and "Compare two dumps"; Run for a run with its reference.
    history::RunKind kind = history::RunKind::Compare;
    std::string label; ///< free text shown in the runs list ("bf16 (layer 3=fp32)")
    std::string precisionPlan; ///< the target's full precision plan, when known
    /// Dump folders to list as artifacts, with their role ("reference", "target", ...); folders
    /// that do not exist are skipped.
    std::vector<std::pair<std::string, std::filesystem::path>> dumps;
    std::optional<double> seconds; ///< wall time of the work
};

/// A dump comparison as a run record, the same from `day0 run --reference`, `day0 compare` and
/// the precision panel: model, target precision and backend in the header; verdict counts, the
/// worst relative L2, the logits' KL and top-1 agreement as metrics; per anchor "rel_l2",
/// "max_rel", "cosine_distance", "max_abs", "snr_db" (finite only), "floor_ratio" and
/// "own_rel_l2" (when known) as layer metrics; the first divergence as a property and the
/// message. Status Failed when a capture failed its tolerance, else Ok. Pure; thread-safe.
history::RunRecord comparisonRunRecord(
    const DumpComparison& comparison, const ComparisonRecordOptions& options);

} // namespace day0::numerics
