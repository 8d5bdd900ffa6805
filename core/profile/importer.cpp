#include "profile/importer.h"

#include "base/file_util.h"
#include "profile/byte_source.h"
#include "profile/chrome_importer.h"
#include "profile/nsys_importer.h"

#include <fmt/format.h>

#include <cstring>

namespace day0::profile {

Result<TraceFormat> detectTraceFormat(const std::filesystem::path& path)
{
    auto src = ByteSource::open(path);
    if (!src.ok()) {
        return src.error();
    }
    char head[64];
    auto n = (*src)->read(head, sizeof head);
    if (!n.ok()) {
        return n.error();
    }
    const std::string_view bytes(head, *n);
    if (bytes.size() >= 16 && std::memcmp(bytes.data(), "SQLite format 3", 16) == 0) {
        return TraceFormat::NsysSqlite;
    }
    for (const char c : bytes) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            continue;
        }
        return (c == '{' || c == '[' || c == '\xEF') ? TraceFormat::ChromeJson
                                                     : TraceFormat::Unknown;
    }
    return TraceFormat::Unknown;
}

Result<void> importInto(TraceBuilder& builder, const std::filesystem::path& path,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    const std::string name = displayPath(path);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        return Error::badInput(fmt::format("{}: no such file", name));
    }
    auto format = detectTraceFormat(path);
    if (!format.ok()) {
        return format.error();
    }
    switch (*format) {
    case TraceFormat::NsysSqlite:
        return importNsysSqlite(path, builder, options, progress, stop);
    case TraceFormat::ChromeJson: {
        auto src = ByteSource::open(path);
        if (!src.ok()) {
            return src.error();
        }
        return importChromeJson(**src, builder, options, progress, stop);
    }
    case TraceFormat::Unknown:
        break;
    }
    if (std::filesystem::file_size(path, ec) == 0) {
        return Error::badInput(fmt::format("{}: empty file", name));
    }
    return Error::badInput(fmt::format("{}: not a trace this tool reads (expected Kineto/Chrome "
                                       "trace JSON or an Nsight Systems SQLite "
                                       "export, optionally gzip-compressed; .nsys-rep files must "
                                       "first be exported with 'nsys export --type sqlite')",
        name));
}

Result<Trace> importTrace(const std::filesystem::path& path, const ImportOptions& options,
    Progress& progress, std::stop_token stop)
{
    return importTraces({ path }, options, progress, stop);
}

Result<Trace> importTraces(const std::vector<std::filesystem::path>& paths,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    TraceBuilder builder;
    for (std::size_t i = 0; i < paths.size(); ++i) {
        ImportOptions one = options;
        if (options.rank) {
            one.rank = *options.rank + std::int32_t(i);
        }
        DAY0_TRY(importInto(builder, paths[i], one, progress, stop));
    }
    return builder.finish(progress, stop);
}

} // namespace day0::profile
