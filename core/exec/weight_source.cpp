#include "exec/weight_source.h"

#include <fmt/format.h>

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

} // namespace day0::exec
