#pragma once
// The corpus of `day0 eval --ids-file` (actions/eval.h).

#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace day0::actions::detail {

/// One document per non-empty line, ids separated by spaces or commas, each in [0, vocab);
/// errors name file:line and the item. A file with no id is refused.
Result<std::vector<std::vector<std::int64_t>>> readIdsFile(
    const std::filesystem::path& path, std::int64_t vocab);

} // namespace day0::actions::detail
