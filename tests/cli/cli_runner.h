#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace day0::test {

/// What one run of the day0 binary produced.
struct CliResult {
    int exitCode = -1;
    std::string out; ///< stdout
    std::string err; ///< stderr
    /// stdout parsed as JSON (throws if it is not JSON, failing the test).
    [[nodiscard]] nlohmann::json json() const { return nlohmann::json::parse(out); }
};

/// Runs `day0 <args...>` with DAY0_STORE pointed at a scratch file and returns its output.
CliResult runDay0(const std::vector<std::string>& args);

/// A fresh scratch folder for one test (removed and recreated).
std::string scratchDir(const std::string& name);

/// The capture names of the dump in folder `dump` (its dump.json).
std::set<std::string> captureNames(const std::string& dump);

/// Of a gradient dump's captures, those of the forward's routing (a MoE layer's router logits,
/// choices and selection scores: "model.layers.…" names without "#grad").
std::size_t routingCaptures(const std::set<std::string>& names);

} // namespace day0::test
