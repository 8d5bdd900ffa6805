// A backend plugin whose device is never present, to test selection and declared coverage.
#include "extend/plugin_api.h"

#include <cstdio>

namespace {

void* create(const char*, char* error, std::size_t errorSize)
{
    std::snprintf(error, errorSize, "no FAKE device: this test plugin never has one");
    return nullptr;
}

void destroy(void*) { }

} // namespace

DAY0_DECLARE_PLUGIN("fakegpu", "backend", "0.1", &create, &destroy)
