#pragma once

#include "numerics/metrics.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace day0::cuda {

/// What one block of the device statistics kernel found (kernels::TapPartial, restated here so
/// that the reduction is plain C++).
struct TapBlock {
    double sum = 0.0;
    double sumSquares = 0.0;
    float min = 0.0f;
    float max = 0.0f;
    std::uint64_t finite = 0;
    std::uint64_t nan = 0;
    std::uint64_t inf = 0;
};

/// Combines the per-block partials of a tap of `count` elements into the statistics a dump
/// stores (min, max, mean, rms over the finite values; NaN and Inf counts), as
/// numerics::computeStats defines them.
numerics::TensorStats combineTapBlocks(std::span<const TapBlock> blocks, std::int64_t count);

/// Which anchors a run copies in full (the others keep device-computed statistics only):
/// `anchors` are capture-name prefixes matched at a '.' or '#' boundary ("model.layers.3" takes
/// "model.layers.3.mlp" but not "model.layers.30"); `lm_head` is always copied.
class TapSelection {
public:
    explicit TapSelection(std::vector<std::string> anchors = {}, bool all = false);

    /// True when the tensor named `capture` is copied to the host in full.
    [[nodiscard]] bool copiesFull(const std::string& capture) const;

private:
    std::vector<std::string> m_anchors;
    bool m_all = false;
};

} // namespace day0::cuda
