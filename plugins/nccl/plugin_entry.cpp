// The thin shell of the NCCL plugin: options from JSON (or the launcher's environment), a file
// bootstrap for the unique id, and the exported descriptor.
//
// Options (JSON object, all optional except id_file):
//   rank, size       this process's rank and the world size (default: OMPI_COMM_WORLD_RANK/SIZE,
//                    then RANK/WORLD_SIZE, then 0 and 1)
//   device           CUDA device (default: OMPI_COMM_WORLD_LOCAL_RANK, then LOCAL_RANK, then
//                    rank % the number of devices)
//   timeout_s        a call that does not finish in time aborts the communicator (default 120)
//   launch_skew_s    id files older than this process minus the skew are stale (default 600)
//   id_file          the unique-id rendezvous file, on a filesystem every rank reads
//   host_buffers     false (default): buffers are device pointers on `device`; true: buffers are
//                    host pointers, staged through device scratch on the communicator's stream
//                    (comm::StagedCommunicator), for host engines such as the sharded executor
#include "cuda_staging.h"
#include "extend/plugin_api.h"
#include "nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace {

int envInt(const char* a, const char* b, int fallback)
{
    for (const char* name : { a, b }) {
        if (const char* v = std::getenv(name); v && *v) {
            return std::atoi(v);
        }
    }
    return fallback;
}

/// The launcher's local rank, or else the rank modulo the devices present. NCCL needs a device of
/// its own per rank: a local rank beyond the devices fails with "cannot use CUDA device N".
int defaultDevice(int rank)
{
    const int local = envInt("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", -1);
    if (local >= 0) {
        return local;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        return 0; // creating the communicator reports why there is no device
    }
    return rank % count;
}

void* createCommunicator(const char* optionsJson, char* error, std::size_t errorSize)
{
    day0::nccl::NcclOptions options;
    std::string idFile;
    bool hostBuffers = false;
    int rank = 0;
    int size = 1;
    try {
        const auto json = nlohmann::json::parse(optionsJson ? optionsJson : "{}");
        rank = json.value("rank", envInt("OMPI_COMM_WORLD_RANK", "RANK", 0));
        size = json.value("size", envInt("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", 1));
        options.device = json.value("device", defaultDevice(rank));
        options.timeout = day0::Seconds(json.value("timeout_s", options.timeout.value));
        options.launchSkew = day0::Seconds(json.value("launch_skew_s", options.launchSkew.value));
        idFile = json.value("id_file", std::string());
        hostBuffers = json.value("host_buffers", false);
    } catch (const std::exception& e) {
        std::snprintf(error, errorSize, "bad options: %s", e.what());
        return nullptr;
    }
    if (idFile.empty()) {
        std::snprintf(error, errorSize,
            "option 'id_file' (a path all ranks can read) is required to bootstrap NCCL");
        return nullptr;
    }
    auto comm = day0::nccl::createNcclCommunicatorFromFile(idFile, rank, size, options);
    if (comm && hostBuffers) {
        comm = day0::nccl::stageOnHost(*comm, options.timeout);
    }
    if (!comm) {
        std::snprintf(error, errorSize, "%s", comm.error().message.c_str());
        return nullptr;
    }
    return new std::shared_ptr<day0::comm::Communicator>(*comm);
}

void destroyCommunicator(void* object)
{
    delete static_cast<std::shared_ptr<day0::comm::Communicator>*>(object);
}

} // namespace

DAY0_DECLARE_PLUGIN("nccl", "communicator", "1.0", &createCommunicator, &destroyCommunicator)
