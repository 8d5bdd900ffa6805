#include "profile/trace_merge.h"

#include <vector>

namespace day0::profile {

namespace {

/// Re-encodes decoded arguments into the builder's store.
ArgsRef copyArgs(TraceBuilder& builder, std::span<const Arg> args)
{
    if (args.empty()) {
        return 0;
    }
    builder.args().begin();
    for (const Arg& a : args) {
        builder.addArg(a);
    }
    return builder.args().commit();
}

} // namespace

void appendTrace(TraceBuilder& builder, const Trace& trace)
{
    std::vector<std::uint16_t> sources;
    for (const SourceInfo& s : trace.sources()) {
        sources.push_back(builder.addSource(s));
    }
    for (const DeviceInfo& d : trace.devices()) {
        builder.addDevice(d);
    }
    std::vector<TrackId> tracks;
    for (const Track& t : trace.tracks()) {
        Track copy = t;
        copy.source = t.source < sources.size() ? sources[t.source] : t.source;
        copy.maxDepth = 0; // recomputed by finish()
        tracks.push_back(builder.addTrack(std::move(copy)));
    }
    std::vector<SliceIndex> slices(trace.sliceCount(), kNoSlice);
    for (TrackId track = 0; track < TrackId(trace.tracks().size()); ++track) {
        const auto [first, end] = trace.trackSlices(track);
        for (SliceIndex i = first; i < end; ++i) {
            // sliceArgs lists External id and correlation first when set; they travel as columns.
            const auto args = trace.sliceArgs(i);
            const std::size_t synthetic = std::size_t(trace.sliceExternalId(i) != 0)
                + std::size_t(trace.sliceCorrelation(i) != 0);
            slices[i] = builder.addSlice(tracks[track], trace.sliceStart(i), trace.sliceEnd(i),
                builder.intern(trace.sliceNameText(i)), trace.sliceCategory(i),
                trace.sliceCorrelation(i), trace.sliceExternalId(i),
                copyArgs(builder, std::span(args).subspan(synthetic)));
        }
    }
    for (std::size_t f = 0; f < trace.flowCount(); ++f) {
        const SliceIndex from = slices[trace.flowFrom(f)];
        const SliceIndex to = slices[trace.flowTo(f)];
        if (from != kNoSlice && to != kNoSlice) {
            builder.addFlow(from, to, trace.flowKind(f));
        }
    }
    for (std::size_t i = 0; i < trace.instantCount(); ++i) {
        const auto args = trace.instantArgs(i);
        builder.addInstant(tracks[trace.instantTrack(i)], trace.instantTime(i),
            builder.intern(trace.text(trace.instantName(i))), trace.instantCategory(i),
            copyArgs(builder, args));
    }
    for (std::size_t i = 0; i < trace.counterCount(); ++i) {
        builder.addCounter(
            tracks[trace.counterTrack(i)], trace.counterTime(i), trace.counterValue(i));
    }
    for (const std::string& w : trace.warnings()) {
        builder.warn(w);
    }
}

} // namespace day0::profile
