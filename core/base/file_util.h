#pragma once

#include "base/result.h"

#include <filesystem>
#include <string>
#include <string_view>

namespace day0 {

/// Reads a whole file as bytes; the error names the file and the OS reason.
Result<std::string> readFile(const std::filesystem::path& path);

/// Writes `contents` to `path` atomically: a temporary file in the same folder is written,
/// flushed and renamed over `path`, so a failure never leaves a half-written file.
Result<void> writeFileAtomic(const std::filesystem::path& path, std::string_view contents);

/// Path text for messages: relative to the working directory when shorter.
std::string displayPath(const std::filesystem::path& path);

} // namespace day0
