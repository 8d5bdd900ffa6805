// The thin shell of the MPI plugin: the exported descriptor around createMpiWorld().
#include "extend/plugin_api.h"
#include "mpi_communicator.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>

namespace {

void* createCommunicator(const char* optionsJson, char* error, std::size_t errorSize)
{
    day0::mpi::MpiOptions options;
    try {
        const auto json = nlohmann::json::parse(optionsJson ? optionsJson : "{}");
        options.timeout = day0::Seconds(json.value("timeout_s", options.timeout.value));
        options.checkCalls = json.value("check_calls", options.checkCalls);
    } catch (const std::exception& e) {
        std::snprintf(error, errorSize, "bad options: %s", e.what());
        return nullptr;
    }
    auto world = day0::mpi::createMpiWorld(options);
    if (!world) {
        std::snprintf(error, errorSize, "%s", world.error().message.c_str());
        return nullptr;
    }
    // Hand out a heap-held shared_ptr copy's target: the caller owns it through destroy().
    return new std::shared_ptr<day0::comm::Communicator>(*world);
}

void destroyCommunicator(void* object)
{
    delete static_cast<std::shared_ptr<day0::comm::Communicator>*>(object);
}

} // namespace

DAY0_DECLARE_PLUGIN("mpi", "communicator", "1.0", &createCommunicator, &destroyCommunicator)
