#pragma once
// What one pipeline stage hands the next: the hidden rows, Gemma-4's per-layer inputs when the
// model has them and, for layers that read the step's tokens (hash routing), those tokens. One
// pair of functions serves a sharded run (parallel/run.cpp) and served ranks
// (parallel/served_ranks.cpp), so both send and receive the same messages in the same order.

#include "base/result.h"
#include "comm/communicator.h"

#include <cstdint>
#include <vector>

namespace day0::parallel::detail {

class ParallelForward;

/// Message tags of the stage link; a communicator's other traffic uses tags above these.
inline constexpr int kTagStageHidden = 1;
inline constexpr int kTagStagePerLayer = 4;
inline constexpr int kTagStageIds = 5;

/// Whether the step's tokens travel with the hidden rows (no: every rank already has them).
enum class StepIds { Send, Local };

/// Receives `n` tokens' hidden rows (and what goes with them) from rank `from` into `hidden`.
Result<void> receiveStageInput(ParallelForward& forward, comm::Communicator& world, std::int64_t n,
    int from, std::vector<float>& hidden, StepIds ids);

/// Sends `n` tokens' hidden rows (and what goes with them) to rank `to`.
Result<void> sendStageOutput(ParallelForward& forward, comm::Communicator& world, std::int64_t n,
    int to, const std::vector<float>& hidden, StepIds ids);

} // namespace day0::parallel::detail
