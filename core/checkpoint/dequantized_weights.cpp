#include "checkpoint/dequantized_weights.h"

#include "base/file_util.h"
#include "base/python_json.h"
#include "checkpoint/convert.h"
#include "checkpoint/convert_quant.h"
#include "checkpoint/quant_groups.h"
#include "model/config_reader.h"

#include <fmt/format.h>

namespace day0::checkpoint {

bool readsDequantized(const model::QuantizationSpec& q)
{
    const auto other = [](const std::optional<model::QuantScheme>& s) {
        return s && *s != model::QuantScheme::BlockFp8;
    };
    return q.scheme != model::QuantScheme::BlockFp8 || other(q.expertScheme)
        || other(q.mixedScheme);
}

Result<DequantizedWeights> DequantizedWeights::open(
    const Checkpoint& checkpoint, const std::filesystem::path& configPath, ThreadPool* pool)
{
    auto text = readFile(configPath);
    if (!text) {
        return text.error();
    }
    auto config = parsePythonJsonOrdered(*text, displayPath(configPath));
    if (!config) {
        return config.error();
    }
    auto spec = model::readConfigFile(configPath);
    if (!spec) {
        return spec.error();
    }
    DequantizedWeights weights;
    weights.m_root = checkpoint.root();
    if (!spec->quantization) {
        return weights;
    }
    ConvertOptions options;
    options.dtype = DType::F32;
    auto layout = readDequantLayout(
        configPath, config->value, *spec, options, displayPath(configPath) + " (dequantised)");
    if (!layout) {
        return layout.error();
    }
    for (const QuantGroup& g : layout->quant.groups) {
        if (g.scheme == model::QuantScheme::BlockFp8) {
            continue;
        }
        auto found = matchGroup(checkpoint, g, layout->configName);
        if (!found) {
            return found.error();
        }
        if (!*found) {
            continue;
        }
        // The source copies what it needs of the group (shape, spans into the mapped files), so
        // the layout may go once every source is made.
        auto source = detail::dequantizedSource(checkpoint, g, **found, DType::F32, pool);
        if (!source) {
            return source.error();
        }
        std::string name = source->name;
        weights.m_sources.emplace(std::move(name), std::move(*source));
    }
    return weights;
}

bool DequantizedWeights::has(const std::string& convertedName) const
{
    return m_sources.contains(convertedName);
}

Result<DequantizedTensor> DequantizedWeights::read(const std::string& convertedName) const
{
    const auto it = m_sources.find(convertedName);
    if (it == m_sources.end()) {
        return Error::badInput(
            fmt::format("{}: no quantised weight '{}'", displayPath(m_root), convertedName));
    }
    const TensorSource& source = it->second;
    DequantizedTensor out { source.shape, {} };
    out.values.resize(std::size_t(source.bytes() / sizeof(float)));
    auto filled = source.fill(std::as_writable_bytes(std::span(out.values)));
    if (!filled) {
        return filled.error().withContext(
            fmt::format("{}: dequantising '{}'", displayPath(m_root), convertedName));
    }
    return out;
}

std::vector<std::string> DequantizedWeights::names() const
{
    std::vector<std::string> out;
    out.reserve(m_sources.size());
    for (const auto& [name, source] : m_sources) {
        out.push_back(name);
    }
    return out;
}

} // namespace day0::checkpoint
