// The communicator conformance suite over NCCL on CUDA devices, two MPI ranks.
// Run directly: without a CUDA device it exits 77 (CTest: skipped) saying why; with one it
// re-launches itself under mpirun with two ranks, which share the devices round-robin.
#include "comm/communicator.h"
#include "conformance.h"
#include "cuda_staging.h"
#include "mpi_communicator.h"
#include "nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

using namespace day0;

int main(int argc, char** argv)
{
    if (!std::getenv("OMPI_COMM_WORLD_SIZE")) {
        if (auto reason = nccl::cudaUnavailableReason()) {
            fmt::print("SKIPPED: {}\n", *reason);
            return 77;
        }
        std::vector<char*> args { const_cast<char*>(DAY0_MPIEXEC),
            const_cast<char*>("--oversubscribe"), const_cast<char*>("--allow-run-as-root"),
            const_cast<char*>("-np"), const_cast<char*>("2"), argv[0], nullptr };
        ::execv(DAY0_MPIEXEC, args.data());
        fmt::print(stderr, "cannot start {}\n", DAY0_MPIEXEC);
        return 2;
    }
    (void)argc;
    auto world = mpi::createMpiWorld();
    if (!world) {
        fmt::print(stderr, "day0: error: {}\n", world.error().message);
        return 2;
    }
    int devices = 1;
    cudaGetDeviceCount(&devices);
    nccl::NcclOptions options;
    options.device = (*world)->rank() % std::max(devices, 1);
    auto device = nccl::createNcclCommunicator(**world, options);
    if (!device) {
        fmt::print(stderr, "day0: error: {}\n", device.error().message);
        return 2;
    }
    // The suite passes host buffers: the plugin's own staging moves them to the devices.
    auto staged = nccl::stageOnHost(*device, options.timeout);
    if (!staged) {
        fmt::print(stderr, "day0: error: {}\n", staged.error().message);
        return 2;
    }
    auto outcome = comm::test::runConformance(**staged);
    if (!outcome) {
        fmt::print(stderr, "FAILED: {}\n", outcome.error().message);
        return 1;
    }
    if ((*staged)->rank() == 0) {
        fmt::print("NCCL conformance passed on {} ranks\n", (*staged)->size());
    }
    return 0;
}
