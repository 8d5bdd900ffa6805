#pragma once

#include "base/result.h"
#include "numerics/metrics.h"
#include "numerics/tensor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace day0::numerics {

/// The format version written to dump.json.
inline constexpr int kDumpFormatVersion = 1;

/// One captured tensor of a dump: its name (DESIGN.md §3: `<anchor>` for a module output,
/// `<anchor>#in0` for an input, `<anchor>#topk` for a router's chosen experts), shape, dtype
/// and statistics; the full tensor is present only when `stored`.
struct CaptureInfo {
    std::string name;
    Shape shape;
    DType dtype = DType::F32;
    bool stored = false;
    TensorStats stats;
    std::string op; ///< op kind override ("moe" for a MoE block's "mlp"); empty: from the name
    /// The precision this op itself ran in when it differs per op ("bf16" for the norms of an
    /// fp8 run); empty: the run's precision.
    std::string precision;
};

/// What a dump records about the run that produced it (dump.json).
struct DumpInfo {
    int formatVersion = kDumpFormatVersion;
    std::string model; ///< readable model name
    std::string fingerprint; ///< canonical architecture string; dumps of one model share it
    std::string precision = "fp32"; ///< "fp64", "fp32", "bf16", "fp16", "fp8", "int8", ...
    std::string backend = "day0-cpu"; ///< "day0-cpu", "pytorch", a plugin's name
    std::string mode = "propagate"; ///< "propagate" or "inject" (layers fed reference inputs)
    std::vector<std::int64_t> inputIds; ///< every token fed to the model, prompt first
    std::int64_t promptLength = 0;
    std::vector<std::int64_t> generatedIds; ///< greedy tokens the run produced itself
    std::int64_t numLayers = 0;
    nlohmann::json extra = nlohmann::json::object(); ///< anything else (timings, options)
};

/// A dump in memory: run description, captures in execution order, and the stored tensors.
class Dump {
public:
    DumpInfo info;

    /// Adds a capture (replacing one of the same name); statistics are computed here and the
    /// tensor is kept only if `store`.
    void add(const std::string& name, const Tensor& tensor, bool store, std::string op = {},
        std::string precision = {});
    /// Adds a capture that has statistics only (e.g. read from a dump.json).
    void addInfo(CaptureInfo info);
    /// Attaches the full tensor of an existing capture.
    Result<void> attach(const std::string& name, Tensor tensor);

    [[nodiscard]] const std::vector<CaptureInfo>& captures() const { return m_captures; }
    [[nodiscard]] const CaptureInfo* find(const std::string& name) const;
    /// The stored tensor of a capture, nullptr if absent or statistics-only.
    [[nodiscard]] const Tensor* tensor(const std::string& name) const;
    [[nodiscard]] const std::map<std::string, Tensor>& tensors() const { return m_tensors; }

private:
    std::vector<CaptureInfo> m_captures;
    std::map<std::string, std::size_t> m_index;
    std::map<std::string, Tensor> m_tensors;
};

/// dump.json for a dump (the tensors themselves go to tensors.safetensors).
nlohmann::json dumpToJson(const Dump& dump);
/// Reads dump.json into a Dump without tensors; `origin` names the file in errors.
Result<Dump> dumpFromJson(const nlohmann::json& json, const std::string& origin);

} // namespace day0::numerics
