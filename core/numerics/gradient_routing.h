#pragma once

// Gradient comparisons across a routing flip. When a lower precision makes a MoE router choose
// other experts for a token (a near-tie of the reference's scores: routing_flips.h), that
// token's gradient takes another expert's path through the backward: the flipped experts'
// weight gradients gain or lose its contribution, and its gradient then flows to itself and,
// through causal attention, to every token before it, in every layer below. Those rows then
// differ by more than the precision explains while nothing is wrong. A forward comparison
// judges a flipped layer's output over its other tokens; a gradient comparison judges each
// activation gradient the flips reach over the tokens after the last flipped one, and says of a
// parameter gradient (a sum over every token) that it is not judged, rather than failing it.

#include "base/result.h"
#include "numerics/dump.h"
#include "numerics/dump_compare.h"

#include <cstdint>
#include <string>

namespace day0::numerics {

/// Where a gradient capture sits in the backward, as a decoder layer: its layer for a layer's
/// rows, -1 for the embedding's (the backward reaches it last), the number of layers for the
/// rows above every layer (the logits, the final norm and the head).
int gradientDepth(const std::string& capture, std::int64_t numLayers);

/// Rejudges the failing gradient rows of `cmp` that the backward of a flipped MoE layer reaches
/// (the flips of the target's, or for own-error rows the inject-mode dump's, router selections
/// against the reference's, which gradient dumps carry as a forward dump names them): with
/// every flip a near-tie, an activation gradient is judged over the tokens after the last
/// flipped one (and warns when they pass) and a parameter gradient warns, naming the flips; a
/// flip that is no near-tie leaves the failure, named in its reason. Rows upstream of the flip
/// (the layer's output and the MoE's, the shared experts') are judged as they were. Updates
/// the counts. Errors: malformed router selections.
Result<void> judgeGradientRoutingFlips(
    DumpComparison& cmp, const Dump& reference, const Dump& target, const CompareOptions& options);

} // namespace day0::numerics
