// Fuzzes the Nsight Systems SQLite importer on damaged database images: any input imports or
// fails with an error that names it (SQLite itself reports corruption), and whatever imports
// survives the analyses and exports to Chrome JSON that imports again with the same counts.
#include "profile/byte_source.h"
#include "profile/chrome_exporter.h"
#include "profile/chrome_importer.h"
#include "profile/kernel_stats.h"
#include "profile/nsys_importer.h"
#include "profile/temporal_breakdown.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace day0;
    using namespace day0::profile;
    TraceBuilder builder;
    Progress progress;
    const auto imported = importNsysSqliteBytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.sqlite", builder, {}, progress, {});
    if (!imported.ok()) {
        if (imported.error().message.find("fuzz.sqlite") == std::string::npos) {
            std::abort();
        }
        return 0;
    }
    auto trace = builder.finish(progress, {});
    if (!trace.ok()) {
        std::abort();
    }
    (void)temporalBreakdown(*trace);
    (void)kernelStatistics(*trace);
    std::string json;
    if (!writeChromeJson(
            *trace,
            [&](std::string_view piece) -> Result<void> {
                json.append(piece);
                return success();
            },
            progress, {})
             .ok()) {
        std::abort();
    }
    auto source = ByteSource::fromBytes(std::move(json), "again.json");
    TraceBuilder again;
    if (!source.ok() || !importChromeJson(**source, again, {}, progress, {}).ok()) {
        std::abort();
    }
    auto back = again.finish(progress, {});
    if (!back.ok() || back->counts().slices != trace->counts().slices
        || back->counts().flows != trace->counts().flows) {
        std::abort();
    }
    return 0;
}
