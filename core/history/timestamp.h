#pragma once

#include "base/result.h"

#include <chrono>
#include <string>
#include <string_view>

namespace day0::history {

/// Microseconds since the Unix epoch (UTC); the store's clock.
using Timestamp = std::chrono::sys_time<std::chrono::microseconds>;

/// The current time.
Timestamp now();

/// "2025-07-11T09:30:05.123456Z": UTC, microseconds, for JSON.
std::string formatIso(Timestamp time);
/// "2025-07-11 11:30:05": local time, for tables.
std::string formatLocal(Timestamp time);

/// Parses a time for filters: "2025-07-11", "2025-07-11 09:30", "2025-07-11T09:30:05" (local
/// time, or UTC with a trailing "Z"), or an age before `reference`: "90m", "12h", "7d", "2w".
/// The error names the text and the accepted forms.
Result<Timestamp> parseTime(std::string_view text, Timestamp reference);

} // namespace day0::history
