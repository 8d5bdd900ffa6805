#pragma once

// JSON as Python's json module writes and reads it: standard JSON plus the bare tokens NaN,
// Infinity and -Infinity, which json.dumps emits for non-finite floats (allow_nan=True is its
// default) and which therefore appear in real Hugging Face config.json files (Nemotron-H's
// time_step_limit [0.0, Infinity]). Everything else is as strict as nlohmann's parser.

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace day0 {

/// A parsed document and where it held non-finite numbers.
template <typename Json> struct PythonJson {
    Json value;
    /// JSON paths of the non-finite numbers, with their token ("time_step_limit[1] = Infinity").
    std::vector<std::string> nonFinite;
};

/// Parses `text` accepting NaN, Infinity and -Infinity outside strings (read as IEEE values);
/// `origin` names the source in error messages. Thread-safe.
Result<PythonJson<nlohmann::json>> parsePythonJson(
    const std::string& text, const std::string& origin);
/// The same, keeping the keys' order (for rewriting a config).
Result<PythonJson<nlohmann::ordered_json>> parsePythonJsonOrdered(
    const std::string& text, const std::string& origin);

/// Reads and parses a file as parsePythonJson does; errors name the file.
Result<PythonJson<nlohmann::json>> readPythonJsonFile(const std::filesystem::path& path);

/// Writes `value` as json.dumps(value, indent=indent) would: non-finite numbers as NaN,
/// Infinity and -Infinity instead of nlohmann's null.
std::string dumpPythonJson(const nlohmann::ordered_json& value, int indent);

} // namespace day0
