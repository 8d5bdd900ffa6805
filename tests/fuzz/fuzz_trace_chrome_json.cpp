// Fuzzes the Kineto/Chrome trace JSON importer (plain or gzip): any input imports or fails with
// an error that names it; whatever imports survives every analysis, and its Chrome export
// imports again with the same numbers of slices, flows, instants and counter samples.
#include "profile/byte_source.h"
#include "profile/chrome_exporter.h"
#include "profile/chrome_importer.h"
#include "profile/collectives.h"
#include "profile/kernel_stats.h"
#include "profile/temporal_breakdown.h"
#include "profile/timeline_lod.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

using namespace day0;
using namespace day0::profile;

Result<Trace> importBytes(std::string bytes, const std::string& name)
{
    auto source = ByteSource::fromBytes(std::move(bytes), name);
    if (!source.ok()) {
        return source.error();
    }
    TraceBuilder builder;
    Progress progress;
    DAY0_TRY(importChromeJson(**source, builder, {}, progress, {}));
    return builder.finish(progress, {});
}

void analyse(const Trace& trace)
{
    (void)temporalBreakdown(trace);
    (void)kernelStatistics(trace);
    (void)collectiveStatistics(trace);
    (void)suggestClockAlignment(trace);
    const auto [t0, t1] = trace.timeRange();
    for (TrackId t = 0; t < trace.tracks().size(); ++t) {
        (void)buildTrackLod(trace, t, t0, t1 + 1, 37);
        (void)trace.slicesInRange(t, t0 + (t1 - t0) / 3, t1 - (t1 - t0) / 3);
    }
    for (SliceIndex i = 0; i < trace.sliceCount(); ++i) {
        (void)trace.sliceArgs(i);
        (void)trace.sliceTrack(i);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto trace = importBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    if (!trace.ok()) {
        if (trace.error().message.find("fuzz.json") == std::string::npos) {
            std::abort();
        }
        return 0;
    }
    analyse(*trace);
    std::string json;
    Progress progress;
    const auto written = writeChromeJson(
        *trace,
        [&](std::string_view piece) -> Result<void> {
            json.append(piece);
            return success();
        },
        progress, {});
    if (!written.ok()) {
        std::abort();
    }
    auto again = importBytes(std::move(json), "again.json");
    if (!again.ok()) {
        std::abort();
    }
    const auto a = trace->counts();
    const auto b = again->counts();
    if (a.slices != b.slices || a.flows != b.flows || a.instants != b.instants || a.counters != b.counters) {
        std::abort();
    }
    return 0;
}
