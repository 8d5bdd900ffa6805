#include "profile/trace_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

namespace day0::profile {

namespace {

struct Totals {
    std::size_t count = 0;
    std::int64_t total = 0;
};

std::map<std::pair<std::string, Category>, Totals> totalsOf(
    const Trace& t, const DiffOptions& options)
{
    std::map<std::pair<std::string, Category>, Totals> out;
    std::map<std::pair<StringId, Category>, Totals> byId;
    for (SliceIndex i = 0; i < t.sliceCount(); ++i) {
        const Category c = t.sliceCategory(i);
        const bool cpu = c == Category::CpuOp || c == Category::Runtime;
        if (!isGpuWork(c) && !(options.includeCpu && cpu)) {
            continue;
        }
        auto& s = byId[{ t.sliceName(i), c }];
        ++s.count;
        s.total = addSaturating(s.total, t.sliceDuration(i));
    }
    for (const auto& [key, s] : byId) {
        out[{ std::string(t.text(key.first)), key.second }] = s;
    }
    return out;
}

} // namespace

std::string_view diffStatusName(DiffStatus status)
{
    switch (status) {
    case DiffStatus::Added:
        return "added";
    case DiffStatus::Removed:
        return "removed";
    case DiffStatus::Slower:
        return "slower";
    case DiffStatus::Faster:
        return "faster";
    case DiffStatus::Unchanged:
        break;
    }
    return "unchanged";
}

std::vector<DiffRow> diffTraces(const Trace& a, const Trace& b, const DiffOptions& options)
{
    const auto ta = totalsOf(a, options);
    const auto tb = totalsOf(b, options);
    std::map<std::pair<std::string, Category>, DiffRow> rows;
    for (const auto& [key, s] : ta) {
        auto& r = rows[key];
        r.name = key.first;
        r.category = key.second;
        r.countA = s.count;
        r.totalA = s.total;
    }
    for (const auto& [key, s] : tb) {
        auto& r = rows[key];
        r.name = key.first;
        r.category = key.second;
        r.countB = s.count;
        r.totalB = s.total;
    }
    std::vector<DiffRow> out;
    for (auto& [key, r] : rows) {
        r.meanA = r.countA ? double(r.totalA) / double(r.countA) : 0.0;
        r.meanB = r.countB ? double(r.totalB) / double(r.countB) : 0.0;
        if (r.countA == 0) {
            r.status = DiffStatus::Added;
        } else if (r.countB == 0) {
            r.status = DiffStatus::Removed;
        } else {
            const double delta = r.meanB - r.meanA;
            r.meanChangePercent = r.meanA > 0.0 ? 100.0 * delta / r.meanA : 0.0;
            const bool significant = std::fabs(delta) >= double(options.minDeltaNs)
                && (r.meanA == 0.0 || std::fabs(r.meanChangePercent) >= options.thresholdPercent);
            r.status = !significant ? DiffStatus::Unchanged
                                    : (delta > 0 ? DiffStatus::Slower : DiffStatus::Faster);
        }
        out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(), [](const DiffRow& x, const DiffRow& y) {
        if (x.status != y.status) {
            return x.status < y.status;
        }
        const auto dx = std::llabs(x.totalB - x.totalA);
        const auto dy = std::llabs(y.totalB - y.totalA);
        if (dx != dy) {
            return dx > dy;
        }
        return x.name < y.name;
    });
    return out;
}

} // namespace day0::profile
