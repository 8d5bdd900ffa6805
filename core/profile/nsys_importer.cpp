#include "profile/nsys_importer.h"

#include "base/file_util.h"
#include "profile/byte_source.h"
#include "profile/nsys_reader.h"
#include "profile/privacy.h"

#include <fmt/format.h>

#include <cstdio>

namespace day0::profile {

namespace {

using detail::NsysReader;

Result<void> importFrom(const sqlite::Database& db, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    SourceInfo info;
    info.file = std::string(baseName(db.name()));
    info.format = "nsys";
    info.rank = options.rank.value_or(0);
    const auto source = builder.addSource(info);
    NsysReader reader(db, builder, info.rank, source);
    return reader.run(progress, stop);
}

} // namespace

Result<void> importNsysSqlite(const std::filesystem::path& path, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    const std::string name = displayPath(path);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        return Error::badInput(fmt::format("{}: cannot open", name));
    }
    unsigned char magic[2] = { 0, 0 };
    const std::size_t got = std::fread(magic, 1, 2, f);
    std::fclose(f);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        bool truncated = false;
        auto bytes = readAllBytes(path, &truncated);
        if (!bytes.ok()) {
            return bytes.error();
        }
        if (truncated) {
            return Error::badInput(fmt::format(
                "{}: the gzip data is truncated; an SQLite export must be complete", name));
        }
        return importNsysSqliteBytes(std::move(*bytes), name, builder, options, progress, stop);
    }
    auto db = sqlite::Database::openUntrusted(path, name);
    if (!db.ok()) {
        return db.error();
    }
    return importFrom(*db, builder, options, progress, stop);
}

Result<void> importNsysSqliteBytes(std::string bytes, const std::string& name,
    TraceBuilder& builder, const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    auto db = sqlite::Database::openUntrustedImage(std::move(bytes), name);
    if (!db.ok()) {
        return db.error();
    }
    return importFrom(*db, builder, options, progress, stop);
}

} // namespace day0::profile
