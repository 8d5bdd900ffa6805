#pragma once

#include "base/result.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace day0::model {

/// Reads a parsed HF config.json into a ModelSpec; `origin` names the file in error messages.
/// Unknown model_type: an error listing the supported families, or a generic-decoder reading with
/// a warning in spec.warnings when the standard decoder keys are present.
Result<ModelSpec> readConfig(const nlohmann::json& config, const std::string& origin);

/// Reads a config.json file.
Result<ModelSpec> readConfigFile(const std::filesystem::path& path);

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
Result<ModelSpec> loadModel(const std::string& modelArg);

/// Supported model_type values, for messages and help.
std::vector<std::string> supportedModelTypes();

} // namespace day0::model
