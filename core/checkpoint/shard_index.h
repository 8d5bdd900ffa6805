#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace day0::checkpoint {

/// The name Hugging Face gives the index of a sharded safetensors checkpoint.
inline constexpr std::string_view kShardIndexName = "model.safetensors.index.json";

/// A parsed `model.safetensors.index.json`.
struct ShardIndex {
    /// tensor name → shard file name, sorted by tensor name.
    std::vector<std::pair<std::string, std::string>> weightMap;
    /// `metadata.total_size`: the sum of tensor byte sizes, when present (some writers omit it).
    std::optional<std::uint64_t> totalSize;
    /// The whole `metadata` object as written (kept when rewriting).
    nlohmann::json metadata = nlohmann::json::object();

    /// The distinct shard files, sorted.
    [[nodiscard]] std::vector<std::string> shardFiles() const;
    /// The shard holding `tensor`, nullptr if not indexed (binary search).
    [[nodiscard]] const std::string* shardOf(std::string_view tensor) const;
};

/// Parses an index: a JSON object (UTF-8, no duplicate keys) with an object `weight_map` of
/// string → string and an optional object `metadata` whose `total_size` is a non-negative integer
/// (a numeric string is accepted too). Shard names must be relative paths inside the folder (no
/// absolute paths, no `..`). `origin` names the file in errors.
Result<ShardIndex> parseShardIndex(std::string_view text, const std::string& origin);

/// Reads and parses an index file.
Result<ShardIndex> readShardIndex(const std::filesystem::path& path);

/// The index as JSON text (metadata first, then weight_map sorted by name), as HF writes it.
std::string serializeShardIndex(const ShardIndex& index);

/// The HF shard file name: "model-00003-of-00009.safetensors" (1-based index).
std::string shardFileName(int index, int count);

} // namespace day0::checkpoint
