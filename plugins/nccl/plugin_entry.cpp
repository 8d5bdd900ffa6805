// The thin shell of the NCCL plugin: options from JSON (or the launcher's environment), a file
// bootstrap for the unique id, and the exported descriptor.
#include "extend/plugin_api.h"
#include "nccl_communicator.h"

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

void* createCommunicator(const char* optionsJson, char* error, std::size_t errorSize)
{
    day0::nccl::NcclOptions options;
    std::string idFile;
    int rank = 0;
    int size = 1;
    try {
        const auto json = nlohmann::json::parse(optionsJson ? optionsJson : "{}");
        rank = json.value("rank", envInt("OMPI_COMM_WORLD_RANK", "RANK", 0));
        size = json.value("size", envInt("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", 1));
        options.device
            = json.value("device", envInt("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", 0));
        options.timeout = day0::Seconds(json.value("timeout_s", options.timeout.value));
        options.launchSkew = day0::Seconds(json.value("launch_skew_s", options.launchSkew.value));
        idFile = json.value("id_file", std::string());
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

const Day0PluginDescriptor kDescriptor {
    DAY0_PLUGIN_API_VERSION,
    "nccl",
    "communicator",
    "1.0",
    &createCommunicator,
    &destroyCommunicator,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const Day0PluginDescriptor*
day0_plugin_descriptor()
{
    return &kDescriptor;
}
