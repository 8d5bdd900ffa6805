#pragma once

#include "parallel/served_ranks.h"
#include "serve/scheduler.h"

#include <memory>

namespace day0::actions {

/// The scheduler's sequences on a plan's served ranks (what `day0 serve --plan` runs on): each
/// sequence a cache on every rank, the steps of several sequences (decode steps, prompts
/// admitted together) one batched step over the ranks (ServedRanks::feedBatch) unless the model
/// is one the sharded batched step refuses (ServedRanks::batchRefusal).
/// Called from the scheduler's loop thread only.
std::shared_ptr<serve::SequenceSource> shardedSource(std::shared_ptr<parallel::ServedRanks> ranks);

} // namespace day0::actions
