#include "base/resources.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <system_error>

namespace day0 {

namespace fs = std::filesystem;

namespace {

std::mutex g_mutex;
std::optional<fs::path> g_override;

bool looksLikeResources(const fs::path& dir)
{
    std::error_code ec;
    return fs::is_directory(dir / "configs", ec);
}

fs::path executableDir()
{
    std::error_code ec;
    const auto exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

} // namespace

void setResourceDir(const fs::path& dir)
{
    std::lock_guard lock(g_mutex);
    g_override = dir;
}

fs::path resourceDir()
{
    {
        std::lock_guard lock(g_mutex);
        if (g_override) {
            return *g_override;
        }
    }
    if (const char* env = std::getenv("DAY0_RESOURCES"); env && *env) {
        return fs::path(env);
    }
    const auto exeDir = executableDir();
    if (!exeDir.empty()) {
        for (const auto& candidate : { exeDir / "../share/day0", exeDir / "resources" }) {
            if (looksLikeResources(candidate)) {
                return fs::weakly_canonical(candidate);
            }
        }
    }
#ifdef DAY0_RESOURCE_DIR_BUILD
    if (looksLikeResources(DAY0_RESOURCE_DIR_BUILD)) {
        return fs::path(DAY0_RESOURCE_DIR_BUILD);
    }
#endif
#ifdef DAY0_RESOURCE_DIR_INSTALL
    if (looksLikeResources(DAY0_RESOURCE_DIR_INSTALL)) {
        return fs::path(DAY0_RESOURCE_DIR_INSTALL);
    }
#endif
    return {};
}

std::vector<fs::path> installedLibraryDirs()
{
    std::vector<fs::path> out;
    std::vector<fs::path> candidates;
#ifdef DAY0_INSTALL_LIBDIR
    if (const auto exeDir = executableDir(); !exeDir.empty()) {
        candidates.push_back(exeDir / ".." / DAY0_INSTALL_LIBDIR / "day0");
    }
#endif
#ifdef DAY0_INSTALL_FULL_LIBDIR
    candidates.emplace_back(fs::path(DAY0_INSTALL_FULL_LIBDIR) / "day0");
#endif
    for (const auto& dir : candidates) {
        std::error_code ec;
        if (fs::is_directory(dir, ec)) {
            const auto canonical = fs::weakly_canonical(dir, ec);
            if (std::find(out.begin(), out.end(), canonical) == out.end()) {
                out.push_back(canonical);
            }
        }
    }
    return out;
}

} // namespace day0
