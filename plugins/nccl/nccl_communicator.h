#pragma once

#include "comm/communicator.h"

#include <cuda_runtime_api.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace day0::nccl {

/// Options of the NCCL communicator.
struct NcclOptions {
    int device = 0; ///< CUDA device this rank uses
    Seconds timeout { 120.0 }; ///< a call that does not finish in time aborts the communicator
    /// File bootstrap: how much earlier than a rank rank 0 may have started (older id files are
    /// leftovers of an earlier run).
    Seconds launchSkew { 600.0 };
};

/// Creates the NCCL communicator of this rank. The NCCL unique id is made by rank 0 and sent to
/// the others over `bootstrap` (an MPI or in-process communicator of the same ranks).
/// Buffers passed to the returned communicator are device pointers on `options.device`; every
/// call is enqueued on the communicator's own stream and waited for (with the timeout).
Result<std::shared_ptr<comm::Communicator>> createNcclCommunicator(
    comm::Communicator& bootstrap, const NcclOptions& options = {});

/// The same, bootstrapped through a file that rank 0 writes (atomically, see file_store.h) and
/// the others poll, for processes without another communicator (e.g. a plugin loaded by a
/// launcher).
Result<std::shared_ptr<comm::Communicator>> createNcclCommunicatorFromFile(
    const std::filesystem::path& idFile, int rank, int size, const NcclOptions& options = {});

/// The CUDA stream and device an NCCL communicator of this plugin enqueues its calls on.
struct NcclStream {
    cudaStream_t stream = nullptr;
    int device = 0;
};

/// The stream of `comm` (for work that must be ordered with its calls, such as host staging), or
/// nullopt when `comm` is not an NCCL communicator of this plugin.
std::optional<NcclStream> ncclStreamOf(const comm::Communicator& comm);

/// Why CUDA cannot be used here (no driver, no device), or nullopt when a device is present.
std::optional<std::string> cudaUnavailableReason();

} // namespace day0::nccl
