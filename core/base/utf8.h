#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace day0 {

/// Length (1..4) of the well-formed UTF-8 sequence at the start of `text`, or 0 when it is not
/// one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
std::size_t utf8SequenceLength(std::string_view text);

/// `text` with every byte that does not start a well-formed UTF-8 sequence replaced by U+FFFD,
/// as a decoder replaces them; `replaced` (when given) is increased by the bytes replaced.
std::string replaceInvalidUtf8(std::string_view text, std::size_t* replaced = nullptr);

} // namespace day0
