#pragma once

#include "base/result.h"

#include <climits>
#include <cstdint>
#include <string_view>

namespace day0::profile {

/// A time range [start, end) in ns. Open ends are INT64_MIN / INT64_MAX.
struct TimeRange {
    std::int64_t start = INT64_MIN;
    std::int64_t end = INT64_MAX;

    [[nodiscard]] bool bounded() const { return start != INT64_MIN || end != INT64_MAX; }
    /// The range shifted by `origin` ns (open ends stay open; saturating).
    [[nodiscard]] TimeRange shifted(std::int64_t origin) const;
};

/// Parses a duration: a number with an optional unit ns, us (or µs), ms or s ("1500",
/// "1.5ms", "20 us"); no unit means ns. Rounded to the nearest ns. Fails naming the text on
/// anything else, on negative values and beyond ±2^62 ns.
Result<std::int64_t> parseDurationNs(std::string_view text);

/// Parses "START:END" (each a duration as above; either may be empty for an open end). Fails
/// when END is not after START.
Result<TimeRange> parseTimeRange(std::string_view text);

} // namespace day0::profile
