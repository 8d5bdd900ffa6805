#pragma once

#include "comm/communicator.h"

#include <memory>

namespace day0::mpi {

/// Options of the MPI communicator.
struct MpiOptions {
    /// A call that does not complete within this time fails (the job should then be aborted).
    Seconds timeout { 120.0 };
    /// Before each collective, check that every rank called the same one with the same sizes
    /// (one extra small all-reduce); off by default.
    bool checkCalls = false;
};

/// The world communicator of this MPI process (MPI_COMM_WORLD), initialising MPI on first use
/// (MPI_THREAD_SERIALIZED) and finalising it at exit. Errors name the MPI failure.
Result<std::shared_ptr<comm::Communicator>> createMpiWorld(const MpiOptions& options = {});

} // namespace day0::mpi
