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

} // namespace

DAY0_DECLARE_PLUGIN("selftest", "communicator", "0.1", &create, &destroy)
