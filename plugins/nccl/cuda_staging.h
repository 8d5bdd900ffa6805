#pragma once

#include "comm/staged_communicator.h"

#include <memory>

namespace day0::nccl {

/// The staging of NCCL communicators from this plugin: device scratch from the stream-ordered
/// allocator and copies on the communicator's own stream, so they queue behind its earlier calls
/// (a send that has not been received yet) without synchronising the whole device. Each copy is
/// waited for, polling up to `timeout`; a copy stuck behind a call that never finishes fails
/// with an error naming the CUDA call, and the staged communicator then aborts NCCL.
/// The factory fails for a communicator that is not one of this plugin's.
comm::StagingFactory cudaStagingFactory(Seconds timeout);

/// An NCCL communicator of this plugin presented on host buffers (comm::StagedCommunicator with
/// cudaStagingFactory), for host-side engines such as the sharded CPU executor.
Result<std::shared_ptr<comm::Communicator>> stageOnHost(
    std::shared_ptr<comm::Communicator> nccl, Seconds timeout);

} // namespace day0::nccl
