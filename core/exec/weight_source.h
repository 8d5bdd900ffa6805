#pragma once

#include "base/result.h"
#include "numerics/tensor.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace day0::exec {

/// Where the engine reads weights from: a checkpoint on disk or tensors in memory.
/// Implementations are thread-safe for reading.
class WeightSource {
public:
    virtual ~WeightSource() = default;
    /// True if a tensor of this name exists.
    [[nodiscard]] virtual bool has(const std::string& name) const = 0;
    /// The tensor as stored (any dtype); the error names the source and the tensor.
    [[nodiscard]] virtual Result<numerics::Tensor> read(const std::string& name) const = 0;
    /// Every tensor name, sorted.
    [[nodiscard]] virtual std::vector<std::string> names() const = 0;
    /// The file or folder, for messages.
    [[nodiscard]] virtual std::string describe() const = 0;
};

/// Weights held in memory (tests, generated models).
class MemoryWeights : public WeightSource {
public:
    explicit MemoryWeights(
        std::map<std::string, numerics::Tensor> tensors, std::string label = "memory");
    [[nodiscard]] bool has(const std::string& name) const override;
    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override;
    [[nodiscard]] std::vector<std::string> names() const override;
    [[nodiscard]] std::string describe() const override { return m_label; }

private:
    std::map<std::string, numerics::Tensor> m_tensors;
    std::string m_label;
};

/// Opens the safetensors weights of a checkpoint: a .safetensors file, or a folder holding one
/// or more (sharded, with or without model.safetensors.index.json). A tensor present in two
/// files is an error naming both.
Result<std::unique_ptr<WeightSource>> openSafetensorsWeights(const std::filesystem::path& path);

} // namespace day0::exec
