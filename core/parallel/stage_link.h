#pragma once
// What one pipeline stage hands the next: the hidden rows, Gemma-4's per-layer inputs when the
// model has them and, for layers that read the step's tokens (hash routing), those tokens. One
// pair of functions serves a sharded run (parallel/run.cpp) and served ranks
// (parallel/served_ranks.cpp), so both send and receive the same messages in the same order;
// so do the groups a rank splits its world into.

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "comm/communicator.h"
#include "parallel/forward.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace day0::parallel::detail {

/// A rank's sub-communicators: its TP group (the ranks of its stage and replica) and its expert
/// group (every rank of its stage).
struct OwnedRankGroups {
    std::shared_ptr<comm::Communicator> tp;
    std::shared_ptr<comm::Communicator> expert;
    /// The groups as the forward pass takes them (parallel/forward.h), alive while this is.
    [[nodiscard]] RankGroups view() const { return { tp.get(), expert.get() }; }
};

/// Splits `world` into the rank's groups; every rank of `world` calls it, in the same order.
Result<OwnedRankGroups> splitRankGroups(
    comm::Communicator& world, const checkpoint::ShardLayout& l, const checkpoint::RankCoord& c);

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
