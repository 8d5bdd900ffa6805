#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/shrink.h"

#include <filesystem>
#include <stop_token>
#include <string>

namespace day0::exec {

/// The cache of generated models: $XDG_CACHE_HOME/day0, or ~/.cache/day0 when XDG_CACHE_HOME is
/// unset or relative (DESIGN.md §5).
std::filesystem::path cacheDir();

/// The shrunk checkpoint the embedded demo runs: 8 layers of the architecture, every other size
/// at shrink's defaults, seed 0.
checkpoint::ShrinkOptions demoShrinkOptions();

/// Where cachedShrunkCheckpoint keeps the shrunk checkpoint of `modelArg` with `options` (the
/// folder may not exist yet).
std::filesystem::path shrunkCheckpointPath(
    const std::string& modelArg, const checkpoint::ShrinkOptions& options);

/// A shrunk checkpoint of `modelArg` (a bundled name, a folder with config.json or the file) in
/// cacheDir()/shrunk/<name>-l<layers>-s<seed>, generated on first use (into a scratch folder
/// renamed into place, so processes racing for it agree on one copy) and reused afterwards.
/// Errors name the model and the folder. Thread-safe.
Result<std::filesystem::path> cachedShrunkCheckpoint(const std::string& modelArg,
    const checkpoint::ShrinkOptions& options, Progress& progress, std::stop_token stop);

} // namespace day0::exec
