#pragma once

// Helpers shared by the model tests: bundled configs and the real checkpoint indexes copied
// into tests/data/model (see SOURCES.md there).

#include "base/json_util.h"
#include "base/resources.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

/// True if `part` occurs in `text` (error messages).
inline bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

/// Expects `actual` within `tolerance` (relative) of a publisher's figure.
inline void expectNear(std::int64_t actual, double published, double tolerance, const char* what)
{
    const double relative = std::fabs(double(actual) - published) / published;
    EXPECT_LE(relative, tolerance) << what << ": " << actual << " vs published " << published
                                   << " (" << relative * 100.0 << "% off)";
}

/// Expects the graph to hold tensor `name` with this shape and dtype (and kind when given).
inline void expectTensor(const LayerGraph& graph, const std::string& name,
    const std::vector<std::int64_t>& shape, DType dtype = DType::BF16,
    std::optional<TensorKind> kind = std::nullopt)
{
    const TensorSpec* t = graph.findTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->dtype, dtype) << name << " is " << dtypeName(t->dtype);
    if (kind) {
        EXPECT_EQ(t->kind, *kind) << name;
    }
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
