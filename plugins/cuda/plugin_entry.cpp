// The thin shell of the CUDA backend plugin: options from JSON and the exported descriptor.
#include "cuda_backend.h"
#include "extend/plugin_api.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <optional>

namespace {

void* createBackend(const char* optionsJson, char* error, std::size_t errorSize)
{
    int device = 0;
    std::optional<std::size_t> weightCache;
    try {
        const auto json = nlohmann::json::parse(optionsJson ? optionsJson : "{}");
        device = json.value("device", 0);
        if (json.contains("weight_cache_mib")) {
            weightCache = json.at("weight_cache_mib").get<std::size_t>() << 20;
        }
    } catch (const std::exception& e) {
        std::snprintf(error, errorSize, "bad options: %s", e.what());
        return nullptr;
    }
    auto backend = day0::cuda::CudaBackend::create(device, weightCache);
    if (!backend) {
        std::snprintf(error, errorSize, "%s", backend.error().message.c_str());
        return nullptr;
    }
    return new std::shared_ptr<day0::exec::Backend>(std::move(*backend));
}

void destroyBackend(void* object)
{
    delete static_cast<std::shared_ptr<day0::exec::Backend>*>(object);
}

} // namespace

DAY0_DECLARE_PLUGIN("cuda", "backend", "1.0", &createBackend, &destroyBackend)
