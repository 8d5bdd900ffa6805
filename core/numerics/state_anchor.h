#pragma once

// The capture names of a recurrent layer's state (DESIGN.md §3): "<mixer>#state" for the
// recurrent state (Gated DeltaNet's [value heads, key dim, value dim], Mamba-2's SSM state
// [heads, head dim, state size]) and "<mixer>#conv_state" for its short convolution's window
// [kernel − 1, conv channels], one row per forward step (the prefill, then each decode step).

#include <string_view>

namespace day0::numerics {

/// Suffix of a recurrent layer's state capture.
inline constexpr std::string_view kStateSuffix = "#state";
/// Suffix of a recurrent layer's conv-window capture.
inline constexpr std::string_view kConvStateSuffix = "#conv_state";

/// Whether `capture` is a recurrent state or conv-window capture.
inline bool isStateCapture(std::string_view capture)
{
    return capture.ends_with(kStateSuffix) || capture.ends_with(kConvStateSuffix);
}

} // namespace day0::numerics
