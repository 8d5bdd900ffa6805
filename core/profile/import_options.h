#pragma once

#include <cstdint>
#include <optional>

namespace day0::profile {

/// How to import a trace file.
struct ImportOptions {
    /// The rank to file the events under; by default the trace's own (Kineto distributedInfo),
    /// else 0 (nsys exports and plain Chrome traces carry none).
    std::optional<std::int32_t> rank;
};

} // namespace day0::profile
