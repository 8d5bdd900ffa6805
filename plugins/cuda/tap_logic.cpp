#include "tap_logic.h"

#include <algorithm>
#include <cmath>

namespace day0::cuda {

numerics::TensorStats combineTapBlocks(std::span<const TapBlock> blocks, std::int64_t count)
{
    numerics::TensorStats s;
    s.count = count;
    double sum = 0.0;
    double squares = 0.0;
    std::uint64_t finite = 0;
    double lo = INFINITY;
    double hi = -INFINITY;
    for (const auto& b : blocks) {
        s.nanCount += std::int64_t(b.nan);
        s.infCount += std::int64_t(b.inf);
        if (b.finite == 0) {
            continue; // its min/max are the kernel's sentinels
        }
        finite += b.finite;
        sum += b.sum;
        squares += b.sumSquares;
        lo = std::min(lo, double(b.min));
        hi = std::max(hi, double(b.max));
    }
    if (finite == 0) {
        return s;
    }
    s.min = lo;
    s.max = hi;
    s.absMax = std::max(std::fabs(lo), std::fabs(hi));
    s.mean = sum / double(finite);
    s.rms = std::sqrt(squares / double(finite));
    return s;
}

TapSelection::TapSelection(std::vector<std::string> anchors, bool all)
    : m_anchors(std::move(anchors))
    , m_all(all)
{
}

bool TapSelection::copiesFull(const std::string& capture) const
{
    if (m_all || capture == "lm_head") {
        return true;
    }
    return std::any_of(m_anchors.begin(), m_anchors.end(), [&](const std::string& a) {
        if (!capture.starts_with(a)) {
            return false;
        }
        return capture.size() == a.size() || capture[a.size()] == '.' || capture[a.size()] == '#';
    });
}

} // namespace day0::cuda
