#include "numerics/tolerance_derivation.h"

#include "numerics/float_formats.h"
#include "numerics/gradient_anchor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace day0::numerics {

using nlohmann::json;

namespace {

/// One judged capture of a healthy run.
struct Sample {
    const HealthyRun* run = nullptr;
    std::string capture;
    int depth = 0;
    std::optional<double> accumulated; ///< rel L2 of the propagated run
    std::optional<double> own; ///< rel L2 of the inject-mode run
};

/// The value at `percentile` (0..100) of `values` (nearest rank), which must not be empty.
double percentileOf(std::vector<double> values, double percentile)
{
    std::sort(values.begin(), values.end());
    const double rank = std::ceil(percentile / 100.0 * double(values.size()));
    const auto i = std::size_t(std::clamp(rank, 1.0, double(values.size()))) - 1;
    return values[i];
}

/// Rounded up to two significant digits, so that a limit prints as it is applied.
double roundUp2(double x)
{
    if (!(x > 0.0) || !std::isfinite(x)) {
        return x;
    }
    const double scale = std::pow(10.0, std::floor(std::log10(x)) - 1.0);
    // Through its decimal spelling, so that 0.00074 is written as 0.00074.
    return std::stod(fmt::format("{:.1e}", std::ceil(x / scale - 1e-9) * scale));
}

std::string growthName(DepthGrowth g)
{
    switch (g) {
    case DepthGrowth::None:
        return "none";
    case DepthGrowth::Sqrt:
        return "sqrt";
    case DepthGrowth::Linear:
        return "linear";
    }
    return "sqrt";
}

/// How unevenly the depth-normalised accumulated errors of one (dtype, op) group spread over
/// depth under a growth law: log(largest / smallest per-depth median). 0: the law explains the
/// growth exactly.
double growthSpread(const std::vector<Sample>& samples, DepthGrowth g)
{
    std::map<int, std::vector<double>> byDepth;
    for (const auto& s : samples) {
        if (s.accumulated && *s.accumulated > 0.0) {
            byDepth[s.depth].push_back(*s.accumulated / growthFactor(g, s.depth));
        }
    }
    if (byDepth.size() < 2) {
        return 0.0;
    }
    double lo = std::numeric_limits<double>::max();
    double hi = 0.0;
    for (const auto& [depth, values] : byDepth) {
        const double m = percentileOf(values, 50.0);
        lo = std::min(lo, m);
        hi = std::max(hi, m);
    }
    return std::log(hi / lo);
}

/// A rule's key within its dtype: which gradients (-1: a forward rule, else a GradientOf) and
/// which op kind.
using RuleKey = std::pair<int, OpKind>;
/// Samples by dtype and rule key.
using Groups = std::map<DType, std::map<RuleKey, std::vector<Sample>>>;

/// What one group's healthy values come to under a growth law.
struct Measured {
    std::vector<double> values; ///< own errors and depth-normalised accumulated ones
    double largest = 0.0;
    std::string where; ///< where the largest was seen
    double ratio = 0.0; ///< largest value / (u × growth), before floor_units
};

Measured measure(const std::vector<Sample>& samples, DepthGrowth growth, double u)
{
    Measured m;
    for (const auto& s : samples) {
        auto consider = [&](double v, bool accumulated) {
            const double g = accumulated ? growthFactor(growth, s.depth) : 1.0;
            m.values.push_back(v / g);
            m.ratio = std::max(m.ratio, v / (u * g));
            if (v / g > m.largest) {
                m.largest = v / g;
                m.where = fmt::format("{}, {}, {}{}", s.run->model, s.capture,
                    accumulated ? "accumulated" : "own",
                    accumulated ? fmt::format(" / {:.3g} growth", g) : std::string());
            }
        };
        if (s.accumulated) {
            consider(*s.accumulated, true);
        }
        if (s.own) {
            consider(*s.own, false);
        }
    }
    return m;
}

void merge(Measured& into, const Measured& m)
{
    into.values.insert(into.values.end(), m.values.begin(), m.values.end());
    if (m.largest > into.largest) {
        into.largest = m.largest;
        into.where = m.where;
    }
    into.ratio = std::max(into.ratio, m.ratio);
}

/// The error a comparison judges a row on: the tokens after a routing flip when one reaches it
/// (none for a row it leaves unjudged), the other tokens of a flipped forward MoE row, else all.
std::optional<double> judgedError(const CaptureComparison& row, bool own)
{
    if (row.afterFlips) {
        return row.afterFlips->unaffected ? std::optional(row.afterFlips->unaffected->relL2)
                                          : std::nullopt;
    }
    if (row.routing && row.routing->unflipped && (!own || row.routing->basis == "own")) {
        return row.routing->unflipped->relL2;
    }
    const auto& m = own ? row.own : row.metrics;
    return m ? std::optional(m->relL2) : std::nullopt;
}

/// The samples of one run into `groups` (its gradient rows for a gradient run, its other rows
/// for a forward one), its logits metrics into `logits`; the number of rows it gave.
Result<int> collect(const HealthyRun& run, Groups& groups,
    std::map<DType, std::vector<std::pair<const HealthyRun*, LogitMetrics>>>& logits)
{
    // Own errors by capture from the inject-mode comparison (the tokens a routing flip reaches
    // judged apart, as the comparison does).
    std::map<std::string, std::optional<double>> own;
    if (run.local) {
        for (const auto& row : run.local->rows) {
            if (row.own) {
                own[row.name] = judgedError(row, true);
            }
        }
    }
    int judged = 0;
    for (const auto& row : run.propagated.rows) {
        if (row.shapeMismatch || row.statsOnly || row.kind == OpKind::RouterSelection
            || row.name.ends_with(kGradientSuffix) != run.gradients) {
            continue;
        }
        Sample s;
        s.run = &run;
        s.capture = row.name;
        s.depth = captureDepth(row, run.propagated.reference.numLayers);
        s.accumulated = judgedError(row, false);
        if (const auto it = own.find(row.name); it != own.end()) {
            s.own = it->second;
        }
        if (!s.accumulated && !s.own) {
            continue;
        }
        if ((s.accumulated && !std::isfinite(*s.accumulated))
            || (s.own && !std::isfinite(*s.own))) {
            return Error::badInput(fmt::format(
                "{} ({}): {} is not finite: not a healthy run", run.model, run.prompt, row.name));
        }
        RuleKey key { -1, row.kind };
        if (run.gradients) {
            const auto g = gradientKeyOf(row.name, row.kind);
            key = { int(g->of), g->op };
        }
        groups[run.dtype][key].push_back(s);
        if (row.logits && !run.gradients) {
            logits[run.dtype].emplace_back(&run, *row.logits);
        }
        ++judged;
    }
    return judged;
}

/// The mean over the groups of growthSpread under `g`.
double meanSpread(const Groups& groups, DepthGrowth g)
{
    double spread = 0.0;
    int n = 0;
    for (const auto& [dtype, keys] : groups) {
        for (const auto& [key, samples] : keys) {
            spread += growthSpread(samples, g);
            ++n;
        }
    }
    return n > 0 ? spread / n : 0.0;
}

/// Everything a derived rule needs besides its values.
struct RuleMaker {
    const ToleranceTable& base;
    const DerivationOptions& o;
    const std::set<std::string>& models;
    DType dtype;

    ToleranceRule operator()(const std::string& id, std::optional<GradientOf> gradient,
        bool isGradient, std::optional<OpKind> op, const Measured& m) const
    {
        ToleranceRule r;
        r.id = id;
        r.dtype = dtype;
        r.op = op;
        r.gradient = gradient;
        r.isGradientRule = isGradient;
        const ToleranceRule* b = nullptr;
        if (isGradient) {
            b = base.matchGradient(
                dtype, { gradient.value_or(GradientOf::Activation), op.value_or(OpKind::Other) });
        }
        if (b == nullptr) {
            b = base.match(dtype, op.value_or(OpKind::Other));
        }
        r.floorUnits = b != nullptr ? b->floorUnits : 1.0;
        // Healthy runs whose values are all exact (weights already stored in the dtype) leave
        // nothing to scale: one op's analytic noise floor then sets the limit.
        const double observed = percentileOf(m.values, o.percentile);
        const double floor = r.floorUnits * formatInfo(dtype).unitRoundoff;
        r.maxRelL2 = roundUp2((observed > 0.0 ? observed : floor) * o.margin);
        // value / floor, floor = floor_units × u × growth: as judge() computes it.
        r.maxFloorRatio = std::max(
            b != nullptr ? b->maxFloorRatio : 4.0, roundUp2(m.ratio / r.floorUnits * o.margin));
        r.note = observed > 0.0
            ? fmt::format("derived: {} healthy values, largest {:.3g} ({}); limit = the {:g}th "
                          "percentile × {:g}",
                m.values.size(), m.largest, m.where, o.percentile, o.margin)
            : fmt::format("derived: {} healthy values, all exact; limit = one op's noise floor "
                          "{:.3g} × {:g}",
                m.values.size(), floor, o.margin);
        const auto policy = tolerancePolicyLimit(dtype);
        if (policy && r.maxRelL2 > *policy) {
            r.looserBecause = fmt::format("healthy runs of {} reach {:.3g} here ({})",
                fmt::join(models, ", "), m.largest, m.where);
        }
        return r;
    }
};

/// The forward rules of the dtypes `groups` covers.
json forwardRules(const Groups& groups,
    const std::map<DType, std::vector<std::pair<const HealthyRun*, LogitMetrics>>>& logits,
    DepthGrowth growth, const ToleranceTable& base, const DerivationOptions& o,
    const std::set<std::string>& models)
{
    json rules = json::array();
    for (const auto& [dtype, keys] : groups) {
        const std::string prefix = toleranceDTypeName(dtype);
        const RuleMaker make { base, o, models, dtype };
        Measured all;
        for (const auto& [key, samples] : keys) {
            const OpKind op = key.second;
            const Measured m = measure(samples, growth, formatInfo(dtype).unitRoundoff);
            merge(all, m);
            auto rule
                = make(fmt::format("{}.{}", prefix, opKindName(op)), std::nullopt, false, op, m);
            if (op == OpKind::Logits && logits.contains(dtype)) {
                std::vector<double> kl;
                double minTop1 = 1.0;
                for (const auto& [run, lm] : logits.at(dtype)) {
                    kl.push_back(lm.klMean);
                    minTop1 = std::min(minTop1, lm.top1Agreement);
                }
                rule.maxKl = roundUp2(percentileOf(kl, o.percentile) * o.margin);
                rule.minTop1
                    = std::max(0.0, std::floor((1.0 - (1.0 - minTop1) * o.margin) * 100.0) / 100.0);
                rule.note += fmt::format("; KL up to {:.3g}, top-1 agreement down to {:.1f}%",
                    *std::max_element(kl.begin(), kl.end()), 100.0 * minTop1);
            }
            rules.push_back(toleranceRuleToJson(rule));
        }
        rules.push_back(
            toleranceRuleToJson(make(prefix + ".any", std::nullopt, false, std::nullopt, all)));
    }
    return rules;
}

/// The gradient rules of the dtypes `groups` covers: one per gradient kind and op kind, and one
/// per gradient kind for any other op.
json gradientRules(const Groups& groups, DepthGrowth growth, const ToleranceTable& base,
    const DerivationOptions& o, const std::set<std::string>& models)
{
    json rules = json::array();
    for (const auto& [dtype, keys] : groups) {
        const std::string prefix = toleranceDTypeName(dtype) + ".grad";
        const RuleMaker make { base, o, models, dtype };
        std::map<GradientOf, Measured> all;
        for (const auto& [key, samples] : keys) {
            const auto of = GradientOf(key.first);
            const Measured m = measure(samples, growth, formatInfo(dtype).unitRoundoff);
            merge(all[of], m);
            rules.push_back(toleranceRuleToJson(
                make(fmt::format("{}.{}.{}", prefix, gradientOfName(of), opKindName(key.second)),
                    of, true, key.second, m)));
        }
        for (const auto& [of, m] : all) {
            rules.push_back(toleranceRuleToJson(make(
                fmt::format("{}.{}.any", prefix, gradientOfName(of)), of, true, std::nullopt, m)));
        }
    }
    return rules;
}

/// The "derivation" (or "gradient_derivation") record of `runs`.
json derivationRecord(const std::vector<const HealthyRun*>& runs, const DerivationOptions& o,
    const ToleranceTable& base, const json& growthEvidence, const std::string& summary)
{
    std::set<std::string> models;
    std::set<std::string> prompts;
    std::map<DType, int> perDtype;
    for (const auto* run : runs) {
        models.insert(run->model);
        prompts.insert(run->prompt);
        ++perDtype[run->dtype];
    }
    std::vector<std::string> dtypeNames;
    for (const auto& [dtype, n] : perDtype) {
        dtypeNames.push_back(toleranceDTypeName(dtype));
    }
    json d;
    d["summary"] = summary;
    d["models"] = models;
    d["dtypes"] = dtypeNames;
    d["runs"] = runs.size();
    d["prompts"] = prompts;
    d["percentile"] = o.percentile;
    d["margin"] = o.margin;
    d["growth_spread"] = growthEvidence;
    d["base"] = base.label();
    if (!o.command.empty()) {
        d["command"] = o.command;
    }
    return d;
}

/// "16 bf16, 16 fp32" and "a, b, c" for a summary line.
std::pair<std::string, std::string> describeRuns(const std::vector<const HealthyRun*>& runs)
{
    std::map<DType, int> perDtype;
    std::set<std::string> models;
    for (const auto* run : runs) {
        ++perDtype[run->dtype];
        models.insert(run->model);
    }
    std::vector<std::string> parts;
    for (const auto& [dtype, n] : perDtype) {
        parts.push_back(fmt::format("{} {}", n, toleranceDTypeName(dtype)));
    }
    return { fmt::format("{}", fmt::join(parts, ", ")),
        fmt::format("{}", fmt::join(models, ", ")) };
}

} // namespace

Result<json> deriveToleranceTable(
    const std::vector<HealthyRun>& runs, const ToleranceTable& base, const DerivationOptions& o)
{
    if (runs.empty()) {
        return Error::badInput("deriving a tolerance table needs at least one healthy run");
    }
    if (!(o.percentile > 0.0 && o.percentile <= 100.0) || !(o.margin >= 1.0)) {
        return Error::badInput(
            fmt::format("percentile {} must lie in (0, 100] and margin {} be at least 1",
                o.percentile, o.margin));
    }
    // Samples per dtype and rule key, forward and gradient apart; logits apart.
    Groups forward;
    Groups gradient;
    std::map<DType, std::vector<std::pair<const HealthyRun*, LogitMetrics>>> logits;
    std::vector<const HealthyRun*> forwardRuns;
    std::vector<const HealthyRun*> gradientRuns;
    std::set<std::string> forwardModels;
    std::set<std::string> gradientModels;
    for (const auto& run : runs) {
        auto judged = collect(run, run.gradients ? gradient : forward, logits);
        if (!judged) {
            return judged.error();
        }
        if (*judged == 0) {
            return Error::badInput(fmt::format("{} ({}, {}): no {}capture to learn from", run.model,
                run.prompt, dtypeName(run.dtype), run.gradients ? "gradient " : ""));
        }
        (run.gradients ? gradientRuns : forwardRuns).push_back(&run);
        (run.gradients ? gradientModels : forwardModels).insert(run.model);
    }

    // The growth law: the one under which the forward's accumulated errors' per-depth medians
    // are flattest. One law judges every row of a table, so with gradient runs alone it stays
    // the base's (whose forward rules the table keeps), unless pinned.
    DepthGrowth growth = forwardRuns.empty() ? base.accumulatedGrowth : DepthGrowth::Sqrt;
    json growthEvidence = json::object();
    double best = std::numeric_limits<double>::max();
    if (!forwardRuns.empty()) {
        for (DepthGrowth g : { DepthGrowth::Sqrt, DepthGrowth::Linear }) {
            const double mean = meanSpread(forward, g);
            growthEvidence[growthName(g)] = mean;
            if (mean < best - 1e-12) {
                best = mean;
                growth = g;
            }
        }
    }
    if (o.growth) {
        if (forwardRuns.empty() && *o.growth != base.accumulatedGrowth) {
            return Error::badInput(fmt::format(
                "--growth {}: with gradient runs alone the table keeps {}'s forward rules, "
                "whose limits grow as {}; one law judges every row",
                growthName(*o.growth), base.label(), growthName(base.accumulatedGrowth)));
        }
        growth = *o.growth;
        if (!forwardRuns.empty()) {
            best = meanSpread(forward, growth);
            growthEvidence[growthName(growth)] = best;
        }
    }
    json gradientEvidence = json::object();
    for (DepthGrowth g : { DepthGrowth::Sqrt, DepthGrowth::Linear }) {
        gradientEvidence[growthName(g)] = meanSpread(gradient, g);
    }

    json table = toleranceTableToJson(base);
    table["name"] = o.name;
    table["version"] = o.version;
    if (!forwardRuns.empty()) {
        json rules = forwardRules(forward, logits, growth, base, o, forwardModels);
        for (const auto& r : base.rules) {
            if (!r.dtype || !forward.contains(*r.dtype)) {
                rules.push_back(toleranceRuleToJson(r));
            }
        }
        table["rules"] = rules;
        const auto [perDtype, models] = describeRuns(forwardRuns);
        const std::string summary = fmt::format(
            "derived from {} healthy runs ({}) of {}; limit = the {:g}th percentile of each dtype "
            "× op's own and depth-normalised accumulated errors × {:g}; {} growth with depth ({}: "
            "spread of the errors' per-depth medians {:.2f} against {:.2f}); other dtypes from {}",
            forwardRuns.size(), perDtype, models, o.percentile, o.margin, growthName(growth),
            o.growth ? "pinned by --growth" : "it flattens them best", best,
            growth == DepthGrowth::Linear ? growthEvidence["sqrt"].get<double>()
                                          : growthEvidence["linear"].get<double>(),
            base.label());
        table["derivation"] = derivationRecord(forwardRuns, o, base, growthEvidence, summary);
        table["description"] = o.description.empty()
            ? std::string("Limits on the relative L2 error of a target against an fp32/fp64 "
                          "reference, per target dtype and op kind, derived from healthy runs "
                          "(see 'derivation'). The judged error is a capture's own error when an "
                          "inject-mode dump is given, else its accumulated error with the limit "
                          "grown with depth.")
            : o.description;
    } else if (!o.description.empty()) {
        table["description"] = o.description;
    }
    table["accumulated_growth"] = growthName(growth);
    if (!gradientRuns.empty()) {
        json rules = gradientRules(gradient, growth, base, o, gradientModels);
        for (const auto& r : base.gradientRules) {
            if (!r.dtype || !gradient.contains(*r.dtype)) {
                rules.push_back(toleranceRuleToJson(r));
            }
        }
        table["gradient_rules"] = rules;
        table["format"] = kToleranceFormat;
        const auto [perDtype, models] = describeRuns(gradientRuns);
        const double chosen = gradientEvidence[growthName(growth)].is_number()
            ? gradientEvidence[growthName(growth)].get<double>()
            : meanSpread(gradient, growth);
        const std::string summary = fmt::format(
            "derived from {} healthy gradient runs ({}) of {}; limit = the {:g}th percentile of "
            "each dtype × gradient kind × op's own and depth-normalised accumulated errors × {:g} "
            "(a gradient's depth: the whole forward and the backward above it); {} growth with "
            "depth, {} (spread of the gradient errors' per-depth medians {:.2f}; sqrt {:.2f}, "
            "linear {:.2f}); other dtypes' gradient rules from {}",
            gradientRuns.size(), perDtype, models, o.percentile, o.margin, growthName(growth),
            o.growth ? "pinned by --growth"
                     : (forwardRuns.empty() ? "the table's (one law judges every row)"
                                            : "the forward's (one law judges every row)"),
            chosen, gradientEvidence["sqrt"].get<double>(),
            gradientEvidence["linear"].get<double>(), base.label());
        table["gradient_derivation"]
            = derivationRecord(gradientRuns, o, base, gradientEvidence, summary);
    }
    auto check = parseToleranceTable(table, o.name);
    if (!check) {
        return check.error().withContext("the derived table");
    }
    return table;
}

} // namespace day0::numerics
