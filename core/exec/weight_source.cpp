#include "exec/weight_source.h"

#include "numerics/tensor_file.h"

#include <fmt/format.h>

#include <algorithm>

namespace day0::exec {

MemoryWeights::MemoryWeights(std::map<std::string, numerics::Tensor> tensors, std::string label)
    : m_tensors(std::move(tensors))
    , m_label(std::move(label))
{
}

bool MemoryWeights::has(const std::string& name) const { return m_tensors.contains(name); }

Result<numerics::Tensor> MemoryWeights::read(const std::string& name) const
{
    const auto it = m_tensors.find(name);
    if (it == m_tensors.end()) {
        return Error::badInput(fmt::format("{}: no tensor '{}'", m_label, name));
    }
    return it->second;
}

std::vector<std::string> MemoryWeights::names() const
{
    std::vector<std::string> out;
    for (const auto& [name, t] : m_tensors) {
        out.push_back(name);
    }
    return out;
}

Result<std::unique_ptr<WeightSource>> openSafetensorsWeights(const std::filesystem::path& path)
{
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path, ec)) {
        for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
            if (entry.path().extension() == ".safetensors") {
                files.push_back(entry.path());
            }
        }
        std::sort(files.begin(), files.end());
        if (files.empty()) {
            return Error::badInput(
                fmt::format("{}: no .safetensors files in this folder", path.string()));
        }
    } else if (std::filesystem::is_regular_file(path, ec)) {
        files.push_back(path);
    } else {
        return Error::badInput(fmt::format("{}: no such file or folder", path.string()));
    }
    std::map<std::string, numerics::Tensor> tensors;
    std::map<std::string, std::string> origin;
    for (const auto& file : files) {
        auto read = numerics::readTensorFile(file);
        if (!read) {
            return read.error();
        }
        for (auto& t : *read) {
            if (origin.contains(t.name)) {
                return Error::badInput(fmt::format(
                    "{}: tensor '{}' is also in {}", file.string(), t.name, origin[t.name]));
            }
            origin[t.name] = file.filename().string();
            tensors[t.name] = std::move(t.tensor);
        }
    }
    return std::unique_ptr<WeightSource>(
        std::make_unique<MemoryWeights>(std::move(tensors), path.string()));
}

} // namespace day0::exec
