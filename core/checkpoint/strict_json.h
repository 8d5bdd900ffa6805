#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace day0::checkpoint {

/// Returns the offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code
/// points above U+10FFFF included), or npos when `text` is valid UTF-8.
std::size_t findInvalidUtf8(std::string_view text);

/// Parses JSON from untrusted files more strictly than nlohmann's default: the text must be
/// valid UTF-8 and no object may repeat a key (the JSON standard leaves that open; safetensors
/// and the shard index forbid it). `origin` names the source in error messages. Thread-safe.
Result<nlohmann::json> parseStrictJson(std::string_view text, const std::string& origin);

} // namespace day0::checkpoint
