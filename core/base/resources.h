#pragma once

#include <filesystem>
#include <optional>

namespace day0 {

/// The folder with bundled data (configs/, hardware/, tolerances/): $DAY0_RESOURCES if set, else
/// the source tree's resources/ when run from a build tree, else <prefix>/share/day0 next to the
/// binary. Empty when none is found.
std::filesystem::path resourceDir();

/// Overrides the resource folder (tests, the GUI's extracted Qt resources).
void setResourceDir(const std::filesystem::path& dir);

} // namespace day0
