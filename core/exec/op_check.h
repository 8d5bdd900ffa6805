#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/backend.h"
#include "exec/precision.h"
#include "model/model_spec.h"
#include "numerics/metrics.h"
#include "numerics/tolerance.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec {

/// What `day0 opcheck` runs.
struct OpCheckOptions {
    PrecisionPlan target;
    std::int64_t tokens = 16; ///< rows of every activation
    /// Output features are capped at this many (lm_head's vocabulary, huge expert counts): the
    /// error of a dot product depends on its reduction length, which is kept, not on how many
    /// outputs are computed.
    std::int64_t maxOutputs = 4096;
    std::uint32_t seed = 1;
    const numerics::ToleranceTable* table = nullptr; ///< required
    /// The backend computing the target (null: the CPU reference). Operators it does not
    /// implement run on the CPU reference and say so in their row.
    Backend* backend = nullptr;
};

/// One operator of the model, run on random inputs with the model's shapes.
struct OpCheckRow {
    std::string op; ///< "linear self_attn.q_proj", "attention (GQA)", "rope (yarn, interleaved)"
    std::string shape; ///< "[16, 7168] · [1536, 7168]ᵀ"
    numerics::OpKind kind = numerics::OpKind::Other;
    PrecisionMode mode = PrecisionMode::F32; ///< the precision the plan gives it
    std::string implementation; ///< "native" or "composed of ..." on the CPU backend
    numerics::ErrorMetrics metrics; ///< target against fp64
    std::optional<double> expertAgreement; ///< routers: share of tokens with the same experts
    numerics::Verdict verdict;
};

/// The operator report of a model.
struct OpCheckReport {
    std::string model;
    std::string precision; ///< the plan, described
    std::string table;
    std::string backend = "day0-cpu";
    std::vector<OpCheckRow> rows;
    std::vector<std::string> missing; ///< operators the engine lacks for this model
    std::string device; ///< the backend's device, in words
    std::vector<CoverageRow> coverage; ///< native versus fallback on the backend
    int passCount = 0;
    int warnCount = 0;
    int failCount = 0;
};

/// Runs every operator the model needs on random inputs with its shapes, in the target plan and in
/// fp64, and judges the difference against the table (own-error basis, analytic floors).
Result<OpCheckReport> runOpCheck(const model::ModelSpec& spec, const OpCheckOptions& options,
    Progress& progress, std::stop_token stop);

/// The coverage rows as JSON: [{"op", "use", "native", "implementation"}].
nlohmann::json coverageToJson(const std::vector<CoverageRow>& rows);

/// The report as JSON (`day0 opcheck --json`).
nlohmann::json opCheckToJson(const OpCheckReport& report);

} // namespace day0::exec
