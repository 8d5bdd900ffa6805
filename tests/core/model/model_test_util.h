#pragma once

// Helpers shared by the model tests: bundled configs and the real checkpoint indexes copied
// into tests/data/model (see SOURCES.md there).

#include "base/json_util.h"
#include "base/resources.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

namespace day0::model::test {

inline std::filesystem::path dataDir()
{
    return std::filesystem::path(DAY0_TEST_DATA_DIR) / "model";
}

/// A bundled model's spec; fails the test (and returns an empty spec) when it does not load.
inline ModelSpec bundled(const std::string& name)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    auto spec = loadModel(name);
    if (!spec) {
        ADD_FAILURE() << name << ": " << spec.error().message;
        return {};
    }
    return *spec;
}

/// The spec of a config.json under tests/data/model.
inline ModelSpec fromData(const std::string& relative)
{
    auto spec = readConfigFile(dataDir() / relative);
    if (!spec) {
        ADD_FAILURE() << relative << ": " << spec.error().message;
        return {};
    }
    return *spec;
}

/// Reads a JSON text given inline (tests of malformed configs).
inline Result<ModelSpec> readText(const std::string& text)
{
    auto json = parseJson(text, "inline.json");
    if (!json) {
        return json.error();
    }
    return readConfig(*json, "inline.json");
}

/// Every tensor name of a graph.
inline std::set<std::string> tensorNames(const LayerGraph& graph)
{
    std::set<std::string> names;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            names.insert(t.name);
        }
    }
    return names;
}

/// Sum of stored bytes over all tensors.
inline std::int64_t totalBytes(const LayerGraph& graph)
{
    std::int64_t bytes = 0;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            bytes += t.bytes();
        }
    }
    return bytes;
}

} // namespace day0::model::test
