#pragma once

// Comparisons of gradient dumps (exec/backward.h): the direction of the flow and each decoder
// layer's backward with its own and inherited error. The forward's layer L inherits from layer
// L-1; the backward's from layer L+1: the gradient of the loss flows from the head down, so the
// gradient layer L's backward passes on (its input's, "model.layers.{L-1}#grad", or
// "model.embed_tokens#grad" for layer 0) carries what the layers after it got wrong plus its
// own error, which an inject-mode gradient dump (exec::GradientOptions::inject) separates.

#include "numerics/dump_compare.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace day0::numerics {

/// Whether a comparison is of gradient dumps (the reference's dump.json says "gradients": true):
/// its rows are in backward order, from the loss down.
bool isGradientComparison(const DumpComparison& comparison);

/// The sentence that states a gradient comparison's direction (empty for a forward one).
std::string gradientDirectionNote(const DumpComparison& comparison);

/// One decoder layer's backward in a gradient comparison.
struct LayerBackwardError {
    int layer = -1; ///< the decoder layer whose backward this is
    std::string
        capture; ///< the gradient it passes on: "model.layers.{L-1}#grad" or the embedding's
    std::size_t row = 0; ///< index of that capture in the comparison's rows
    double accumulated
        = 0.0; ///< rel L2: its own error plus what it inherited from the layers after
    std::optional<double> own; ///< rel L2 of the inject-mode dump: its own error; none without one
    std::optional<double> inherited; ///< rel L2 of the gradient it received (layer L+1's output)
};

/// Every decoder layer's backward, from the last layer down (backward order), for the layers
/// whose input gradient is in both dumps with full tensors. Empty for a forward comparison.
std::vector<LayerBackwardError> layerBackwardErrors(const DumpComparison& comparison);

/// The layer whose own (inject-mode) error is largest, when the comparison has own errors.
std::optional<LayerBackwardError> largestOwnBackwardError(const DumpComparison& comparison);

/// The gradient part of `day0 compare --json`: {"order": "backward", "note": …,
/// "layer_backward": [{layer, capture, accumulated, own, inherited}, …]}; null for a forward one.
nlohmann::json gradientComparisonJson(const DumpComparison& comparison);

} // namespace day0::numerics
