#pragma once

#include "base/result.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace day0::model {

/// How a config is read.
struct ReadOptions {
    /// Read a config with structure Day0 does not model: the figures then leave the unknown
    /// keys out, and spec.partial / spec.ignored say so (every output must show them). Off: such
    /// a config is an error naming every such key.
    bool partial = false;
    /// A ModelOpt hf_quant_config.json of the same checkpoint; readConfigFile finds it beside
    /// the config itself. Not owned.
    const nlohmann::json* hfQuantConfig = nullptr;
    std::string hfQuantOrigin; ///< its name in messages
};

/// Reads a parsed HF config.json into a ModelSpec; `origin` names the file in error messages.
/// Every key is accounted for (spec.keys): read, inert, or unknown. Unknown keys, unknown
/// values of modelled keys (a quantisation method, a layer type) and per-layer lists of the
/// wrong length are errors naming the file, key and value, unless options.partial. An unknown
/// model_type is read as a generic Llama-style decoder only when every key is one it models.
Result<ModelSpec> readConfig(const nlohmann::json& config, const std::string& origin,
    const ReadOptions& options = {});

/// Reads a config.json file (as Python's json writes it: NaN and ±Infinity accepted and noted),
/// with the ModelOpt hf_quant_config.json beside it when there is one.
Result<ModelSpec> readConfigFile(
    const std::filesystem::path& path, const ReadOptions& options = {});

/// A model bundled in resources/configs/ and addressable by a short name.
struct BundledModel {
    std::string name; ///< "kimi-k2", "deepseek-v3", ...
    std::filesystem::path configPath;
    std::string description;
};

/// Every bundled model, in a stable order.
std::vector<BundledModel> bundledModels();

/// Resolves `<model>` as the CLI and GUI accept it: a folder holding config.json, a config.json
/// path, or a bundled short name. The spec's name is the short name or the folder name.
Result<ModelSpec> loadModel(const std::string& modelArg, const ReadOptions& options = {});

/// Supported model_type values, for messages and help.
std::vector<std::string> supportedModelTypes();

} // namespace day0::model
