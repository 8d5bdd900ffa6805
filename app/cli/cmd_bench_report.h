// Text output of `day0 bench serve` (cmd_bench.cpp): one level's report in vLLM's layout, the
// per-level summary of a staged run or sweep, and the metric definitions of --help.
#pragma once

#include "serve/serve_bench.h"

#include <string>
#include <vector>

namespace day0::cli {

/// One load level: its label ("concurrency=4", "rate=20") and what it measured.
struct BenchLevel {
    std::string label;
    serve::BenchResult result;
};

/// One level's report: counts, throughputs, goodput, each metric's mean, median and percentiles,
/// errors by kind.
void printBenchLevel(const serve::BenchResult& result);

/// One row per level (requests, throughput, goodput, TTFT/TPOT percentiles, errors) and the
/// throughput-versus-latency table (output tokens/s against tokens/s/user).
void printBenchLevels(const std::vector<BenchLevel>& levels);

/// The metric definitions, with the tool whose convention each follows (the --help footer).
std::string benchMetricDefinitions();

} // namespace day0::cli
