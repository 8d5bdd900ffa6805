#pragma once

#include "comm/communicator.h"

namespace day0::comm::test {

/// Exercises every operation of a Communicator with known data and checks the results: the
/// same contract for the in-process, MPI and (later) NCCL implementations. Needs size() ≥ 2.
/// Returns the first discrepancy as an error naming the operation and rank.
Result<void> runConformance(Communicator& c);

} // namespace day0::comm::test
