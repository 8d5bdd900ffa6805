#pragma once

#include <filesystem>
#include <optional>
#include <vector>

namespace day0 {

/// The folder with bundled data (configs/, hardware/, tolerances/): $DAY0_RESOURCES if set, else
/// the source tree's resources/ when run from a build tree, else <prefix>/share/day0 next to the
/// binary. Empty when none is found.
std::filesystem::path resourceDir();

/// The folders, most specific first, where an installed day0 keeps its libraries (the hardware
/// plugins under plugins/, libday0_figures): <prefix>/<libdir>/day0 next to the binary, with the
/// libdir the build was configured with (lib/x86_64-linux-gnu on Debian), then the configured
/// prefix's own. Folders that do not exist are left out.
std::vector<std::filesystem::path> installedLibraryDirs();

/// Overrides the resource folder (tests, the GUI's extracted Qt resources).
void setResourceDir(const std::filesystem::path& dir);

} // namespace day0
