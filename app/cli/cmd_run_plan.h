#pragma once

// `day0 run <checkpoint> --plan …`: the sharded run (in-process ranks or MPI processes) with
// its communication table. cmd_run.cpp forwards here when --plan is given.

#include "command.h"

#include <cstdint>
#include <string>
#include <vector>

namespace day0::cli {

/// What `day0 run --plan` needs from the run verb's arguments.
struct PlanRunArgs {
    std::string checkpoint;
    std::string plan; ///< "tp=2,pp=2,ep=2"
    std::string ranks = "in-process"; ///< or "mpi"
    /// With ranks "mpi": the world communicator, "mpi" or "nccl" (host buffers staged through the
    /// GPU; MPI only bootstraps it).
    std::string comm = "mpi";
    std::string ncclIdDir; ///< folder of NCCL's id file (shared by all nodes); empty: temp folder
    int microBatches = 1;
    std::vector<std::vector<std::int64_t>> prompts; ///< one or more; sequences cycle through them
    std::int64_t tokens = 8;
    double timeoutSeconds = 60.0;
    std::string commTrace; ///< Chrome JSON of every rank's collectives, or empty
    /// Where every rank computes: "cpu", or a backend plugin ("cuda") with one backend object
    /// per rank; operators it lacks fall back to the CPU.
    std::string backend = "cpu";
    /// The backend's device: in-process ranks all use it (default 0); MPI ranks use their local
    /// rank (OMPI_COMM_WORLD_LOCAL_RANK / LOCAL_RANK) unless it is given.
    int device = -1;
    /// Every rank streams its weights a layer at a time (the CPU reference only).
    bool stream = false;
    /// With `stream`: the resident weights of all the ranks on a node together ("512M"); under
    /// MPI each process takes its node's budget / the processes on the node.
    std::string memoryBudget;
    std::string memoryBudgetPerRank; ///< with `stream`: each rank's own budget instead
};

/// Runs the plan; prints generated tokens, the ranks and the measured-vs-model communication
/// table (or JSON). Returns the exit code.
int runPlanned(const PlanRunArgs& args, const GlobalOptions& global);

} // namespace day0::cli
