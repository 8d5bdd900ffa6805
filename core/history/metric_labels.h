#pragma once

#include <string>
#include <string_view>

namespace day0::history {

/// A quantity's name as a reader sees it, from the key a run record stores it under:
/// "step_time_s" → "Step time", "max_rel_l2" → "Max relative L2 error", "bench_l2_p99_ttft_ms"
/// → "Level 2: p99 TTFT", "rank3.weight_bytes" → "Rank 3: weight memory". Known keys have their
/// own label; others are spelled out word by word (abbreviations upper-cased, a unit suffix
/// dropped: the value's unit says it). Never empty for a non-empty key. Thread-safe.
std::string metricLabel(std::string_view key);

} // namespace day0::history
