#include "numerics/gradient_routing.h"

#include "numerics/gradient_anchor.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace day0::numerics {

namespace {

/// The flipped MoE layers of one judged dump, by decoder layer.
using LayerFlips = std::map<int, RoutingFlips>;

Result<LayerFlips> flipsOf(const Dump& reference, const Dump& judged, DType dtype)
{
    LayerFlips out;
    for (const auto& c : reference.captures()) {
        if (opKindForAnchor(c.name) != OpKind::RouterSelection) {
            continue;
        }
        const int layer = layerOfAnchor(c.name);
        if (layer < 0) {
            continue;
        }
        auto found = layerRoutingFlips(reference, judged, c.name, dtype);
        if (!found) {
            return found.error();
        }
        if (*found && !(*found)->flips.empty()) {
            out.emplace(layer, std::move(**found));
        }
    }
    return out;
}

/// Whether the gradient `anchor` (no suffix) of layer `layer` is upstream of that layer's
/// router in the backward: the layer's output, the MoE block's output, its shared experts.
bool upstreamOfRouter(const std::string& anchor, const std::string& selection)
{
    const std::string router = selection.substr(0, selection.rfind('#'));
    const std::string block = router.substr(0, router.rfind('.'));
    const auto at = selection.find("layers.");
    std::string layer = selection.substr(0, at + 7);
    for (std::size_t i = at + 7; i < selection.size() && selection[i] >= '0' && selection[i] <= '9';
         ++i) {
        layer += selection[i];
    }
    return anchor == layer || anchor == block || anchor.starts_with(block + ".shared_expert");
}

std::string tokenList(const std::vector<std::int64_t>& tokens)
{
    if (tokens.size() == 1) {
        return fmt::format("token {}", tokens.front());
    }
    return fmt::format("tokens {}", fmt::join(tokens, ", "));
}

} // namespace

int gradientDepth(const std::string& capture, std::int64_t numLayers)
{
    std::string name = capture.ends_with(kGradientSuffix)
        ? capture.substr(0, capture.size() - kGradientSuffix.size())
        : capture;
    const int layer = layerOfAnchor(name);
    if (layer >= 0) {
        return layer;
    }
    for (const std::string_view leaf : { std::string_view(".weight"), std::string_view(".bias") }) {
        if (name.ends_with(leaf)) {
            name.resize(name.size() - leaf.size());
        }
    }
    return opKindForAnchor(name) == OpKind::Embedding ? -1 : int(numLayers);
}

Result<void> judgeGradientRoutingFlips(
    DumpComparison& cmp, const Dump& reference, const Dump& target, const CompareOptions& options)
{
    auto accumulated = flipsOf(reference, target, cmp.precision);
    if (!accumulated) {
        return accumulated.error();
    }
    LayerFlips own;
    if (options.local != nullptr) {
        auto found = flipsOf(reference, *options.local, cmp.precision);
        if (!found) {
            return found.error();
        }
        own = std::move(*found);
    }
    if (accumulated->empty() && own.empty()) {
        return success();
    }
    // The router selection rows carry their layer's flips with the reference's margins (a
    // forward comparison shows them on the MoE's output, which a gradient dump does not hold).
    for (auto& row : cmp.rows) {
        if (row.kind != OpKind::RouterSelection) {
            continue;
        }
        const auto it = accumulated->find(row.layer);
        if (it == accumulated->end() || it->second.selection != row.name) {
            continue;
        }
        row.routing = it->second;
        row.verdict.reason = fmt::format("{}: expert choice flipped {}for {}", row.verdict.reason,
            it->second.allNearTies() ? "at a near-tie " : "",
            describeFlips(it->second, cmp.precision));
    }
    const std::int64_t numLayers = cmp.reference.numLayers;
    for (auto& row : cmp.rows) {
        if (!row.name.ends_with(kGradientSuffix)
            || (row.verdict.status != VerdictStatus::Fail && !options.everyFlipReach)
            || (!row.metrics && !row.own)) {
            continue;
        }
        // An own-error row carries only its own layer's flips (the gradient it received is the
        // reference's); an accumulated one every flip of the layers above it too.
        const bool isOwn = row.own.has_value();
        const LayerFlips& flips = isOwn ? own : *accumulated;
        const int depth = gradientDepth(row.name, numLayers);
        const std::string anchor = gradientAnchor(row.name);
        GradientFlips g;
        g.nearTies = true;
        std::set<std::int64_t> tokens;
        std::vector<std::string> where;
        for (const auto& [layer, rf] : flips) {
            if ((isOwn ? layer != depth : layer < depth)
                || (layer == depth && upstreamOfRouter(anchor, rf.selection))) {
                continue;
            }
            g.layers.push_back(layer);
            std::vector<std::int64_t> here;
            for (const auto& f : rf.flips) {
                here.push_back(f.token);
                tokens.insert(f.token);
                g.nearTies = g.nearTies && f.nearTie;
            }
            where.push_back(fmt::format("layer {} ({})", layer, tokenList(here)));
        }
        if (g.layers.empty()) {
            continue;
        }
        g.tokens.assign(tokens.begin(), tokens.end());
        const std::string flipped = fmt::format("{}", fmt::join(where, ", "));
        if (!g.nearTies) {
            row.verdict.reason += fmt::format(
                "; after an expert choice that flipped (not a near-tie) in {}", flipped);
            row.afterFlips = std::move(g);
            continue;
        }
        const Verdict full = row.verdict;
        const std::string fullText
            = fmt::format("all tokens: rel L2 {:.2e} (limit {:.2e})", full.value, full.limit);
        const Dump& judged = isOwn ? *options.local : target;
        const Tensor* rt = reference.tensor(row.name);
        const Tensor* tt = judged.tensor(row.name);
        const std::int64_t n = std::int64_t(cmp.reference.inputIds.size());
        const std::int64_t from = g.tokens.back() + 1;
        if (isActivationGradient(row.name) && rt != nullptr && tt != nullptr
            && rt->shape() == tt->shape() && rt->rank() >= 1 && rt->dim(0) == n && from < n) {
            auto m = compareTensors(rt->narrow(0, from, n - from).contiguous(),
                tt->narrow(0, from, n - from).contiguous(), options.metrics);
            if (!m) {
                return m.error().withContext(row.name);
            }
            g.judgedFrom = from;
            g.unaffected = *m;
            JudgeInput in;
            in.depth = captureDepth(row, numLayers);
            in.relL2 = m->relL2;
            in.accumulated = !isOwn;
            in.nonFiniteMismatch = m->nonFiniteMismatch;
            in.gradient = gradientKeyOf(row.name, row.kind);
            const Verdict rest = judge(*options.table, cmp.precision, row.kind, in);
            const std::string restText = fmt::format(
                "tokens {}..{}: rel L2 {:.2e} (limit {:.2e})", from, n - 1, rest.value, rest.limit);
            row.verdict = rest;
            if (rest.status == VerdictStatus::Fail) {
                row.verdict.reason
                    = fmt::format("fail: {} although the expert choice flipped only at near-ties "
                                  "in {}, before them; {}",
                        restText, flipped, fullText);
            } else {
                row.verdict.status = VerdictStatus::Warn;
                row.verdict.reason = fmt::format(
                    "warn: expert choice flipped at near-ties in {}, whose gradient reaches this "
                    "row at those tokens and the ones before them; {}; {}",
                    flipped, restText, fullText);
            }
        } else {
            row.verdict.status = VerdictStatus::Warn;
            row.verdict.reason = fmt::format(
                "warn: not judged: expert choice flipped at near-ties in {}, and {}; {}; an "
                "inject-mode gradient dump (--local) judges each layer's own error",
                flipped,
                isActivationGradient(row.name)
                    ? "the flipped tokens' gradient reaches every token of this row"
                    : "a parameter's gradient sums over every token, the flipped ones included",
                fullText);
        }
        row.afterFlips = std::move(g);
    }
    cmp.passCount = cmp.warnCount = cmp.failCount = cmp.notJudgedCount = 0;
    for (const auto& row : cmp.rows) {
        cmp.count(row.verdict.status);
    }
    return success();
}

} // namespace day0::numerics
