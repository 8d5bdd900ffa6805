#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "numerics/dump.h"
#include "numerics/metrics.h"
#include "numerics/routing_flips.h"
#include "numerics/tolerance.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::numerics {

struct DumpComparison;

/// Inputs of compareDumps beyond the two dumps.
struct CompareOptions {
    const ToleranceTable* table = nullptr; ///< required
    /// Target precision for rule lookup; default: parsed from the target dump's "precision".
    std::optional<DType> precision;
    /// The reference computed in the target's dtype (e.g. our emulated bf16 run when the target
    /// is a GPU backend): its error against the reference is the measured noise floor.
    const Dump* floor = nullptr;
    /// The target's inject-mode dump (each layer fed the reference's inputs): its error against
    /// the reference is each capture's own error, apart from what it inherited.
    const Dump* local = nullptr;
    MetricOptions metrics;
    /// Compare even when fingerprints or input ids differ (a warning instead of an error).
    bool allowMismatch = false;
    /// Gradient comparisons: treat every gradient row a routing flip reaches as after the flips
    /// (judged on the tokens after them, or not judged), not only the rows that fail without
    /// that; the tolerance derivation learns from what such a comparison judges.
    bool everyFlipReach = false;
    /// Called on the comparing thread with the comparison so far (its rows judged, its counts)
    /// after about every tenth of the captures: a viewer can show a long comparison as it
    /// grows. The first divergence and the captures found on one side only come at the end.
    std::function<void(const DumpComparison& sofar)> partial;
};

/// A gradient row the backward reaches after a MoE layer whose expert choice flipped
/// (judgeGradientRoutingFlips): a flipped token's gradient takes another expert's path, so the
/// row differs by more than the precision explains wherever that token's gradient flows.
struct GradientFlips {
    std::vector<int> layers; ///< the flipped MoE layers whose backward reaches the row
    std::vector<std::int64_t> tokens; ///< the tokens that flipped there
    bool nearTies = false; ///< every one of those flips is a near-tie
    /// Activation gradients: judged over the tokens after the last flipped one (the gradient of a
    /// token flows to itself and, through causal attention, to the tokens before it), from this
    /// token on; -1 when none is left or for a parameter gradient (a sum over every token).
    std::int64_t judgedFrom = -1;
    std::optional<ErrorMetrics> unaffected; ///< the error over those tokens
};

/// Relative differences of summary statistics, for statistics-only captures.
struct StatsDelta {
    double meanDiff = 0.0; ///< |mean_t - mean_r| / rms_r
    double rmsRel = 0.0; ///< |rms_t - rms_r| / rms_r: a lower bound of rel L2
    double absMaxRel = 0.0; ///< |absmax_t - absmax_r| / absmax_r
};

/// The comparison of one capture present in both dumps.
struct CaptureComparison {
    std::string name;
    OpKind kind = OpKind::Other;
    int layer = -1;
    Shape shape;
    bool shapeMismatch = false;
    std::string opPrecision; ///< the target op's own precision, when the dump records it (shown)
    Shape targetShape;
    bool statsOnly = false; ///< a side lacks the full tensor
    std::optional<ErrorMetrics> metrics; ///< accumulated error (propagated runs)
    std::optional<ErrorMetrics> own; ///< own error from the inject-mode dump
    std::optional<double> measuredFloor; ///< rel L2 of the floor dump against the reference
    std::optional<StatsDelta> stats;
    std::optional<LogitMetrics> logits;
    std::optional<ExpertAgreement> experts;
    /// MoE and decoder-layer outputs whose layer's router chose other experts for some tokens: the
    /// flips, their reference margins, and the error over the other tokens (which the verdict then
    /// judges).
    std::optional<RoutingFlips> routing;
    /// A gradient row that the backward of a MoE layer whose routing flipped reaches
    /// (gradient_routing.h): what it was judged on instead.
    std::optional<GradientFlips> afterFlips;
    Verdict verdict;
};

/// The comparison of two dumps, rows in the reference's execution order.
struct DumpComparison {
    DumpInfo reference;
    DumpInfo target;
    std::string table; ///< "day0-default v1"
    DType precision = DType::F32;
    std::vector<CaptureComparison> rows;
    std::vector<std::string> onlyInReference;
    std::vector<std::string> onlyInTarget;
    std::vector<std::string> warnings;
    std::optional<std::size_t> firstDivergence; ///< index into rows
    std::string divergenceBasis; ///< "own" or "accumulated"
    int passCount = 0;
    int warnCount = 0;
    int failCount = 0;
    int notJudgedCount = 0;

    /// "fail" if any row failed, else "warn" if any warned, else "pass".
    [[nodiscard]] std::string status() const;
    /// Adds one row's verdict to the counts.
    void count(VerdictStatus status);
};

/// Each flip of `rf` (the first eight, then how many more) with its reference margin against
/// what `dtype` resolves: "token 19 (reference margin 4.2e-04 <= bf16 resolution …, logit); …".
std::string describeFlips(const RoutingFlips& rf, DType dtype);

/// The tokens whose experts differ between `reference` and `judged` in one MoE layer's router
/// selection capture (`selection`, "...#topk"), with their margins in the reference's router
/// scores (RoutingFlips without `unflipped`); nullopt when either dump lacks it or its shapes
/// differ.
Result<std::optional<RoutingFlips>> layerRoutingFlips(
    const Dump& reference, const Dump& judged, const std::string& selection, DType dtype);

/// Aligns two dumps by capture name and compares every common capture. Errors: no table,
/// different models (fingerprints) or inputs (unless allowMismatch), a cancelled stop token.
Result<DumpComparison> compareDumps(const Dump& reference, const Dump& target,
    const CompareOptions& options, Progress& progress, std::stop_token stop);

/// Layers before a capture, as depth growth counts them: its layer index, or all layers for the
/// final norm and the logits, else 0. A gradient ("...#grad") comes after the whole forward and
/// the backward of the layers above it: N + (N − 1 − L) for layer L's, 2N for the embedding's,
/// N for the head's and the final norm's.
int captureDepth(const CaptureComparison& row, std::int64_t numLayers);

/// The precision spelled in a dump ("bf16", "fp8", "int8", "fp32") as a DType.
std::optional<DType> precisionDType(const std::string& precision);

/// The comparison as JSON (the `day0 compare --json` document).
nlohmann::json comparisonToJson(const DumpComparison& comparison);
/// The comparison as CSV, one row per capture, with a header line.
std::string comparisonToCsv(const DumpComparison& comparison);

} // namespace day0::numerics
