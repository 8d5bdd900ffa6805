#pragma once

#include "base/result.h"
#include "hardware/cluster.h"
#include "plan/cost_model.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"
#include "plan/workload.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace day0::plan {

/// One published measurement of a run (resources/plan/published_measurements.json): its
/// source, model, cluster, the layout as a plan string (`day0 plan --plan` reads it), the
/// workload and kernels, the measured figure and how the source counts it, and whether the
/// planner's constants were chosen on it ("fit") or not ("holdout").
struct PublishedCase {
    std::string id;
    std::string source;
    std::string split; ///< "fit" or "holdout"
    Mode mode = Mode::Train; ///< "kind": "train" or "infer"
    std::string note; ///< what the planner does not model of this run, when it misses
    ParallelPlan plan; ///< "plan", parsed
    hardware::Cluster cluster; ///< "cluster", parsed
    nlohmann::json row; ///< the whole row
};

/// The bundled table.
std::filesystem::path publishedMeasurementsFile();

/// Reads a table. Every row needs an id, a source, how the source counts its figure, its
/// precision, a split, a kind ("train" or "infer"), a cluster, a plan, a workload, kernels and
/// one measured figure: training step_time_s or tokens_per_s_per_gpu, serving
/// output_tokens_per_s (the whole cluster). The plan must parse. A held-out row names a bundled
/// model (so the planner can evaluate it at run time). Errors name the file and the row.
Result<std::vector<PublishedCase>> readPublishedMeasurements(const std::filesystem::path& file);

/// The planner's estimate of a case, with `model` the case's model summarised.
struct CaseEstimate {
    double estimate = 0; ///< in the unit of the measured figure
    double measured = 0;
    double error = 0; ///< (estimate − measured) / measured
    TrainingCost training; ///< training: the whole estimate of the step
    InferenceCost inference; ///< serving: the estimate at the batch chosen
    int batch = 0; ///< serving: sequences in flight, as many as the runtime admits
};
Result<CaseEstimate> estimatePublishedCase(
    const PublishedCase& c, const ModelSummary& model, const CostOptions& options = {});

/// Summarises a case's model ("model" object of a row); the bundled models by default.
using CaseModelResolver = std::function<Result<ModelSummary>(const nlohmann::json& model)>;
Result<ModelSummary> bundledCaseModel(const nlohmann::json& model);
/// `resolve`, remembering each model it summarised (the returned resolver owns the cache).
CaseModelResolver cachingResolver(CaseModelResolver resolve);

/// Every case estimated, and the mean absolute percentage error by split and kind.
struct PublishedEvaluation {
    struct Row {
        const PublishedCase* c = nullptr; ///< into the cases evaluated, which must outlive this
        CaseEstimate e;
        bool moe = false; ///< the case's model routes tokens to experts
    };
    std::vector<Row> rows;
    /// Mean |error| of the rows of a split ("fit"/"holdout") and mode, of MoE or of dense
    /// models only when `moe` is given; nullopt when there are none.
    [[nodiscard]] std::optional<double> mape(
        const std::string& split, Mode mode, std::optional<bool> moe = std::nullopt) const;
    [[nodiscard]] int count(
        const std::string& split, Mode mode, std::optional<bool> moe = std::nullopt) const;
    /// The table a user reads: per case the estimate, the measurement, the error and where the
    /// estimated time goes; then the MAPE of each split and kind.
    [[nodiscard]] std::string format() const;
};
Result<PublishedEvaluation> evaluatePublished(const std::vector<PublishedCase>& cases,
    const CaseModelResolver& resolve = bundledCaseModel, const CostOptions& options = {});

/// The constants chosen on the fit cases alone, by a grid search minimising their mean absolute
/// error: the FP8 GEMM efficiency on the FP8 training fit cases (0.30 to 0.70 by 0.01), then the
/// serving constants on the serving fit cases: the roofline overlap loss (0 to 0.6 by 0.05), the
/// runtime cost per decode step (0 to 1 ms by 0.25 ms) and per sequence (0 to 12 µs by 1 µs).
/// The defaults of CostOptions are these values; the BF16 constants were chosen on Korthikanti
/// et al.'s step times before and are kept.
struct Calibration {
    CostOptions options;
    double fp8TrainMape = 0; ///< of the FP8 training fit cases, at the chosen efficiency
    double servingMape = 0; ///< of the serving fit cases, at the chosen constants
    double moeTrainMape = 0; ///< of the MoE training fit cases, at the chosen overheads
    int fp8Cases = 0; ///< dense FP8 training fit cases
    int servingCases = 0;
    int moeCases = 0;
    [[nodiscard]] std::string describe() const;
};
Result<Calibration> calibrateOnFitCases(const std::vector<PublishedCase>& cases,
    const CaseModelResolver& resolve = bundledCaseModel, const CostOptions& start = {});

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
/// Which parallel dimensions a layout uses (size > 1): what makes two runs comparable beyond
/// device, mode and model kind.
struct ParallelDims {
    bool tp = false;
    bool pp = false;
    bool cp = false;
    bool ep = false;
    bool operator==(const ParallelDims&) const = default;
    /// "tp+pp", "ep", or "no model parallelism".
    [[nodiscard]] std::string describe() const;
};
ParallelDims parallelDimsOf(int tp, int pp, int cp, int ep);

/// With `dims` (one layout's bar), the comparable cases are narrowed to those using the same
/// parallel dimensions when at least two do; otherwise the bar is the device-wide one and says so.
TimeErrorBar timeErrorBar(const ModelSummary& model, const hardware::Cluster& cluster, Mode mode,
    std::optional<ParallelDims> dims = std::nullopt);

} // namespace day0::plan
