#include "checkpoint/shard_index.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/strict_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace day0::checkpoint {

namespace {

/// Why a shard name cannot be used, or empty when it is a plain relative path.
std::string unsafeShardName(const std::string& name)
{
    if (name.empty()) {
        return "is empty";
    }
    if (name.find('\0') != std::string::npos) {
        return "contains a NUL byte";
    }
    const std::filesystem::path p(name);
    if (p.is_absolute() || name.front() == '/') {
        return "is an absolute path";
    }
    for (const auto& part : p) {
        if (part == "..") {
            return "leaves the checkpoint folder ('..')";
        }
    }
    return {};
}

} // namespace

std::vector<std::string> ShardIndex::shardFiles() const
{
    std::set<std::string> files;
    for (const auto& [tensor, file] : weightMap) {
        files.insert(file);
    }
    return { files.begin(), files.end() };
}

const std::string* ShardIndex::shardOf(std::string_view tensor) const
{
    const auto it = std::lower_bound(weightMap.begin(), weightMap.end(), tensor,
        [](const auto& entry, std::string_view name) { return entry.first < name; });
    return it != weightMap.end() && it->first == tensor ? &it->second : nullptr;
}

Result<ShardIndex> parseShardIndex(std::string_view text, const std::string& origin)
{
    auto parsed = parseStrictJson(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const auto& root = *parsed;
    if (!root.is_object()) {
        return Error::badInput(fmt::format("{}: must be a JSON object with 'weight_map'", origin));
    }
    ShardIndex index;
    const auto mapIt = root.find("weight_map");
    if (mapIt == root.end() || !mapIt->is_object()) {
        return Error::badInput(fmt::format("{}: missing object 'weight_map'", origin));
    }
    index.weightMap.reserve(mapIt->size());
    for (const auto& [tensor, file] : mapIt->items()) {
        if (!file.is_string()) {
            return Error::badInput(fmt::format(
                "{}: weight_map entry for tensor '{}' must be a file name string", origin, tensor));
        }
        const auto& name = file.get_ref<const std::string&>();
        if (const auto why = unsafeShardName(name); !why.empty()) {
            return Error::badInput(
                fmt::format("{}: tensor '{}': shard name '{}' {}", origin, tensor, name, why));
        }
        index.weightMap.emplace_back(tensor, name);
    }
    std::sort(index.weightMap.begin(), index.weightMap.end());

    if (const auto metaIt = root.find("metadata"); metaIt != root.end() && !metaIt->is_null()) {
        if (!metaIt->is_object()) {
            return Error::badInput(fmt::format("{}: 'metadata' must be an object", origin));
        }
        index.metadata = *metaIt;
        if (const auto sizeIt = metaIt->find("total_size");
            sizeIt != metaIt->end() && !sizeIt->is_null()) {
            if (sizeIt->is_number_unsigned()) {
                index.totalSize = sizeIt->get<std::uint64_t>();
            } else if (sizeIt->is_number_integer() && sizeIt->get<std::int64_t>() >= 0) {
                index.totalSize = std::uint64_t(sizeIt->get<std::int64_t>());
            } else if (sizeIt->is_number_float() && sizeIt->get<double>() >= 0
                && sizeIt->get<double>() < 1.8e19
                && sizeIt->get<double>() == double(std::uint64_t(sizeIt->get<double>()))) {
                // Some writers emit 1.23e+10: accept it when it is a whole number.
                index.totalSize = std::uint64_t(sizeIt->get<double>());
            } else if (sizeIt->is_string() && !sizeIt->get_ref<const std::string&>().empty()
                && sizeIt->get_ref<const std::string&>().size() < 20
                && sizeIt->get_ref<const std::string&>().find_first_not_of("0123456789")
                    == std::string::npos) {
                index.totalSize = std::stoull(sizeIt->get<std::string>());
            } else {
                return Error::badInput(
                    fmt::format("{}: 'metadata.total_size' must be a non-negative integer, not {}",
                        origin, sizeIt->dump()));
            }
        }
    }
    return index;
}

Result<ShardIndex> readShardIndex(const std::filesystem::path& path)
{
    auto text = readFile(path);
    if (!text) {
        return text.error();
    }
    return parseShardIndex(*text, displayPath(path));
}

std::string serializeShardIndex(const ShardIndex& index)
{
    nlohmann::ordered_json out;
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    if (index.metadata.is_object()) {
        for (const auto& [key, value] : index.metadata.items()) {
            metadata[key] = value;
        }
    }
    if (index.totalSize) {
        metadata["total_size"] = *index.totalSize;
    }
    out["metadata"] = metadata;
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const auto& [tensor, file] : index.weightMap) {
        map[tensor] = file;
    }
    out["weight_map"] = map;
    return dumpJson(out, 2) + "\n";
}

std::string shardFileName(int index, int count)
{
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

} // namespace day0::checkpoint
