#include "numerics/dump_compare.h"

#include "numerics/gradient_anchor.h"
#include "numerics/gradient_compare.h"
#include "numerics/gradient_routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace day0::numerics {

namespace {

StatsDelta statsDelta(const TensorStats& r, const TensorStats& t)
{
    StatsDelta d;
    const double rms = r.rms > 0.0 ? r.rms : 1.0;
    d.meanDiff = std::fabs(t.mean - r.mean) / rms;
    d.rmsRel = std::fabs(t.rms - r.rms) / rms;
    d.absMaxRel = std::fabs(t.absMax - r.absMax) / (r.absMax > 0.0 ? r.absMax : 1.0);
    return d;
}

std::string firstIdDifference(
    const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b)
{
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        if (a[i] != b[i]) {
            return fmt::format(
                "token {} is {} in the reference and {} in the target", i, a[i], b[i]);
        }
    }
    return fmt::format("the reference has {} input tokens and the target {}", a.size(), b.size());
}

Result<void> checkCompatible(
    const Dump& reference, const Dump& target, bool allow, std::vector<std::string>& warnings)
{
    const auto& r = reference.info;
    const auto& t = target.info;
    if (!r.fingerprint.empty() && !t.fingerprint.empty() && r.fingerprint != t.fingerprint) {
        const std::string message
            = fmt::format("the dumps come from different models: reference '{}' vs target '{}'",
                r.fingerprint, t.fingerprint);
        if (!allow) {
            return Error::badInput(message);
        }
        warnings.push_back(message);
    }
    if (!r.inputIds.empty() && !t.inputIds.empty() && r.inputIds != t.inputIds) {
        const std::string message = "the dumps were made from different inputs: "
            + firstIdDifference(r.inputIds, t.inputIds);
        if (!allow) {
            return Error::badInput(message);
        }
        warnings.push_back(message);
    }
    return success();
}

/// Fills the metrics of one row from full tensors.
Result<void> compareStored(
    CaptureComparison& row, const Tensor& r, const Tensor& t, const CompareOptions& options)
{
    if (row.kind == OpKind::RouterSelection) {
        auto agreement = compareExpertSelection(r, t);
        if (!agreement) {
            return agreement.error().withContext(row.name);
        }
        row.experts = *agreement;
        return success();
    }
    auto metrics = compareTensors(r, t, options.metrics);
    if (!metrics) {
        return metrics.error().withContext(row.name);
    }
    row.metrics = *metrics;
    // The gradient of the logits ("lm_head#grad") is no distribution: no KL or top-k for it.
    if (row.kind == OpKind::Logits && !row.name.ends_with(kGradientSuffix)) {
        auto logits = compareLogits(r, t);
        if (!logits) {
            return logits.error().withContext(row.name);
        }
        row.logits = *logits;
    }
    return success();
}

/// Relative L2 between the reference's tensor and another dump's tensor of the same capture.
std::optional<ErrorMetrics> againstOther(
    const Tensor& reference, const Dump* other, const std::string& name, const MetricOptions& o)
{
    if (other == nullptr) {
        return std::nullopt;
    }
    const Tensor* t = other->tensor(name);
    if (t == nullptr || t->shape() != reference.shape()) {
        return std::nullopt;
    }
    auto m = compareTensors(reference, *t, o);
    if (!m) {
        return std::nullopt;
    }
    return *m;
}

/// The router selection capture ("...#topk") of each layer, from the reference's captures.
std::map<int, std::string> selectionsByLayer(const Dump& reference)
{
    std::map<int, std::string> out;
    for (const auto& c : reference.captures()) {
        if (opKindForAnchor(c.name) == OpKind::RouterSelection) {
            out.emplace(layerOfAnchor(c.name), c.name);
        }
    }
    return out;
}

/// For a MoE output row (or its decoder layer's output, which carries the MoE's error): the tokens
/// whose experts flipped in the judged dump (the inject-mode one when given, else the target),
/// their reference margins, and the error over the rest.
Result<void> analyseRoutingFlips(CaptureComparison& row, const Tensor& reference,
    const Dump& referenceDump, const Dump& target, const std::string& selection,
    const CompareOptions& options, DType dtype)
{
    const bool own = row.own.has_value();
    const Dump& judged = own ? *options.local : target;
    const Tensor* out = judged.tensor(row.name);
    if (out == nullptr || reference.rank() < 1) {
        return success();
    }
    auto found = layerRoutingFlips(referenceDump, judged, selection, dtype);
    if (!found) {
        return found.error();
    }
    if (!*found || (*found)->flips.empty() || reference.dim(0) != (*found)->tokens) {
        return success();
    }
    RoutingFlips flips = std::move(**found);
    flips.basis = own || judged.info.mode == "inject" ? "own" : "accumulated";
    if (std::int64_t(flips.flips.size()) < flips.tokens) {
        auto m
            = compareExcludingTokens(reference, *out, flips.tokens, flips.flips, options.metrics);
        if (!m) {
            return m.error().withContext(row.name);
        }
        flips.unflipped = *m;
    }
    row.routing = std::move(flips);
    return success();
}

std::string describeFlip(const TokenFlip& f, DType dtype, bool sigmoid)
{
    if (!f.margin && !f.groupMargin) {
        return fmt::format("token {} (no reference router scores)", f.token);
    }
    std::string name(dtypeName(dtype));
    std::transform(name.begin(), name.end(), name.begin(),
        [](unsigned char c) { return char(std::tolower(c)); });
    // After a group flip an expert-stage margin below zero (an added expert the reference had
    // only masked) is no decision against the reference, so its sign is kept.
    const auto stage = [&](double margin, double resolution, MarginScale scale) {
        const double shown = f.groupMargin ? margin : std::fabs(margin);
        const std::string what = scale == MarginScale::Logit && f.routerError
            ? std::string("the target's router-logit error")
            : name + " resolution";
        return fmt::format("reference margin {:.1e} {} {} {:.1e}, {}", shown,
            shown <= resolution ? "<=" : ">", what, resolution, marginScaleName(scale, sigmoid));
    };
    std::string out = fmt::format("token {} (", f.token);
    if (f.groupMargin) {
        out += stage(*f.groupMargin, f.groupResolution, MarginScale::Group);
        if (f.margin) {
            out += "; ";
        }
    }
    if (f.margin) {
        out += stage(*f.margin, f.resolution, f.scale);
    }
    return out + ")";
}

/// Rejudges a MoE (or decoder layer) row whose layer's routing flipped: near-tie flips are a
/// discrete event, so the row is judged on the other tokens and warns; other flips fail, naming the
/// tokens.
void judgeRoutingFlips(CaptureComparison& row, const DumpComparison& cmp,
    const CompareOptions& options, const JudgeInput& input)
{
    const RoutingFlips& rf = *row.routing;
    const std::string flipped = describeFlips(rf, cmp.precision);
    const Verdict full = row.verdict;
    const std::string fullText = fmt::format("all tokens: rel L2 {:.2e}", full.value);
    if (!rf.allNearTies()) {
        if (full.status == VerdictStatus::Fail) {
            row.verdict.reason = fmt::format(
                "{}; expert choice flipped (not a near-tie) for {}", full.reason, flipped);
        } else {
            row.verdict.reason += fmt::format("; expert choice flipped for {}", flipped);
        }
        return;
    }
    if (!rf.unflipped) {
        row.verdict.status = VerdictStatus::Warn;
        row.verdict.reason = fmt::format(
            "warn: expert choice flipped at a near-tie for every token: {}; {}", flipped, fullText);
        return;
    }
    JudgeInput rest = input;
    rest.relL2 = rf.unflipped->relL2;
    rest.nonFiniteMismatch = rf.unflipped->nonFiniteMismatch;
    const Verdict others = judge(*options.table, cmp.precision, row.kind, rest);
    row.verdict = others;
    const std::string othersText
        = fmt::format("the other tokens: rel L2 {:.2e} (limit {:.2e})", others.value, others.limit);
    if (others.status == VerdictStatus::Fail) {
        row.verdict.reason = fmt::format("fail: {} although expert choice flipped only at a "
                                         "near-tie for {}; {}",
            othersText, flipped, fullText);
        return;
    }
    row.verdict.status = VerdictStatus::Warn;
    row.verdict.reason = fmt::format(
        "warn: expert choice flipped at a near-tie for {}; {}; {}", flipped, othersText, fullText);
}

void judgeRow(CaptureComparison& row, const DumpComparison& cmp, const CompareOptions& options,
    bool floorIsLocal)
{
    const ToleranceTable& table = *options.table;
    if (row.shapeMismatch) {
        row.verdict.status = VerdictStatus::Fail;
        row.verdict.table = table.label();
        row.verdict.reason = fmt::format("fail: shape {} in the reference, {} in the target",
            shapeString(row.shape), shapeString(row.targetShape));
        return;
    }
    if (row.experts) {
        row.verdict.table = table.label();
        row.verdict.basis = "accumulated";
        const auto& e = *row.experts;
        if (e.firstFlipToken < 0) {
            row.verdict.status = VerdictStatus::Pass;
            row.verdict.reason
                = fmt::format("pass: all {} tokens chose the same {} experts", e.tokens, e.k);
        } else {
            // A routing flip is a discrete event that low precision legitimately causes; it is
            // flagged, and the experts' outputs are judged on their own rows.
            row.verdict.status = VerdictStatus::Warn;
            row.verdict.reason = fmt::format(
                "warn: {:.1f}% of tokens chose the same experts (overlap {:.1f}%), first flip at "
                "token {}",
                100.0 * e.exactSetShare, 100.0 * e.overlap, e.firstFlipToken);
        }
        return;
    }
    JudgeInput in;
    in.depth = captureDepth(row, cmp.reference.numLayers);
    in.gradient = gradientKeyOf(row.name, row.kind);
    if (row.own) {
        in.relL2 = row.own->relL2;
        in.accumulated = false;
        in.nonFiniteMismatch = row.own->nonFiniteMismatch;
        if (floorIsLocal) {
            in.measuredFloor = row.measuredFloor;
        }
    } else if (row.metrics) {
        in.relL2 = row.metrics->relL2;
        in.nonFiniteMismatch = row.metrics->nonFiniteMismatch;
        if (!floorIsLocal) {
            in.measuredFloor = row.measuredFloor;
        }
    } else if (row.stats) {
        // Statistics only: the rms difference is a lower bound of the relative L2 error, so it
        // can prove a failure but never a pass.
        JudgeInput bound;
        bound.relL2 = row.stats->rmsRel;
        bound.depth = in.depth;
        bound.gradient = gradientKeyOf(row.name, row.kind);
        const Verdict lower = judge(table, cmp.precision, row.kind, bound);
        row.verdict = lower;
        if (lower.status != VerdictStatus::Fail) {
            row.verdict.status = VerdictStatus::NotJudged;
            row.verdict.reason = fmt::format(
                "n/a: statistics only (rms differs by {:.2e}, a lower bound of rel_l2)",
                row.stats->rmsRel);
        } else {
            row.verdict.reason += " [statistics-only lower bound]";
        }
        return;
    } else {
        return;
    }
    if (row.logits) {
        in.klMean = row.logits->klMean;
        in.top1Agreement = row.logits->top1Agreement;
    }
    // The run's precision keys the rules even for ops that ran in another one (the bf16 norms
    // of an fp8 run): a sub-module's error in inject mode still includes what earlier ops of its
    // layer contributed, so it is judged as part of the run.
    row.verdict = judge(table, cmp.precision, row.kind, in);
    if (row.routing && !row.routing->flips.empty()) {
        judgeRoutingFlips(row, cmp, options, in);
    }
}

} // namespace

std::string DumpComparison::status() const
{
    if (failCount > 0) {
        return "fail";
    }
    return warnCount > 0 ? "warn" : "pass";
}

void DumpComparison::count(VerdictStatus status)
{
    switch (status) {
    case VerdictStatus::Pass:
        ++passCount;
        break;
    case VerdictStatus::Warn:
        ++warnCount;
        break;
    case VerdictStatus::Fail:
        ++failCount;
        break;
    case VerdictStatus::NotJudged:
        ++notJudgedCount;
        break;
    }
}

std::optional<DType> precisionDType(const std::string& precision)
{
    std::string p = precision;
    std::transform(
        p.begin(), p.end(), p.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    std::replace(p.begin(), p.end(), '-', '_');
    return parseToleranceDType(p);
}

std::string describeFlips(const RoutingFlips& rf, DType dtype)
{
    std::string flipped;
    for (std::size_t i = 0; i < rf.flips.size() && i < 8; ++i) {
        flipped += (i == 0 ? "" : "; ") + describeFlip(rf.flips[i], dtype, rf.sigmoid);
    }
    if (rf.flips.size() > 8) {
        flipped += fmt::format("; and {} more", rf.flips.size() - 8);
    }
    return flipped;
}

Result<std::optional<RoutingFlips>> layerRoutingFlips(
    const Dump& reference, const Dump& judged, const std::string& selection, DType dtype)
{
    const Tensor* rs = reference.tensor(selection);
    const Tensor* ts = judged.tensor(selection);
    if (rs == nullptr || ts == nullptr || rs->shape() != ts->shape() || rs->rank() != 2) {
        return std::optional<RoutingFlips>();
    }
    RoutingFlips flips;
    flips.selection = selection;
    flips.basis = judged.info.mode == "inject" ? "own" : "accumulated";
    flips.tokens = rs->dim(0);
    const std::string logitsName = selection.substr(0, selection.rfind('#'));
    ReferenceRouterScores scores;
    scores.logits = reference.tensor(logitsName);
    scores.selection = reference.tensor(logitsName + "#score");
    scores.scale = routerScaleFromJson(reference.info.extra);
    scores.targetLogits = judged.tensor(logitsName);
    if (scores.selection != nullptr && scores.scale && scores.scale->sigmoid) {
        flips.scores = logitsName + "#score";
    } else if (scores.logits != nullptr) {
        flips.scores = logitsName;
    }
    flips.sigmoid = scores.scale && scores.scale->sigmoid;
    auto found = findTokenFlips(*rs, *ts, scores, dtype);
    if (!found) {
        return found.error().withContext(selection);
    }
    flips.flips = std::move(*found);
    return std::optional<RoutingFlips>(std::move(flips));
}

Result<DumpComparison> compareDumps(const Dump& reference, const Dump& target,
    const CompareOptions& options, Progress& progress, std::stop_token stop)
{
    if (options.table == nullptr) {
        return Error::internal("compareDumps: no tolerance table given");
    }
    DumpComparison cmp;
    cmp.reference = reference.info;
    cmp.target = target.info;
    cmp.table = options.table->label();
    DAY0_TRY(checkCompatible(reference, target, options.allowMismatch, cmp.warnings));
    if (options.precision) {
        cmp.precision = *options.precision;
    } else {
        const auto p = precisionDType(target.info.precision);
        if (!p) {
            return Error::badInput(fmt::format(
                "target dump: unknown precision '{}' (expected fp64, fp32, bf16, fp16, fp8, int8, "
                "nvfp4, mxfp4, int4)",
                target.info.precision));
        }
        cmp.precision = *p;
    }
    if (options.local != nullptr && options.local->info.mode != "inject") {
        cmp.warnings.push_back(fmt::format(
            "the own-error dump has mode '{}', not 'inject': its errors include inherited error",
            options.local->info.mode));
    }
    const bool floorIsLocal = options.floor != nullptr && options.floor->info.mode == "inject";
    const auto selections = selectionsByLayer(reference);

    progress.setTotal(std::int64_t(reference.captures().size()));
    const std::size_t every = std::max<std::size_t>(1, (reference.captures().size() + 9) / 10);
    std::size_t visited = 0;
    std::set<std::string> seen;
    for (const auto& rc : reference.captures()) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        progress.advance();
        if (rc.name.ends_with("#score")) {
            // A router's selection scores serve the margins of flipped choices (RoutingFlips),
            // not a row of their own; the PyTorch twin's dumps do not have them.
            continue;
        }
        const CaptureInfo* tc = target.find(rc.name);
        if (tc == nullptr) {
            cmp.onlyInReference.push_back(rc.name);
            continue;
        }
        seen.insert(rc.name);
        CaptureComparison row;
        row.name = rc.name;
        const auto overridden = parseOpKind(!rc.op.empty() ? rc.op : tc->op);
        row.kind = overridden ? *overridden : opKindForAnchor(rc.name);
        // The embedding's output gradient is layer 0's input gradient, what the backward of
        // every layer accumulates: judged as a decoder layer's, not as the forward's exact lookup.
        if (row.kind == OpKind::Embedding && isActivationGradient(rc.name)) {
            row.kind = OpKind::DecoderLayer;
        }
        row.layer = layerOfAnchor(rc.name);
        row.shape = rc.shape;
        row.targetShape = tc->shape;
        row.opPrecision = tc->precision;
        row.shapeMismatch = rc.shape != tc->shape;
        const Tensor* rt = reference.tensor(rc.name);
        const Tensor* tt = target.tensor(rc.name);
        if (!row.shapeMismatch) {
            if (rt != nullptr && tt != nullptr) {
                DAY0_TRY(compareStored(row, *rt, *tt, options));
                if (row.kind != OpKind::RouterSelection) {
                    row.own = againstOther(*rt, options.local, rc.name, options.metrics);
                    if (const auto f = againstOther(*rt, options.floor, rc.name, options.metrics)) {
                        row.measuredFloor = f->relL2;
                    }
                }
                const auto sel = selections.find(row.layer);
                // A gradient row's flips are judged with the whole backward in view, below.
                if ((row.kind == OpKind::Moe || row.kind == OpKind::DecoderLayer)
                    && sel != selections.end() && !row.name.ends_with(kGradientSuffix)) {
                    DAY0_TRY(analyseRoutingFlips(
                        row, *rt, reference, target, sel->second, options, cmp.precision));
                }
            } else {
                row.statsOnly = true;
                row.stats = statsDelta(rc.stats, tc->stats);
            }
        }
        judgeRow(row, cmp, options, floorIsLocal);
        cmp.count(row.verdict.status);
        cmp.rows.push_back(std::move(row));
        if (options.partial && ++visited % every == 0) {
            options.partial(cmp);
        }
    }
    for (const auto& tc : target.captures()) {
        if (!seen.contains(tc.name) && !tc.name.ends_with("#score")) {
            cmp.onlyInTarget.push_back(tc.name);
        }
    }
    if (isGradientComparison(cmp)) {
        DAY0_TRY(judgeGradientRoutingFlips(cmp, reference, target, options));
    }
    int forwardJudged = 0;
    for (const auto& row : cmp.rows) {
        forwardJudged += row.verdict.note.empty() ? 0 : 1;
    }
    if (forwardJudged > 0) {
        cmp.warnings.push_back(fmt::format(
            "{} gradient rows judged by forward rules: {} has no gradient rules for {} (gradients "
            "are noisier than the forward: a table's 'gradient_rules' judge them)",
            forwardJudged, options.table->label(), dtypeName(cmp.precision)));
    }
    cmp.divergenceBasis = options.local != nullptr ? "own" : "accumulated";
    for (std::size_t i = 0; i < cmp.rows.size(); ++i) {
        if (cmp.rows[i].verdict.status == VerdictStatus::Fail) {
            cmp.firstDivergence = i;
            break;
        }
    }
    return cmp;
}

int captureDepth(const CaptureComparison& row, std::int64_t numLayers)
{
    if (row.name.ends_with(kGradientSuffix)) {
        // A gradient carries the error of the whole forward (the loss reads every layer) and of
        // the backward from the loss down to it: layer L's, N + (N − 1 − L) layers' worth; the
        // embedding's 2N; the head's and the final norm's N.
        const int at = gradientDepth(row.name, numLayers);
        return int(numLayers) + std::max(0, int(numLayers) - 1 - at);
    }
    if (row.layer >= 0) {
        return row.layer;
    }
    if (row.kind == OpKind::Logits || row.name == "model.norm") {
        return int(numLayers);
    }
    return 0;
}

} // namespace day0::numerics
