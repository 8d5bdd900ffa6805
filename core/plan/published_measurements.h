#pragma once

#include "base/result.h"
#include "hardware/cluster.h"
#include "plan/cost_model.h"
#include "plan/model_summary.h"
#include "plan/workload.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace day0::plan {

/// One published measurement of a run (resources/plan/published_measurements.json): its
/// source, model, cluster, full layout, workload and kernels, the measured figure and how the
/// source counts it, and whether the planner's constants were chosen on it ("fit") or not
/// ("holdout").
struct PublishedCase {
    std::string id;
    std::string source;
    std::string split; ///< "fit" or "holdout"
    std::string note; ///< what the planner does not model of this run, when it misses
    nlohmann::json row; ///< the whole row
};

/// The bundled table.
std::filesystem::path publishedMeasurementsFile();

/// Reads a table; every row needs an id, a source, how the source counts its figure, a split,
/// a kind ("train"), a cluster, a layout, a workload, kernels and one measured figure
/// (step_time_s or tokens_per_s_per_gpu). A held-out row names a bundled model (so the
/// planner can evaluate it at run time). Errors name the file and the row.
Result<std::vector<PublishedCase>> readPublishedMeasurements(const std::filesystem::path& file);

/// The planner's estimate of a case, with `model` the case's model summarised.
struct CaseEstimate {
    double estimate = 0; ///< in the unit of the measured figure
    double measured = 0;
    double error = 0; ///< (estimate − measured) / measured
    TrainingCost cost; ///< the whole estimate of the step
};
Result<CaseEstimate> estimatePublishedCase(const PublishedCase& c, const ModelSummary& model);

/// How far the planner's time figures can be trusted for a plan: the mean absolute error of the
/// held-out published measurements comparable with it (same device, same mode, both MoE or
/// both dense), or none.
struct TimeErrorBar {
    std::optional<double> meanAbsError; ///< fraction; nullopt: no comparable measurement
    std::vector<std::string> cases; ///< the comparable cases' ids
    std::string basis; ///< "h800, training, MoE"
    std::string problem; ///< why the table could not be used, when it could not
    /// "±56% (1 comparable published measurement: …; h800, training, MoE)", or "no
    /// comparable published measurement (…)".
    [[nodiscard]] std::string describe() const;
    [[nodiscard]] nlohmann::json toJson() const;
};
TimeErrorBar timeErrorBar(const ModelSummary& model, const hardware::Cluster& cluster, Mode mode);

} // namespace day0::plan
