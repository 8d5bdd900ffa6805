#include "panels/timeline/timeline_frame.h"

#include "base/thread_pool.h"
#include "profile/timeline_lod.h"

#include <algorithm>

namespace day0::ui {

namespace {

std::uint8_t shadeOf(float coverage)
{
    if (coverage >= 0.75f) {
        return 3;
    }
    if (coverage >= 0.4f) {
        return 2;
    }
    return coverage >= 0.15f ? 1 : 0;
}

bool mergeable(const SliceRun& last, const SliceRun& next, const profile::Trace& trace)
{
    if (last.x1 != next.x0 || last.flags != next.flags) {
        return false;
    }
    if ((next.flags & SliceRun::Whole) != 0) {
        return last.slice == next.slice;
    }
    // Sub-pixel activity is painted in its category's colour: runs of one category and shade
    // look the same, so they are one rectangle.
    return last.shade == next.shade
        && trace.sliceCategory(last.slice) == trace.sliceCategory(next.slice);
}

std::vector<SliceRun> runsOfDepth(const profile::Trace& trace, const profile::TrackLod& lod,
    int depth, const std::vector<std::uint8_t>& marks)
{
    std::vector<SliceRun> runs;
    const auto starts = trace.sliceStarts();
    const auto ends = trace.sliceEnds();
    const double width = double(lod.t1 - lod.t0) / double(lod.pixels);
    const std::uint8_t* mark
        = marks.empty() ? nullptr : marks.data() + std::size_t(depth) * std::size_t(lod.pixels);
    for (int x = 0; x < lod.pixels; ++x) {
        const profile::LodCell& cell = lod.at(depth, x);
        if (cell.count == 0 || cell.representative == profile::kNoSlice) {
            continue;
        }
        const std::int64_t a = lod.t0 + std::int64_t(double(x) * width);
        const std::int64_t b
            = x + 1 == lod.pixels ? lod.t1 : lod.t0 + std::int64_t(double(x + 1) * width);
        const profile::SliceIndex rep = cell.representative;
        const bool whole = !cell.dense && starts[rep] <= a && ends[rep] >= b;
        SliceRun run;
        run.x0 = x;
        run.x1 = x + 1;
        run.slice = rep;
        run.count = cell.count;
        run.shade = whole ? 3 : shadeOf(cell.coverage);
        run.flags = std::uint8_t((whole ? SliceRun::Whole : 0) | (cell.dense ? SliceRun::Dense : 0)
            | (mark != nullptr && mark[x] != 0 ? SliceRun::Highlight : 0));
        if (!runs.empty() && mergeable(runs.back(), run, trace)) {
            runs.back().x1 = run.x1;
            // A slice spanning several columns is counted once.
            runs.back().count += whole ? 0 : run.count;
            continue;
        }
        runs.push_back(run);
    }
    return runs;
}

} // namespace

void TimelineTraces::set(int slot, std::shared_ptr<const profile::Trace> trace)
{
    const auto i = std::size_t(slot);
    origins[i] = 0;
    spans[i] = 0;
    indexes[i].reset();
    if (trace) {
        auto index = std::make_shared<const profile::LodIndex>(*trace);
        auto [first, last] = index->sliceRange();
        bool any = trace->sliceCount() > 0;
        for (std::size_t c = 0; c < trace->counterCount(); ++c) {
            const std::int64_t ts = trace->counterTime(c);
            first = any ? std::min(first, ts) : ts;
            last = any ? std::max(last, ts) : ts;
            any = true;
        }
        origins[i] = first;
        spans[i] = last - first;
        indexes[i] = std::move(index);
    }
    traces[i] = std::move(trace);
}

const TrackFrame* TimelineFrame::find(int slot, profile::TrackId track) const
{
    for (const auto& t : tracks) {
        if (t.slot == slot && t.track == track) {
            return &t;
        }
    }
    return nullptr;
}

namespace {

std::optional<TrackFrame> prepareTrack(
    const FrameRequest& request, const FrameRequest::TrackRef& ref, int width)
{
    const auto& trace = request.traces.traces[std::size_t(ref.slot)];
    if (!trace || ref.track >= trace->tracks().size()) {
        return std::nullopt;
    }
    const std::int64_t origin = request.traces.origins[std::size_t(ref.slot)];
    const std::int64_t t0 = origin + request.start;
    const std::int64_t t1 = origin + request.end();
    TrackFrame tf;
    tf.slot = ref.slot;
    tf.track = ref.track;
    if (trace->tracks()[ref.track].kind == profile::TrackKind::Counter) {
        tf.counter = profile::buildCounterLod(*trace, ref.track, t0, t1, width);
        bool any = false;
        for (const auto& c : tf.counter) {
            if (!c.defined) {
                continue;
            }
            tf.counterRange.first = any ? std::min(tf.counterRange.first, c.min) : c.min;
            tf.counterRange.second = any ? std::max(tf.counterRange.second, c.max) : c.max;
            any = true;
        }
        return tf;
    }
    tf.instants = profile::markInstants(*trace, ref.track, t0, t1, width);
    const auto& index = request.traces.indexes[std::size_t(ref.slot)];
    const auto lod = index
        ? profile::buildTrackLod(*trace, *index, ref.track, t0, t1, width, ref.depths)
        : profile::buildTrackLod(*trace, ref.track, t0, t1, width);
    const profile::StringId name = request.highlight[std::size_t(ref.slot)];
    const auto marks = name == profile::StringTable::kNotFound
        ? std::vector<std::uint8_t>()
        : profile::markNamedSlices(*trace, ref.track, name, t0, t1, width);
    const int depths = std::min(ref.depths, lod.depths);
    tf.depths.reserve(std::size_t(std::max(0, depths)));
    for (int d = 0; d < depths; ++d) {
        tf.depths.push_back(runsOfDepth(*trace, lod, d, marks));
    }
    return tf;
}

} // namespace

TimelineFrame prepareFrame(const FrameRequest& request, std::stop_token stop, ThreadPool* pool)
{
    TimelineFrame frame;
    frame.traces = request.traces;
    frame.start = request.start;
    frame.nsPerPixel = request.nsPerPixel;
    frame.width = std::max(0, request.width);
    frame.highlight = request.highlight;
    frame.generation = request.generation;
    if (frame.width == 0) {
        return frame;
    }
    // Tracks are independent: prepared side by side when a pool is given (Tracy's per-row
    // preprocessing), and gathered in request order.
    std::vector<std::optional<TrackFrame>> prepared(request.tracks.size());
    auto work = [&](std::size_t i) {
        if (!stop.stop_requested()) {
            prepared[i] = prepareTrack(request, request.tracks[i], frame.width);
        }
    };
    if (pool != nullptr && prepared.size() > 1) {
        pool->parallelFor(prepared.size(), work);
    } else {
        for (std::size_t i = 0; i < prepared.size(); ++i) {
            work(i);
        }
    }
    frame.tracks.reserve(prepared.size());
    for (auto& t : prepared) {
        if (t) {
            frame.tracks.push_back(std::move(*t));
        }
    }
    return frame;
}

} // namespace day0::ui
