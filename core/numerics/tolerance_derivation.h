#pragma once

// A tolerance table derived from healthy runs: for each target dtype and op kind, the largest
// error (or a percentile of them) that runs of sound models showed, with a margin, and the depth
// growth that fits how their accumulated errors grew. The table records how it was derived.

#include "base/dtype.h"
#include "base/result.h"
#include "numerics/dump_compare.h"
#include "numerics/tolerance.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace day0::numerics {

/// One healthy run: a target precision compared with its reference, once as it propagated
/// (accumulated errors) and, when an inject-mode dump was made, once more with it (own errors).
struct HealthyRun {
    std::string model; ///< the checkpoint's name, for the derivation record
    std::string prompt; ///< how the prompt was made ("1, 17 continued by the fp32 model ...")
    DType dtype = DType::BF16;
    DumpComparison propagated; ///< compared without the inject-mode dump
    std::optional<DumpComparison> local; ///< compared with it
    /// Gradient dumps (`day0 run --grad`): the run gives gradient rules from its "#grad" rows
    /// (the forward's routing captures it also holds are not learnt from); else forward rules
    /// from its other rows. Compare them with CompareOptions::everyFlipReach, so that each row
    /// a routing flip reaches is learnt from the tokens a comparison would judge it on.
    bool gradients = false;
};

struct DerivationOptions {
    std::string name = "day0-default";
    int version = 1;
    std::string description;
    /// Which share of the healthy values the limit covers before the margin (100: the largest).
    double percentile = 100.0;
    double margin = 1.5; ///< limit = percentile value × margin
    /// The depth growth of the limits; nullopt: the law that flattens the healthy errors'
    /// per-depth medians best. Pinning it is for when the evidence is a tie (the derivation
    /// records both the choice and the evidence).
    std::optional<DepthGrowth> growth;
    std::string command; ///< the command line that produced the runs, recorded
};

/// The table as JSON (parseToleranceTable reads it back). Dtypes the forward runs cover get
/// rules per op kind they measured plus one for any other op; dtypes the gradient runs cover get
/// gradient rules per gradient kind (activation, parameter) and op kind plus one for any other op
/// of each kind; other dtypes, and what no run of a kind covers, keep `base`'s rules (its forward
/// rules, growth and derivation whole when there are only gradient runs; its end-to-end rules
/// always). The table's "derivation" (forward) and "gradient_derivation" name the models,
/// dtypes, runs, prompts, percentile, margin and the growth evidence; every derived rule's note
/// names its largest healthy value and where it was seen. With only gradient runs the depth
/// growth is the base's (one law judges both kinds of row) unless pinned. BadInput when there
/// are no runs or a run holds no judged capture.
Result<nlohmann::json> deriveToleranceTable(
    const std::vector<HealthyRun>& runs, const ToleranceTable& base, const DerivationOptions& o);

} // namespace day0::numerics
