#pragma once

#include "comm/communicator.h"

#include <functional>
#include <memory>
#include <vector>

namespace day0::comm {

/// Options of an in-process world.
struct InProcessOptions {
    /// A rank that waits longer than this for the others fails the call on every rank.
    Seconds timeout { 60.0 };
};

/// Creates `size` communicators that talk through shared memory, one per rank, for single-process
/// parallel runs (one thread per rank). Thread-safe across ranks.
std::vector<std::shared_ptr<Communicator>> createInProcessWorld(
    int size, InProcessOptions options = {});

/// Runs fn(comm) for every rank of a new in-process world on its own thread and waits for all.
/// The first rank to fail aborts the world so the others stop; the returned error names it.
Result<void> runInProcess(int size, const std::function<Result<void>(Communicator&)>& fn,
    InProcessOptions options = {}, CollectiveObserver observer = {});

} // namespace day0::comm
