// The thin shell of the CUPTI profiler plugin: options from JSON and the exported descriptor.
#include "cupti_collector.h"
#include "extend/plugin_api.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>

namespace {

void* createProfiler(const char* optionsJson, char* error, std::size_t errorSize)
{
    day0::cupti::ConvertOptions options;
    try {
        const auto json = nlohmann::json::parse(optionsJson ? optionsJson : "{}");
        options.rank = json.value("rank", 0);
        options.sourceName = json.value("source", std::string("cupti"));
        if (json.contains("devices") && json["devices"].is_object()) {
            for (const auto& [index, name] : json["devices"].items()) {
                options.deviceNames[std::uint32_t(std::stoul(index))] = name.get<std::string>();
            }
        }
    } catch (const std::exception& e) {
        std::snprintf(error, errorSize, "bad options: %s", e.what());
        return nullptr;
    }
    return new std::shared_ptr<day0::extend::ProfilerCollector>(
        std::make_shared<day0::cupti::CuptiCollector>(std::move(options)));
}

void destroyProfiler(void* object)
{
    delete static_cast<std::shared_ptr<day0::extend::ProfilerCollector>*>(object);
}

} // namespace

DAY0_DECLARE_PLUGIN("cupti", "profiler", "1.0", &createProfiler, &destroyProfiler)
