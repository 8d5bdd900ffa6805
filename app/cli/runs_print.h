// How `day0 runs show` and `day0 runs compare` print a run and a comparison on the terminal.
#pragma once

#include "history/bench_comparison.h"
#include "history/run_compare.h"
#include "history/run_record.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace day0::cli {

/// A metric's value with its unit ("1.25 GiB", "3.2 s", "0.000123").
std::string formatValue(double value, const std::string& unit);
/// A run's wall time ("12.5 s"), "-" when not recorded.
std::string durationText(const std::optional<Seconds>& duration);

/// The header table of `run`: kind (with its tool), status, model, plan, precision...
void printHeader(const history::RunRecord& run);
/// Bytes per rank and component.
void printMemory(const std::vector<history::MemoryEntry>& memory);
/// Per-layer metrics: a summary per metric, every row with `all`.
void printLayers(const history::LayerMetrics& layers, bool all);
/// Two runs side by side: fields, metrics, memory and the largest layer changes (`top` per
/// metric, every row with `all`).
void printComparison(const history::RunComparison& c, std::size_t top, bool all);
/// Two benches level by level, as JSON and as a table.
nlohmann::json benchLevelsJson(const history::BenchComparison& bench);
void printBenchLevels(const history::BenchComparison& bench);

} // namespace day0::cli
