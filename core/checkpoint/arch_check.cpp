#include "checkpoint/arch_check.h"

#include "base/file_util.h"
#include "checkpoint/checkpoint_writer.h"
#include "model/config_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace day0::checkpoint {

TensorReport checkTensors(const Checkpoint& checkpoint, const model::LayerGraph& graph)
{
    TensorReport report;
    report.format = std::string(checkpointFormatName(checkpoint.format()));
    report.checked = true;
    std::unordered_map<std::string_view, const model::TensorSpec*> expected;
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            expected.emplace(t.name, &t);
        }
    }
    std::unordered_map<std::string_view, bool> seen;
    for (const auto& t : checkpoint.tensors()) {
        TensorRow row { t.name, t.dtypeName, t.shape, t.file, t.bytes, TensorStatus::Ok, {}, {},
            {} };
        report.bytes += t.bytes;
        const auto it = expected.find(t.name);
        if (it == expected.end()) {
            row.status = TensorStatus::Unexpected;
            row.message = fmt::format("{}: tensor '{}' is not part of the {} architecture",
                displayPath(checkpoint.root() / t.file), t.name, graph.spec.modelType);
        } else {
            const auto& spec = *it->second;
            seen[spec.name] = true;
            row.expectedDtype = std::string(dtypeName(spec.dtype));
            row.expectedShape = spec.shape;
            if (t.shape != spec.shape) {
                row.status = TensorStatus::WrongShape;
                row.message
                    = fmt::format("{}: tensor '{}' has shape {} but the architecture expects {}",
                        displayPath(checkpoint.root() / t.file), t.name, formatShape(t.shape),
                        formatShape(spec.shape));
            } else if (!t.dtype || (*t.dtype != spec.dtype && t.dtype != spec.altDtype)) {
                // altDtype: the family's published checkpoints store it either way (Qwen3.5's
                // F32 A_log, Qwen3.6's BF16), which config.json cannot tell apart.
                row.status = TensorStatus::WrongDtype;
                row.message = fmt::format("{}: tensor '{}' is {} but the architecture expects {}{}",
                    displayPath(checkpoint.root() / t.file), t.name, t.dtypeName,
                    dtypeName(spec.dtype),
                    spec.altDtype ? fmt::format(" or {}", dtypeName(*spec.altDtype)) : "");
            }
        }
        report.rows.push_back(std::move(row));
    }
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            if (t.optional || seen.count(t.name) != 0 || checkpoint.find(t.name) != nullptr) {
                continue;
            }
            TensorRow row;
            row.name = t.name;
            row.status = TensorStatus::Missing;
            row.expectedDtype = std::string(dtypeName(t.dtype));
            row.expectedShape = t.shape;
            row.message = fmt::format("{}: tensor '{}' ({} {}) is missing",
                displayPath(checkpoint.root()), t.name, dtypeName(t.dtype), formatShape(t.shape));
            report.rows.push_back(std::move(row));
        }
    }
    std::stable_sort(report.rows.begin(), report.rows.end(),
        [](const TensorRow& a, const TensorRow& b) { return naturalLess(a.name, b.name); });
    return report;
}

Result<std::optional<TensorReport>> checkAgainstConfig(const Checkpoint& checkpoint)
{
    const auto config = checkpoint.root() / "config.json";
    std::error_code ec;
    // A per-rank split (day0 shard output, with plan.json) holds slices, not the whole model.
    if (checkpoint.format() == CheckpointFormat::Gguf || !std::filesystem::exists(config, ec)
        || std::filesystem::exists(checkpoint.root() / "plan.json", ec)) {
        return std::optional<TensorReport>();
    }
    auto spec = model::readConfigFile(config);
    if (!spec) {
        return spec.error();
    }
    const auto graph = model::buildLayerGraph(*spec);
    return std::optional<TensorReport>(checkTensors(checkpoint, graph));
}

} // namespace day0::checkpoint
