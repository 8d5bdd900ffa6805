#pragma once

// `day0 run`'s arguments and the modes that share them (cmd_run.cpp): what --layers, --stream and
// --grad cannot run with, and the --grad mode itself (cmd_run_modes.cpp).

#include "base/result.h"
#include "cmd_run_plan.h"
#include "command.h"
#include "exec/gated_delta_net.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace day0::cli::run_detail {

struct RunArgs {
    std::string checkpoint;
    std::string backend = "cpu";
    int device = -1; ///< -1: 0, or the local rank of an MPI plan run
    std::string precision = "fp32";
    std::string opPrecision;
    std::string layerPrecision;
    std::string fp8Scaling = "tensor";
    std::string reference;
    std::string prompt;
    std::string ids;
    std::string image;
    std::int64_t tokens = 8;
    std::int64_t deltaChunk = exec::kDeltaRuleChunk;
    std::string dump;
    bool inject = false;
    bool fp32Leg = false;
    bool inputs = false;
    bool projections = false;
    bool state = false; ///< --capture-state
    std::string stateDtype; ///< --state-dtype; empty: the state in the compute type
    bool statsOnly = false;
    std::vector<std::string> capture;
    std::string tolerances;
    bool all = false;
    PlanRunArgs planned; ///< --plan, --ranks, --micro-batches, --comm-trace, --comm-timeout
    std::string trace; ///< CPU trace output (default: trace.json in the dump folder)
    /// Device profiler plugin whose records join the trace: "auto" (cupti for the cuda backend),
    /// "none" or a profiler plugin's name.
    std::string profiler = "auto";
    bool stream = false; ///< --stream: weights streamed layer by layer
    std::string memoryBudget; ///< --memory-budget SIZE (with --stream)
    std::string memoryBudgetPerRank; ///< --memory-budget-per-rank SIZE (with --stream --plan)
    bool grad = false; ///< --grad: the loss's gradients instead of a generation
    std::string injectFrom; ///< --inject-from: with --grad, the inject-mode reference dump
    std::string targets; ///< --targets: one per id (-1: not counted); empty: the next token
    std::string layers; ///< --layers A-B: a slice of the decoder layers
    std::string sliceInput; ///< --slice-input DIR: the dump feeding the slice
    bool tokensGiven = false; ///< --tokens was on the command line
};

/// "1,2,3" as token ids; an empty item is skipped, anything else not an integer is refused.
Result<std::vector<std::int64_t>> parseIds(const std::string& text);

/// What --layers cannot run with, named; nullopt when the options go together.
std::optional<Error> refuseWithSlice(const RunArgs& a);

/// What --stream cannot run with, named; nullopt when the options go together.
std::optional<Error> refuseWithStream(const RunArgs& a);

/// `--grad`: the next-token loss of the ids and its gradients (exec/backward.h), as a dump.
/// Returns the exit code.
int runGradients(const RunArgs& a, const GlobalOptions& global);

} // namespace day0::cli::run_detail
