#pragma once

// Internal to core/checkpoint: the JSON helpers shrinkConfig and its families' steps share.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace day0::checkpoint::detail {

using Json = nlohmann::ordered_json;

inline std::int64_t roundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

inline bool has(const Json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

inline std::int64_t intOf(const Json& j, const char* key, std::int64_t fallback)
{
    return has(j, key) && j[key].is_number_integer() ? j[key].get<std::int64_t>() : fallback;
}

/// Scales `v` by hidden'/hidden, rounded up to a multiple of `multiple`, at least `minimum`.
inline std::int64_t scaled(
    std::int64_t v, std::int64_t h, std::int64_t h2, std::int64_t multiple, std::int64_t minimum)
{
    const double r = double(v) * double(h2) / double(std::max<std::int64_t>(h, 1));
    return std::max(minimum, roundUp(std::int64_t(std::ceil(r)), multiple));
}

/// A list with one entry per layer (layer_types, moe_layer_freq, ...); not M-RoPE's sections.
inline bool isPerLayerList(const std::string& key, const Json& value, std::int64_t layers)
{
    return value.is_array() && std::int64_t(value.size()) == layers && key != "mrope_section";
}

} // namespace day0::checkpoint::detail
