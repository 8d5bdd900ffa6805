#include "exec/shrunk_cache.h"

#include <fmt/format.h>

#include <cstdlib>
#include <system_error>

namespace day0::exec {

namespace fs = std::filesystem;

namespace {

// Folder-name form of a model argument: bundled names as they are, paths by their last parts.
std::string cacheKey(const std::string& modelArg)
{
    fs::path p(modelArg);
    if (p.filename() == "config.json") {
        p = p.parent_path();
    }
    std::string name = p.filename().string();
    if (name.empty()) {
        name = p.parent_path().filename().string();
    }
    if (name.empty()) {
        name = "model";
    }
    for (char& c : name) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
            || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        if (!plain) {
            c = '_';
        }
    }
    return name;
}

bool complete(const fs::path& dir)
{
    std::error_code ec;
    return fs::exists(dir / "config.json", ec) && fs::exists(dir / "day0-manifest.json", ec);
}

} // namespace

fs::path cacheDir()
{
    if (const char* env = std::getenv("XDG_CACHE_HOME"); env != nullptr && *env == '/') {
        return fs::path(env) / "day0";
    }
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        return fs::path(home) / ".cache" / "day0";
    }
    return fs::temp_directory_path() / "day0-cache";
}

checkpoint::ShrinkOptions demoShrinkOptions()
{
    checkpoint::ShrinkOptions options;
    options.layers = 8;
    return options;
}

fs::path shrunkCheckpointPath(const std::string& modelArg, const checkpoint::ShrinkOptions& options)
{
    return cacheDir() / "shrunk"
        / fmt::format("{}-l{}-s{}", cacheKey(modelArg), options.layers.value_or(4), options.seed);
}

Result<fs::path> cachedShrunkCheckpoint(const std::string& modelArg,
    const checkpoint::ShrinkOptions& options, Progress& progress, std::stop_token stop)
{
    const fs::path dir = shrunkCheckpointPath(modelArg, options);
    if (complete(dir)) {
        return dir;
    }
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    if (ec) {
        return Error::badInput(fmt::format(
            "{}: cannot create the cache folder: {}", dir.parent_path().string(), ec.message()));
    }
    // Written as any output is (under a locked temporary, renamed into place), so a run killed
    // half-way leaves nothing the next one takes for the cache. An incomplete folder left by
    // an older version is replaced; two processes that race put the same weights in place.
    checkpoint::ShrinkOptions writing = options;
    writing.replace = true;
    progress.setStage(fmt::format("shrinking {}", modelArg));
    auto shrunk = checkpoint::shrinkModel(modelArg, dir, writing, progress, stop);
    if (!shrunk) {
        if (shrunk.error().code != ErrorCode::Cancelled && complete(dir)) {
            return dir;
        }
        return shrunk.error().withContext(
            fmt::format("shrinking {} into {}", modelArg, dir.string()));
    }
    return dir;
}

} // namespace day0::exec
