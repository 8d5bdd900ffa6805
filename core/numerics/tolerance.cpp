#include "numerics/tolerance.h"

#include "numerics/float_formats.h"
#include "numerics/gradient_anchor.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <utility>

namespace day0::numerics {

namespace {

constexpr std::array<std::pair<OpKind, std::string_view>, 11> kOpNames { {
    { OpKind::Embedding, "embedding" },
    { OpKind::Norm, "norm" },
    { OpKind::Linear, "linear" },
    { OpKind::Attention, "attention" },
    { OpKind::Mlp, "mlp" },
    { OpKind::Moe, "moe" },
    { OpKind::Router, "router" },
    { OpKind::RouterSelection, "router_selection" },
    { OpKind::DecoderLayer, "decoder_layer" },
    { OpKind::Logits, "logits" },
    { OpKind::Other, "other" },
} };

bool isDigits(std::string_view s)
{
    return !s.empty()
        && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

std::string_view gradientOfName(GradientOf of)
{
    return of == GradientOf::Parameter ? "parameter" : "activation";
}

std::optional<GradientOf> parseGradientOf(std::string_view name)
{
    if (name == "activation") {
        return GradientOf::Activation;
    }
    if (name == "parameter") {
        return GradientOf::Parameter;
    }
    return std::nullopt;
}

std::optional<GradientKey> gradientKeyOf(std::string_view capture, OpKind rowKind)
{
    if (!capture.ends_with(kGradientSuffix)) {
        return std::nullopt;
    }
    if (!isParameterGradient(capture)) {
        return GradientKey { GradientOf::Activation, rowKind };
    }
    // A parameter is keyed by the module that holds it: "...mlp.gate.weight" by the router,
    // "...self_attn.sinks" by the attention; a fused "...experts.gate_up_proj" names its op.
    std::string_view name = capture.substr(0, capture.size() - kGradientSuffix.size());
    for (const std::string_view leaf : { std::string_view(".weight"), std::string_view(".bias") }) {
        if (name.ends_with(leaf)) {
            return GradientKey { GradientOf::Parameter,
                opKindForAnchor(name.substr(0, name.size() - leaf.size())) };
        }
    }
    OpKind op = opKindForAnchor(name);
    if (op == OpKind::Other) {
        const auto dot = name.rfind('.');
        op = dot == std::string_view::npos ? op : opKindForAnchor(name.substr(0, dot));
    }
    return GradientKey { GradientOf::Parameter, op };
}

double growthFactor(DepthGrowth growth, int depth)
{
    const double d = double(std::max(depth, 0));
    switch (growth) {
    case DepthGrowth::None:
        return 1.0;
    case DepthGrowth::Sqrt:
        return std::sqrt(1.0 + d);
    case DepthGrowth::Linear:
        return 1.0 + d;
    }
    return 1.0;
}

std::optional<double> tolerancePolicyLimit(DType dtype)
{
    if (dtype == DType::F16) {
        return 1e-3;
    }
    if (dtype == DType::I8) {
        return 1e-2;
    }
    return std::nullopt;
}

std::string_view opKindName(OpKind kind)
{
    for (const auto& [k, name] : kOpNames) {
        if (k == kind) {
            return name;
        }
    }
    return "other";
}

std::optional<OpKind> parseOpKind(std::string_view name)
{
    for (const auto& [k, n] : kOpNames) {
        if (n == name) {
            return k;
        }
    }
    return std::nullopt;
}

OpKind opKindForAnchor(std::string_view capture)
{
    const auto hash = capture.find('#');
    if (hash != std::string_view::npos && capture.substr(hash) == "#topk") {
        return OpKind::RouterSelection;
    }
    const std::string_view name = capture.substr(0, hash);
    if (name == "lm_head" || name.ends_with(".lm_head")) {
        return OpKind::Logits;
    }
    const auto dot = name.rfind('.');
    const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
    std::string_view previous;
    if (dot != std::string_view::npos) {
        const std::string_view head = name.substr(0, dot);
        const auto dot2 = head.rfind('.');
        previous = dot2 == std::string_view::npos ? head : head.substr(dot2 + 1);
    }
    if (last == "embed_tokens" || last == "wte" || last == "tok_embeddings") {
        return OpKind::Embedding;
    }
    if (last.find("norm") != std::string_view::npos || last == "ln_q") {
        return OpKind::Norm;
    }
    // Qwen3-Next's Gated DeltaNet token mixer (not Nemotron-NAS's self_attn.linear_attn, a
    // plain Linear standing in for attention).
    if (last == "self_attn" || last == "attn" || last == "attention"
        || (last == "linear_attn" && previous != "self_attn")) {
        return OpKind::Attention;
    }
    if (last == "gate" && previous == "mlp") {
        return OpKind::Router;
    }
    if (last.find("_proj") != std::string_view::npos || last == "qkv" || last == "proj"
        || last == "fc1" || last == "fc2" || last == "patch_embed" || last == "w1" || last == "w2"
        || last == "w3" || last.starts_with("linear_fc")) {
        return OpKind::Linear;
    }
    if (last == "mlp" || last == "shared_experts" || last == "shared_expert" || last == "merger"
        || (isDigits(last) && (previous == "experts" || previous == "deepstack_merger_list"))) {
        return OpKind::Mlp;
    }
    if (last == "block_sparse_moe") {
        return OpKind::Moe;
    }
    if (isDigits(last) && (previous == "layers" || previous == "blocks")) {
        return OpKind::DecoderLayer;
    }
    return OpKind::Other;
}

int layerOfAnchor(std::string_view capture)
{
    for (const std::string_view key :
        { std::string_view("layers."), std::string_view("blocks.") }) {
        const auto pos = capture.find(key);
        if (pos == std::string_view::npos) {
            continue;
        }
        std::size_t i = pos + key.size();
        int value = 0;
        bool any = false;
        while (i < capture.size() && capture[i] >= '0' && capture[i] <= '9') {
            value = value * 10 + (capture[i] - '0');
            any = true;
            ++i;
        }
        if (any) {
            return value;
        }
    }
    return -1;
}

const ToleranceRule* ToleranceTable::match(DType dtype, OpKind op) const
{
    const ToleranceRule* best = nullptr;
    int bestScore = -1;
    for (const auto& rule : rules) {
        if ((rule.dtype && *rule.dtype != dtype) || (rule.op && *rule.op != op)) {
            continue;
        }
        const int score = (rule.dtype ? 2 : 0) + (rule.op ? 1 : 0);
        if (score > bestScore) {
            best = &rule;
            bestScore = score;
        }
    }
    return best;
}

const ToleranceRule* ToleranceTable::matchGradient(DType dtype, const GradientKey& key) const
{
    const ToleranceRule* best = nullptr;
    int bestScore = -1;
    for (const auto& rule : gradientRules) {
        if ((rule.dtype && *rule.dtype != dtype) || (rule.gradient && *rule.gradient != key.of)
            || (rule.op && *rule.op != key.op)) {
            continue;
        }
        const int score = (rule.dtype ? 4 : 0) + (rule.gradient ? 2 : 0) + (rule.op ? 1 : 0);
        if (score > bestScore) {
            best = &rule;
            bestScore = score;
        }
    }
    return best;
}

const EndToEndRule* ToleranceTable::matchEndToEnd(DType dtype) const
{
    for (const auto& rule : endToEnd) {
        if (rule.dtype == dtype) {
            return &rule;
        }
    }
    return nullptr;
}

std::string ToleranceTable::label() const { return fmt::format("{} v{}", name, version); }

double analyticFloor(
    const ToleranceRule& rule, DType dtype, int depth, bool accumulated, DepthGrowth growth)
{
    const double u = formatInfo(dtype).unitRoundoff;
    return rule.floorUnits * u * (accumulated ? growthFactor(growth, depth) : 1.0);
}

std::string_view verdictStatusName(VerdictStatus status)
{
    switch (status) {
    case VerdictStatus::Pass:
        return "pass";
    case VerdictStatus::Warn:
        return "warn";
    case VerdictStatus::Fail:
        return "fail";
    case VerdictStatus::NotJudged:
        return "n/a";
    }
    return "n/a";
}

std::string formatFloorRatio(double ratio)
{
    if (!std::isfinite(ratio)) {
        return "inf× floor";
    }
    if (ratio >= 100.0) {
        return fmt::format("{:.0f}× floor", ratio);
    }
    return fmt::format("{:.1f}× floor", ratio);
}

Verdict judge(const ToleranceTable& table, DType dtype, OpKind kind, const JudgeInput& input)
{
    Verdict v;
    v.table = table.label();
    v.basis = input.accumulated ? "accumulated" : "own";
    v.value = input.relL2;
    const ToleranceRule* rule = nullptr;
    if (input.gradient) {
        rule = table.matchGradient(dtype, *input.gradient);
        if (rule == nullptr) {
            // Gradients are noisier than the forward (a router's logit gradient is a difference
            // of expert outputs): a forward rule may fail a healthy backward, so say it judged.
            v.note = fmt::format("{} has no gradient rule for {} {} gradients ({}): judged by "
                                 "its forward rule",
                v.table, dtypeName(dtype), gradientOfName(input.gradient->of),
                opKindName(input.gradient->op));
        }
    }
    if (rule == nullptr) {
        rule = table.match(dtype, kind);
    }
    if (rule == nullptr) {
        v.reason
            = fmt::format("no rule for {} × {} in {}", dtypeName(dtype), opKindName(kind), v.table);
        return v;
    }
    v.rule = rule->id;
    v.limit = rule->maxRelL2
        * (input.accumulated ? growthFactor(table.accumulatedGrowth, input.depth) : 1.0);
    if (input.measuredFloor) {
        v.floor = *input.measuredFloor;
        v.floorSource = "measured";
    } else {
        v.floor
            = analyticFloor(*rule, dtype, input.depth, input.accumulated, table.accumulatedGrowth);
        v.floorSource = "analytic";
    }
    if (v.floor > 0.0) {
        v.floorRatio = v.value / v.floor;
    } else {
        v.floorRatio = v.value > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
    }
    const std::string where = fmt::format("{} error; rule {} of {}{}", v.basis, v.rule, v.table,
        v.note.empty() ? std::string() : "; " + v.note);
    const std::string floorText
        = fmt::format("{} ({})", formatFloorRatio(v.floorRatio), v.floorSource);
    if (input.nonFiniteMismatch > 0) {
        v.status = VerdictStatus::Fail;
        v.reason = fmt::format("fail: {} NaN/Inf positions differ from the reference ({})",
            input.nonFiniteMismatch, where);
        return v;
    }
    if (!std::isfinite(v.value) || v.value > v.limit) {
        v.status = VerdictStatus::Fail;
        v.reason = fmt::format(
            "fail: rel_l2 {:.2e} > {:.2e} ({}); {}", v.value, v.limit, where, floorText);
        return v;
    }
    if (rule->maxKl && input.klMean && *input.klMean > *rule->maxKl) {
        v.status = VerdictStatus::Fail;
        v.reason = fmt::format("fail: KL {:.2e} > {:.2e} ({})", *input.klMean, *rule->maxKl, where);
        return v;
    }
    if (rule->minTop1 && input.top1Agreement && *input.top1Agreement < *rule->minTop1) {
        v.status = VerdictStatus::Fail;
        v.reason = fmt::format("fail: top-1 agreement {:.1f}% < {:.1f}% ({})",
            100.0 * *input.top1Agreement, 100.0 * *rule->minTop1, where);
        return v;
    }
    if (v.floorRatio > rule->maxFloorRatio) {
        v.status = VerdictStatus::Warn;
        v.reason = fmt::format("warn: rel_l2 {:.2e} <= {:.2e} but {} > {:g}× allowed ({})", v.value,
            v.limit, floorText, rule->maxFloorRatio, where);
        return v;
    }
    v.status = VerdictStatus::Pass;
    v.reason
        = fmt::format("pass: rel_l2 {:.2e} <= {:.2e} ({}); {}", v.value, v.limit, where, floorText);
    return v;
}

} // namespace day0::numerics
