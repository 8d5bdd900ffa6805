#pragma once

#include "history/run_record.h"
#include "serve/bench_check.h"
#include "serve/bench_plan.h"
#include "serve/serve_bench.h"

#include <optional>
#include <string>
#include <vector>

namespace day0::actions {

/// One load level of `day0 bench serve` as recorded: its label ("concurrency=4"; empty for a
/// single level), what it measured, and its --check and --plan outcomes where asked.
struct BenchLevelOutcome {
    std::string label;
    serve::BenchResult result;
    std::optional<serve::LevelCheck> check;
    std::optional<serve::PlanPrediction> plan;
};

/// The run of `day0 bench serve` (kind run, property tool=bench; a kind of its own would need a
/// store migration): the endpoint, model, workload and arrivals as properties; per level N
/// (from 1) the property bench_lN (its label) and the metrics bench_lN_<name> with vLLM's JSON
/// names (request_throughput, output_throughput, total_token_throughput, request_goodput,
/// mean/median/pXX of ttft/tpot/itl/e2el in ms, completed, failed, tokens/s/user), with --check
/// check_diverged and max_logprob_delta, with --plan the predicted TTFT/TPOT. `runs compare`
/// of two benches matches them by name. Status Failed when a request failed or diverged.
history::RunRecord benchRunRecord(const std::vector<BenchLevelOutcome>& levels,
    const std::string& checkpoint, const std::string& plan);

} // namespace day0::actions
