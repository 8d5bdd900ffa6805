// A communicator plugin used only by the loader tests: a one-rank in-process world.
#include "comm/in_process_communicator.h"
#include "extend/plugin_api.h"

#include <cstdio>
#include <cstring>

namespace {

void* create(const char* optionsJson, char* error, std::size_t errorSize)
{
    if (optionsJson && std::strstr(optionsJson, "fail")) {
        std::snprintf(error, errorSize, "asked to fail");
        return nullptr;
    }
    return new std::shared_ptr<day0::comm::Communicator>(day0::comm::createInProcessWorld(1)[0]);
}

void destroy(void* object)
{
    delete static_cast<std::shared_ptr<day0::comm::Communicator>*>(object);
}

const Day0PluginDescriptor kDescriptor { DAY0_PLUGIN_API_VERSION, "selftest", "communicator", "0.1",
    &create, &destroy };

} // namespace

extern "C" __attribute__((visibility("default"))) const Day0PluginDescriptor*
day0_plugin_descriptor()
{
    return &kDescriptor;
}
