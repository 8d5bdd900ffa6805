// JSON and CSV forms of a DumpComparison (the `day0 compare` outputs).
#include "numerics/dump_compare.h"
#include "numerics/gradient_compare.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::numerics {

namespace {

/// JSON numbers cannot be NaN/Inf; those become null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json metricsJson(const ErrorMetrics& m)
{
    return { { "count", m.count }, { "cosine", num(m.cosine) }, { "max_abs", num(m.maxAbs) },
        { "max_abs_index", m.maxAbsIndex }, { "mean_abs", num(m.meanAbs) },
        { "max_rel", num(m.maxRel) }, { "mean_rel", num(m.meanRel) }, { "rmse", num(m.rmse) },
        { "rel_l2", num(m.relL2) }, { "snr_db", num(m.snrDb) }, { "within_1e-3", num(m.within1e3) },
        { "within_5e-3", num(m.within5e3) }, { "error_balance", num(m.errorBalance) },
        { "small_value", num(m.smallValue) }, { "nan_reference", m.nanReference },
        { "nan_target", m.nanTarget }, { "inf_reference", m.infReference },
        { "inf_target", m.infTarget }, { "nonfinite_mismatch", m.nonFiniteMismatch } };
}

nlohmann::json verdictJson(const Verdict& v)
{
    nlohmann::json j = { { "status", std::string(verdictStatusName(v.status)) },
        { "table", v.table }, { "rule", v.rule }, { "basis", v.basis }, { "value", num(v.value) },
        { "limit", num(v.limit) }, { "floor", num(v.floor) }, { "floor_source", v.floorSource },
        { "floor_ratio", num(v.floorRatio) }, { "reason", v.reason } };
    if (!v.note.empty()) {
        j["note"] = v.note; // a gradient judged by a forward rule
    }
    return j;
}

nlohmann::json infoJson(const DumpInfo& i)
{
    return { { "model", i.model }, { "fingerprint", i.fingerprint }, { "precision", i.precision },
        { "backend", i.backend }, { "mode", i.mode }, { "tokens", i.inputIds.size() },
        { "prompt_length", i.promptLength } };
}

/// A CSV field: quoted when it holds a comma, quote or newline.
std::string csvField(const std::string& s)
{
    if (s.find_first_of(",\"\n") == std::string::npos) {
        return s;
    }
    std::string out = "\"";
    for (const char c : s) {
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return out + "\"";
}

std::string csvNum(double v)
{
    return std::isfinite(v) ? fmt::format("{:.6g}", v)
                            : (std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

} // namespace

nlohmann::json comparisonToJson(const DumpComparison& c)
{
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : c.rows) {
        nlohmann::json row = { { "name", r.name }, { "op", std::string(opKindName(r.kind)) },
            { "layer", r.layer }, { "shape", r.shape }, { "stats_only", r.statsOnly },
            { "verdict", verdictJson(r.verdict) } };
        if (r.shapeMismatch) {
            row["target_shape"] = r.targetShape;
        }
        if (!r.opPrecision.empty()) {
            row["op_precision"] = r.opPrecision;
        }
        if (r.metrics) {
            row["metrics"] = metricsJson(*r.metrics);
        }
        if (r.own) {
            row["own"] = metricsJson(*r.own);
        }
        if (r.measuredFloor) {
            row["measured_floor"] = num(*r.measuredFloor);
        }
        if (r.stats) {
            row["stats_delta"] = { { "mean_diff", num(r.stats->meanDiff) },
                { "rms_rel", num(r.stats->rmsRel) }, { "abs_max_rel", num(r.stats->absMaxRel) } };
        }
        if (r.logits) {
            const auto& l = *r.logits;
            row["logits"] = { { "positions", l.positions }, { "kl_mean", num(l.klMean) },
                { "kl_max", num(l.klMax) }, { "top1_agreement", num(l.top1Agreement) },
                { "top5_overlap", num(l.top5Overlap) },
                { "first_differing_position", l.firstDifferingPosition },
                { "reference_token", l.referenceToken }, { "target_token", l.targetToken } };
        }
        if (r.experts) {
            const auto& e = *r.experts;
            row["experts"] = { { "tokens", e.tokens }, { "k", e.k },
                { "exact_set_share", num(e.exactSetShare) }, { "overlap", num(e.overlap) },
                { "first_flip_token", e.firstFlipToken } };
        }
        if (r.routing) {
            const auto& rf = *r.routing;
            nlohmann::json flips = nlohmann::json::array();
            for (const auto& f : rf.flips) {
                nlohmann::json one = { { "token", f.token }, { "dropped", f.dropped },
                    { "added", f.added }, { "near_tie", f.nearTie } };
                if (f.margin) {
                    one["reference_margin"] = num(*f.margin);
                    one["resolution"] = num(f.resolution);
                    one["resolution_from_router_error"] = f.routerError;
                    one["scale"] = marginScaleName(f.scale, rf.sigmoid);
                }
                if (f.groupMargin) {
                    one["reference_group_margin"] = num(*f.groupMargin);
                    one["group_resolution"] = num(f.groupResolution);
                    one["group_scale"] = marginScaleName(MarginScale::Group, rf.sigmoid);
                }
                flips.push_back(std::move(one));
            }
            row["routing_flips"] = { { "selection", rf.selection }, { "scores", rf.scores },
                { "basis", rf.basis }, { "tokens", rf.tokens }, { "flips", std::move(flips) } };
            if (rf.unflipped) {
                row["routing_flips"]["unflipped_rel_l2"] = num(rf.unflipped->relL2);
                row["routing_flips"]["unflipped_cosine"] = num(rf.unflipped->cosine);
            }
        }
        if (r.afterFlips) {
            const auto& g = *r.afterFlips;
            row["after_routing_flips"] = { { "layers", g.layers }, { "tokens", g.tokens },
                { "near_ties", g.nearTies }, { "judged_from_token", g.judgedFrom } };
            if (g.unaffected) {
                row["after_routing_flips"]["judged_rel_l2"] = num(g.unaffected->relL2);
            }
        }
        rows.push_back(std::move(row));
    }
    nlohmann::json divergence;
    if (c.firstDivergence) {
        const auto& r = c.rows[*c.firstDivergence];
        divergence = { { "capture", r.name }, { "layer", r.layer }, { "basis", c.divergenceBasis },
            { "reason", r.verdict.reason } };
    }
    return { { "reference", infoJson(c.reference) }, { "target", infoJson(c.target) },
        { "table", c.table }, { "precision", std::string(dtypeName(c.precision)) },
        { "status", c.status() },
        { "counts",
            { { "pass", c.passCount }, { "warn", c.warnCount }, { "fail", c.failCount },
                { "not_judged", c.notJudgedCount } } },
        { "first_divergence", divergence }, { "only_in_reference", c.onlyInReference },
        { "only_in_target", c.onlyInTarget }, { "warnings", c.warnings },
        { "captures", std::move(rows) }, { "gradients", gradientComparisonJson(c) } };
}

std::string comparisonToCsv(const DumpComparison& c)
{
    std::string out = "name,op,layer,shape,cosine,max_abs,max_rel,mean_rel,rmse,rel_l2,snr_db,"
                      "within_1e-3,within_5e-3,nan_reference,nan_target,inf_reference,inf_target,"
                      "own_rel_l2,kl_mean,top1_agreement,top5_overlap,expert_overlap,verdict,rule,"
                      "table,basis,limit,floor,floor_source,floor_ratio,reason\n";
    for (const auto& r : c.rows) {
        std::vector<std::string> f;
        f.push_back(csvField(r.name));
        f.emplace_back(opKindName(r.kind));
        f.push_back(std::to_string(r.layer));
        f.push_back(csvField(shapeString(r.shape)));
        if (r.metrics) {
            const auto& m = *r.metrics;
            for (const double v : { m.cosine, m.maxAbs, m.maxRel, m.meanRel, m.rmse, m.relL2,
                     m.snrDb, m.within1e3, m.within5e3 }) {
                f.push_back(csvNum(v));
            }
            for (const auto n : { m.nanReference, m.nanTarget, m.infReference, m.infTarget }) {
                f.push_back(std::to_string(n));
            }
        } else {
            f.insert(f.end(), 13, "");
        }
        f.push_back(r.own ? csvNum(r.own->relL2) : "");
        f.push_back(r.logits ? csvNum(r.logits->klMean) : "");
        f.push_back(r.logits ? csvNum(r.logits->top1Agreement) : "");
        f.push_back(r.logits ? csvNum(r.logits->top5Overlap) : "");
        f.push_back(r.experts ? csvNum(r.experts->overlap) : "");
        const auto& v = r.verdict;
        f.emplace_back(verdictStatusName(v.status));
        f.push_back(csvField(v.rule));
        f.push_back(csvField(v.table));
        f.push_back(v.basis);
        f.push_back(v.limit > 0 ? csvNum(v.limit) : "");
        f.push_back(v.floor > 0 ? csvNum(v.floor) : "");
        f.push_back(v.floorSource);
        f.push_back(v.floor > 0 ? csvNum(v.floorRatio) : "");
        f.push_back(csvField(v.reason));
        out += fmt::format("{}\n", fmt::join(f, ","));
    }
    return out;
}

} // namespace day0::numerics
