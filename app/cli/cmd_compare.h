#pragma once

#include "numerics/dump_compare.h"

#include <string>

namespace day0::cli {

/// The text report of a dump comparison: one table row per capture, then the logits and expert
/// summaries, captures found on one side only, the first divergence and the verdict counts.
std::string renderComparison(const numerics::DumpComparison& comparison, bool allRows);

} // namespace day0::cli
