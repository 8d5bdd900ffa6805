#include "numerics/tolerance_derivation.h"

#include "numerics/float_formats.h"

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

std::string dtypePrefix(DType d)
{
    switch (d) {
    case DType::F64:
        return "fp64";
    case DType::F32:
        return "fp32";
    case DType::BF16:
        return "bf16";
    case DType::F16:
        return "fp16";
    case DType::F8E4M3:
        return "fp8";
    case DType::F8E5M2:
        return "fp8_e5m2";
    case DType::I8:
        return "int8";
    case DType::F4E2M1:
        return "fp4";
    case DType::I4:
        return "int4";
    default:
        return std::string(dtypeName(d));
    }
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

} // namespace

json toleranceRuleToJson(const ToleranceRule& rule)
{
    json j;
    j["id"] = rule.id;
    j["dtype"] = rule.dtype ? dtypePrefix(*rule.dtype) : "*"; // parseDTypeLoose reads them
    j["op"] = rule.op ? std::string(opKindName(*rule.op)) : "*";
    j["max_rel_l2"] = rule.maxRelL2;
    j["floor_units"] = rule.floorUnits;
    j["max_floor_ratio"] = rule.maxFloorRatio;
    if (rule.maxKl) {
        j["max_kl"] = *rule.maxKl;
    }
    if (rule.minTop1) {
        j["min_top1"] = *rule.minTop1;
    }
    if (!rule.looserBecause.empty()) {
        j["looser_because"] = rule.looserBecause;
    }
    if (!rule.note.empty()) {
        j["note"] = rule.note;
    }
    return j;
}

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
    // Samples per dtype and op kind; logits apart.
    std::map<DType, std::map<OpKind, std::vector<Sample>>> groups;
    std::map<DType, std::vector<std::pair<const HealthyRun*, LogitMetrics>>> logits;
    std::set<std::string> models;
    std::map<DType, int> runsPerDtype;
    for (const auto& run : runs) {
        models.insert(run.model);
        ++runsPerDtype[run.dtype];
        int judged = 0;
        // Own errors by capture from the inject-mode comparison (the tokens whose experts
        // differ judged apart, as the comparison does).
        std::map<std::string, double> own;
        if (run.local) {
            for (const auto& row : run.local->rows) {
                if (row.routing && row.routing->unflipped && row.routing->basis == "own") {
                    own[row.name] = row.routing->unflipped->relL2;
                } else if (row.own) {
                    own[row.name] = row.own->relL2;
                }
            }
        }
        for (const auto& row : run.propagated.rows) {
            if (row.shapeMismatch || row.statsOnly || row.kind == OpKind::RouterSelection) {
                continue;
            }
            Sample s;
            s.run = &run;
            s.capture = row.name;
            s.depth = captureDepth(row, run.propagated.reference.numLayers);
            if (row.routing && row.routing->unflipped) {
                s.accumulated = row.routing->unflipped->relL2;
            } else if (row.metrics) {
                s.accumulated = row.metrics->relL2;
            }
            if (const auto it = own.find(row.name); it != own.end()) {
                s.own = it->second;
            }
            if (!s.accumulated && !s.own) {
                continue;
            }
            if ((s.accumulated && !std::isfinite(*s.accumulated))
                || (s.own && !std::isfinite(*s.own))) {
                return Error::badInput(fmt::format("{} ({}): {} is not finite: not a healthy run",
                    run.model, run.prompt, row.name));
            }
            groups[run.dtype][row.kind].push_back(s);
            if (row.logits) {
                logits[run.dtype].emplace_back(&run, *row.logits);
            }
            ++judged;
        }
        if (judged == 0) {
            return Error::badInput(fmt::format("{} ({}, {}): no capture to learn from", run.model,
                run.prompt, dtypeName(run.dtype)));
        }
    }

    // The growth law: the one under which the accumulated errors' per-depth medians are flattest.
    json growthEvidence = json::object();
    DepthGrowth growth = DepthGrowth::Sqrt;
    double best = std::numeric_limits<double>::max();
    const auto meanSpread = [&](DepthGrowth g) {
        double spread = 0.0;
        int n = 0;
        for (const auto& [dtype, ops] : groups) {
            for (const auto& [op, samples] : ops) {
                spread += growthSpread(samples, g);
                ++n;
            }
        }
        return n > 0 ? spread / n : 0.0;
    };
    for (DepthGrowth g : { DepthGrowth::Sqrt, DepthGrowth::Linear }) {
        const double mean = meanSpread(g);
        growthEvidence[growthName(g)] = mean;
        if (mean < best - 1e-12) {
            best = mean;
            growth = g;
        }
    }
    if (o.growth) {
        growth = *o.growth;
        best = meanSpread(growth);
        growthEvidence[growthName(growth)] = best;
    }

    json rules = json::array();
    std::set<DType> derived;
    for (const auto& [dtype, ops] : groups) {
        derived.insert(dtype);
        const std::string prefix = dtypePrefix(dtype);
        const double u = formatInfo(dtype).unitRoundoff;
        std::vector<double> allValues;
        std::string allWhere;
        double allMax = 0.0;
        double allRatio = 0.0;
        auto makeRule = [&](const std::string& id, std::optional<OpKind> op,
                            const std::vector<double>& values, double largest,
                            const std::string& where, double ratioValue) {
            ToleranceRule r;
            r.id = id;
            r.dtype = dtype;
            r.op = op;
            const ToleranceRule* b = base.match(dtype, op.value_or(OpKind::Other));
            r.floorUnits = b != nullptr ? b->floorUnits : 1.0;
            // Healthy runs whose values are all exact (weights already stored in the dtype)
            // leave nothing to scale: one op's analytic noise floor then sets the limit.
            const double observed = percentileOf(values, o.percentile);
            const double floor = r.floorUnits * u;
            r.maxRelL2 = roundUp2((observed > 0.0 ? observed : floor) * o.margin);
            // value / floor, floor = floor_units × u × growth: as judge() computes it.
            r.maxFloorRatio = std::max(b != nullptr ? b->maxFloorRatio : 4.0,
                roundUp2(ratioValue / r.floorUnits * o.margin));
            r.note = observed > 0.0
                ? fmt::format("derived: {} healthy values, largest {:.3g} ({}); limit = the "
                              "{:g}th percentile × {:g}",
                    values.size(), largest, where, o.percentile, o.margin)
                : fmt::format("derived: {} healthy values, all exact; limit = one op's noise "
                              "floor {:.3g} × {:g}",
                    values.size(), floor, o.margin);
            const auto policy = tolerancePolicyLimit(dtype);
            if (policy && r.maxRelL2 > *policy) {
                r.looserBecause = fmt::format("healthy runs of {} reach {:.3g} here ({})",
                    fmt::join(models, ", "), largest, where);
            }
            return r;
        };
        for (const auto& [op, samples] : ops) {
            std::vector<double> values;
            double largest = 0.0;
            double ratio = 0.0; // largest value / (u × growth), before floor_units
            std::string where;
            for (const auto& s : samples) {
                auto consider = [&](double v, bool accumulated) {
                    const double g = accumulated ? growthFactor(growth, s.depth) : 1.0;
                    values.push_back(v / g);
                    ratio = std::max(ratio, v / (u * g));
                    if (v / g > largest) {
                        largest = v / g;
                        where = fmt::format("{}, {}, {}{}", s.run->model, s.capture,
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
            allValues.insert(allValues.end(), values.begin(), values.end());
            if (largest > allMax) {
                allMax = largest;
                allWhere = where;
            }
            allRatio = std::max(allRatio, ratio);
            auto rule = makeRule(
                fmt::format("{}.{}", prefix, opKindName(op)), op, values, largest, where, ratio);
            if (op == OpKind::Logits && logits.contains(dtype)) {
                std::vector<double> kl;
                double minTop1 = 1.0;
                for (const auto& [run, m] : logits.at(dtype)) {
                    kl.push_back(m.klMean);
                    minTop1 = std::min(minTop1, m.top1Agreement);
                }
                rule.maxKl = roundUp2(percentileOf(kl, o.percentile) * o.margin);
                rule.minTop1
                    = std::max(0.0, std::floor((1.0 - (1.0 - minTop1) * o.margin) * 100.0) / 100.0);
                rule.note += fmt::format("; KL up to {:.3g}, top-1 agreement down to {:.1f}%",
                    *std::max_element(kl.begin(), kl.end()), 100.0 * minTop1);
            }
            rules.push_back(toleranceRuleToJson(rule));
        }
        rules.push_back(toleranceRuleToJson(
            makeRule(prefix + ".any", std::nullopt, allValues, allMax, allWhere, allRatio)));
    }
    for (const auto& r : base.rules) {
        if (!r.dtype || !derived.contains(*r.dtype)) {
            rules.push_back(toleranceRuleToJson(r));
        }
    }

    std::vector<std::string> dtypeNames;
    std::vector<std::string> perDtype;
    for (const auto& [dtype, n] : runsPerDtype) {
        dtypeNames.push_back(dtypePrefix(dtype));
        perDtype.push_back(fmt::format("{} {}", n, dtypePrefix(dtype)));
    }
    std::set<std::string> prompts;
    for (const auto& run : runs) {
        prompts.insert(run.prompt);
    }
    json derivation;
    derivation["summary"] = fmt::format(
        "derived from {} healthy runs ({}) of {}; limit = the {:g}th percentile of each dtype × "
        "op's own and depth-normalised accumulated errors × {:g}; {} growth with depth ({}: "
        "spread of the errors' per-depth medians {:.2f} against {:.2f}); other dtypes from {}",
        runs.size(), fmt::join(perDtype, ", "), fmt::join(models, ", "), o.percentile, o.margin,
        growthName(growth), o.growth ? "pinned by --growth" : "it flattens them best", best,
        growth == DepthGrowth::Linear ? growthEvidence["sqrt"].get<double>()
                                      : growthEvidence["linear"].get<double>(),
        base.label());
    derivation["models"] = models;
    derivation["dtypes"] = dtypeNames;
    derivation["runs"] = runs.size();
    derivation["prompts"] = prompts;
    derivation["percentile"] = o.percentile;
    derivation["margin"] = o.margin;
    derivation["growth_spread"] = growthEvidence;
    derivation["base"] = base.label();
    if (!o.command.empty()) {
        derivation["command"] = o.command;
    }

    json table;
    table["name"] = o.name;
    table["version"] = o.version;
    table["description"] = o.description.empty()
        ? std::string("Limits on the relative L2 error of a target against an fp32/fp64 "
                      "reference, per target dtype and op kind, derived from healthy runs (see "
                      "'derivation'). The judged error is a capture's own error when an "
                      "inject-mode dump is given, else its accumulated error with the limit grown "
                      "with depth.")
        : o.description;
    table["accumulated_growth"] = growthName(growth);
    table["derivation"] = derivation;
    table["rules"] = rules;
    auto check = parseToleranceTable(table, o.name);
    if (!check) {
        return check.error().withContext("the derived table");
    }
    return table;
}

} // namespace day0::numerics
