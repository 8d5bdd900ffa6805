#include "numerics/gradient_compare.h"

#include "numerics/gradient_anchor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace day0::numerics {

bool isGradientComparison(const DumpComparison& comparison)
{
    const auto says = [](const nlohmann::json& extra) {
        return extra.is_object() && extra.contains("gradients") && extra["gradients"].is_boolean()
            && extra["gradients"].get<bool>();
    };
    if (says(comparison.reference.extra) || says(comparison.target.extra)) {
        return true;
    }
    // A dump from elsewhere (the PyTorch twin's) that does not say so: its activation gradients.
    return std::any_of(comparison.rows.begin(), comparison.rows.end(),
        [](const CaptureComparison& r) { return isActivationGradient(r.name); });
}

std::string gradientDirectionNote(const DumpComparison& comparison)
{
    if (!isGradientComparison(comparison)) {
        return {};
    }
    return "gradients flow backward: rows run from the loss down, and the gradient layer L's "
           "backward passes on (model.layers.{L-1}#grad; model.embed_tokens#grad for layer 0) "
           "inherits the error of every layer after L; its own error is layer L's";
}

std::vector<LayerBackwardError> layerBackwardErrors(const DumpComparison& comparison)
{
    std::vector<LayerBackwardError> out;
    if (!isGradientComparison(comparison)) {
        return out;
    }
    std::map<std::string, std::size_t> byName;
    for (std::size_t i = 0; i < comparison.rows.size(); ++i) {
        byName.emplace(comparison.rows[i].name, i);
    }
    const auto rowOf = [&](const std::string& capture) -> const CaptureComparison* {
        const auto it = byName.find(capture);
        return it == byName.end() || !comparison.rows[it->second].metrics
            ? nullptr
            : &comparison.rows[it->second];
    };
    const auto layers = comparison.reference.numLayers;
    for (auto l = layers - 1; l >= 0; --l) {
        const std::string passed = l == 0
            ? std::string("model.embed_tokens#grad")
            : fmt::format("model.layers.{}{}", l - 1, kGradientSuffix);
        const CaptureComparison* row = rowOf(passed);
        if (row == nullptr) {
            continue;
        }
        LayerBackwardError e;
        e.layer = int(l);
        e.capture = passed;
        e.row = byName.at(passed);
        e.accumulated = row->metrics->relL2;
        if (row->own) {
            e.own = row->own->relL2;
        }
        if (const CaptureComparison* received
            = rowOf(fmt::format("model.layers.{}{}", l, kGradientSuffix))) {
            e.inherited = received->metrics->relL2;
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::optional<LayerBackwardError> largestOwnBackwardError(const DumpComparison& comparison)
{
    std::optional<LayerBackwardError> best;
    for (auto& e : layerBackwardErrors(comparison)) {
        if (e.own && (!best || *e.own > *best->own)) {
            best = std::move(e);
        }
    }
    return best;
}

nlohmann::json gradientComparisonJson(const DumpComparison& comparison)
{
    if (!isGradientComparison(comparison)) {
        return nullptr;
    }
    const auto num = [](const std::optional<double>& v) {
        return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& e : layerBackwardErrors(comparison)) {
        layers.push_back(
            { { "layer", e.layer }, { "capture", e.capture }, { "accumulated", num(e.accumulated) },
                { "own", num(e.own) }, { "inherited", num(e.inherited) } });
    }
    return { { "order", "backward" }, { "note", gradientDirectionNote(comparison) },
        { "layer_backward", std::move(layers) } };
}

} // namespace day0::numerics
