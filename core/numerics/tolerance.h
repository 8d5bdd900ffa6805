#pragma once

#include "base/dtype.h"
#include "base/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::numerics {

/// What kind of operation produced a capture; tolerance rules are keyed by it.
enum class OpKind {
    Embedding,
    Norm,
    Linear,
    Attention,
    Mlp, ///< dense MLP, one expert, or the shared experts
    Moe, ///< a whole MoE block (router + experts)
    Router, ///< router logits
    RouterSelection, ///< the experts a router chose (indices)
    DecoderLayer, ///< a whole decoder (or vision) block's output
    Logits,
    Other,
};

/// "linear", "decoder_layer", ... (the spelling used in tolerance tables).
std::string_view opKindName(OpKind kind);
/// Parses opKindName's spelling.
std::optional<OpKind> parseOpKind(std::string_view name);
/// The kind of a capture from its anchor name (DESIGN.md §3), e.g. "model.layers.3.self_attn"
/// -> Attention, "lm_head" -> Logits; a "#in0"-style suffix is ignored except "#topk".
OpKind opKindForAnchor(std::string_view capture);
/// The decoder/vision layer index in an anchor ("model.layers.12.mlp" -> 12), -1 if none.
int layerOfAnchor(std::string_view capture);

/// A tolerance rule's or a dump's dtype key: parseDTypeLoose's spellings plus those of the FP4
/// format the nvfp4 and mxfp4 targets are judged by ("fp4", "e2m1", "nvfp4", "mxfp4" ->
/// F4E2M1; "int4", "int4-g32" -> I4), which no tensor is stored in and parseDTypeLoose
/// therefore refuses.
std::optional<DType> parseToleranceDType(std::string_view name);
/// A dtype as a table spells it ("bf16", "fp8", "fp4", "int4"; parseToleranceDType reads it).
std::string toleranceDTypeName(DType dtype);

/// What a gradient capture is the gradient of (gradient_anchor.h): a module's output
/// ("<anchor>#grad") or a parameter ("<parameter>#grad"). Gradient rules are keyed by it.
enum class GradientOf {
    Activation,
    Parameter,
};

/// "activation", "parameter" (the spelling used in tolerance tables).
std::string_view gradientOfName(GradientOf of);
/// Parses gradientOfName's spelling.
std::optional<GradientOf> parseGradientOf(std::string_view name);

/// How a gradient capture is looked up among a table's gradient rules.
struct GradientKey {
    GradientOf of = GradientOf::Activation;
    /// An activation gradient: its anchor's kind (`rowKind`); a parameter gradient: the kind of
    /// the module that holds the parameter ("...mlp.gate.weight#grad" -> Router).
    OpKind op = OpKind::Other;
};

/// The gradient key of `capture`, nullopt when it is no gradient ("#grad") capture. `rowKind` is
/// the kind the comparison gave the capture's row (an activation gradient keeps it).
std::optional<GradientKey> gradientKeyOf(std::string_view capture, OpKind rowKind);

/// How the allowed accumulated error grows with depth.
enum class DepthGrowth {
    None, ///< the same limit at every depth
    Sqrt, ///< limit × sqrt(1 + depth): independent per-layer errors (a random walk)
    Linear, ///< limit × (1 + depth): biased errors
};

/// How many times the depth-0 limit an accumulated error may reach `depth` layers in.
double growthFactor(DepthGrowth growth, int depth);

/// The policy limits a rule may only exceed with a stated reason ("looser_because"): relative
/// L2 1e-3 for F16, 1e-2 for I8; none for other dtypes.
std::optional<double> tolerancePolicyLimit(DType dtype);

/// One rule of a tolerance table: the limits for one target dtype × op kind.
struct ToleranceRule {
    std::string id; ///< "bf16.linear"
    std::optional<DType> dtype; ///< nullopt: any dtype ("*")
    std::optional<OpKind> op; ///< nullopt: any op kind ("*")
    double maxRelL2 = 0.0; ///< limit on the judged error's relative L2 norm
    double floorUnits = 1.0; ///< analytic noise floor of one op, in units of u(dtype)
    double maxFloorRatio = 4.0; ///< above this many × the noise floor: a warning
    std::optional<double> maxKl; ///< logits only: mean KL limit (nats)
    std::optional<double> minTop1; ///< logits only: least share of agreeing argmaxes
    std::string looserBecause; ///< why the rule exceeds the policy limits (fp16 1e-3, int8 1e-2)
    std::string note;
    /// Gradient rules only (a table's "gradient_rules"): which gradients the rule judges; nullopt
    /// there means both ("*"). Always nullopt in a forward rule.
    std::optional<GradientOf> gradient;
    bool isGradientRule = false; ///< read from "gradient_rules"
};

/// End-to-end limits of one target dtype over a corpus (`day0 eval`, validate's precision
/// step): on the KL(reference || target) of the next-token distributions and the share of
/// positions whose top-1 tokens agree.
struct EndToEndRule {
    std::string id; ///< "bf16.end_to_end"
    DType dtype = DType::F32;
    double maxKlMean = 0.0; ///< limit on the mean KL (nats)
    double maxKlP99 = 0.0; ///< limit on the 99th percentile
    /// Limit on any one position's KL: the first position beyond it is reported as the first
    /// bad position.
    double maxKlPosition = 0.0;
    double minSameTop = 0.0; ///< least share of agreeing argmaxes
    std::string note; ///< where the limits come from
};

/// The newest table file format this build reads: 1 = forward rules (and end_to_end); 2 adds
/// "gradient_rules" and "gradient_derivation". A file without "format" is format 1.
inline constexpr int kToleranceFormat = 2;

/// A versioned set of rules (resources/tolerances/<name>-v<version>.json).
struct ToleranceTable {
    std::string name; ///< "day0-default"
    int version = 0;
    std::string description;
    std::string source; ///< file it came from, for messages
    DepthGrowth accumulatedGrowth = DepthGrowth::Sqrt;
    std::vector<ToleranceRule> rules;
    /// How the table was derived, when it records it ("derivation"): one line naming the
    /// models, dtypes, runs, percentile and margin.
    std::string derivation;
    /// The "end_to_end" rules, one per target dtype (none in tables before day0-default v4).
    std::vector<EndToEndRule> endToEnd;
    int format = 1; ///< the file's "format" (1 when absent)
    /// The "gradient_rules": limits on gradient captures ("#grad") per target dtype, gradient
    /// kind and op kind, derived from healthy backward runs (none before day0-default v5). A
    /// table without them judges gradients by its forward rules and says so in each verdict.
    std::vector<ToleranceRule> gradientRules;
    /// How the gradient rules were derived ("gradient_derivation"'s summary), when recorded.
    std::string gradientDerivation;
    /// The "derivation" and "gradient_derivation" objects as read (null when absent), so that a
    /// table derived from this one keeps them whole.
    nlohmann::json derivationRecord;
    nlohmann::json gradientDerivationRecord;

    /// The end-to-end rule of `dtype`, nullptr if none.
    [[nodiscard]] const EndToEndRule* matchEndToEnd(DType dtype) const;
    /// The most specific rule for (dtype, op): exact dtype and op, then dtype with any op, then
    /// any dtype with the op, then the catch-all; nullptr if none matches.
    [[nodiscard]] const ToleranceRule* match(DType dtype, OpKind op) const;
    /// The most specific gradient rule for (dtype, key): a rule naming the dtype beats one for
    /// any dtype, then one naming the gradient kind, then one naming the op; nullptr if none.
    [[nodiscard]] const ToleranceRule* matchGradient(DType dtype, const GradientKey& key) const;
    /// "day0-default v1".
    [[nodiscard]] std::string label() const;
};

/// Parses a table; `origin` names the file. Rejects rules looser than the policy limits
/// (relative L2 1e-3 for F16, 1e-2 for I8) unless they say why in "looser_because".
Result<ToleranceTable> parseToleranceTable(const nlohmann::json& json, const std::string& origin);
/// The table as its file spells it (parseToleranceTable reads it back unchanged).
nlohmann::json toleranceTableToJson(const ToleranceTable& table);
/// A rule as a table file spells it (a gradient rule with its "gradient").
nlohmann::json toleranceRuleToJson(const ToleranceRule& rule);
/// An end-to-end rule as a table file spells it.
nlohmann::json endToEndRuleToJson(const EndToEndRule& rule);
/// Reads a table file.
Result<ToleranceTable> loadToleranceTable(const std::filesystem::path& path);
/// A table by file path or bundled name ("day0-default" picks its highest version,
/// "day0-default-v1" a fixed one); empty `nameOrPath` means "day0-default".
Result<ToleranceTable> resolveToleranceTable(const std::string& nameOrPath);

/// The analytic noise floor (relative L2) of an op computed in `dtype`: floorUnits × u(dtype),
/// grown with `depth` (number of layers before it) by `growth` when the error is accumulated.
double analyticFloor(
    const ToleranceRule& rule, DType dtype, int depth, bool accumulated, DepthGrowth growth);

/// Outcome of judging one capture.
enum class VerdictStatus {
    Pass,
    Warn, ///< within tolerance but far above the noise floor, or a discrete flip
    Fail,
    NotJudged, ///< no rule, no comparable data
};

/// "pass", "warn", "fail", "n/a".
std::string_view verdictStatusName(VerdictStatus status);

/// A judgement and everything needed to explain it ("which rule of which table decided").
struct Verdict {
    VerdictStatus status = VerdictStatus::NotJudged;
    std::string table; ///< "day0-default v1"
    std::string rule; ///< "bf16.linear"
    std::string basis; ///< "own" (inject-mode error) or "accumulated"
    double value = 0.0; ///< the judged relative L2
    double limit = 0.0; ///< the limit at this depth
    double floor = 0.0; ///< noise floor (relative L2)
    std::string floorSource; ///< "measured" or "analytic"
    double floorRatio = 0.0; ///< value / floor
    std::string reason; ///< one line for tables and hover text
    /// A gradient judged by a forward rule because the table has no gradient rule for it: says
    /// so (also at the end of `reason`). Empty otherwise.
    std::string note;
};

/// What judge() looks at.
struct JudgeInput {
    double relL2 = 0.0;
    bool accumulated = true; ///< false when the error is the op's own (inject mode)
    int depth = 0; ///< layers before this capture (for growth and analytic floors)
    std::optional<double> measuredFloor; ///< relative L2 of the reference computed in the dtype
    std::int64_t nonFiniteMismatch = 0;
    std::optional<double> klMean; ///< logits
    std::optional<double> top1Agreement; ///< logits
    /// A gradient capture: judged by the table's gradient rules (gradientKeyOf), or by its
    /// forward rules, noted, when it has none for it.
    std::optional<GradientKey> gradient;
};

/// Judges one capture of a target computed in `dtype` against `table`.
Verdict judge(const ToleranceTable& table, DType dtype, OpKind kind, const JudgeInput& input);

/// "2.1× floor" style ratio text.
std::string formatFloorRatio(double ratio);

} // namespace day0::numerics
