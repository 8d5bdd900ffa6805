#pragma once

#include "profile/importer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace day0::profile::test {

inline std::filesystem::path dataFile(const std::string& name)
{
    return std::filesystem::path(DAY0_TEST_DATA_DIR) / "profile" / name;
}

/// The shared reference traces folder, when present (DAY0_SHARED_DIR or the default next to the
/// repository); large files are only tested there.
inline std::optional<std::filesystem::path> sharedTraces()
{
    const char* env = std::getenv("DAY0_SHARED_DIR");
    const std::filesystem::path root = env != nullptr ? env : DAY0_SHARED_DIR_DEFAULT;
    const auto traces = root / "refdata" / "traces";
    std::error_code ec;
    if (std::filesystem::is_directory(traces, ec)) {
        return traces;
    }
    return std::nullopt;
}

inline Trace importOrFail(const std::filesystem::path& path, ImportOptions options = {})
{
    Progress progress;
    auto r = importTrace(path, options, progress, {});
    if (!r.ok()) {
        ADD_FAILURE() << r.error().message;
        return {};
    }
    return std::move(*r);
}

inline std::size_t byCat(const Trace& t, Category c)
{
    return t.counts().byCategory[std::size_t(c)];
}

} // namespace day0::profile::test
