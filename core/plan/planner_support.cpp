#include "plan/planner_support.h"

#include "base/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace day0::plan::detail {

std::size_t RejectionHash::operator()(const Rejection& r) const noexcept
{
    std::size_t h = std::size_t(r.kind);
    for (const auto v : { r.a, r.b, r.c }) {
        h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    }
    return h;
}

void RejectTally::add(const Rejection& r, std::int64_t n)
{
    if (n > 0) {
        m_counts[r] += n;
    }
}

void RejectTally::addMemory(RejectKind kind, const Layout& l, int rank, double over)
{
    const std::size_t k = kind == RejectKind::StatesOverMemory ? 0 : 1;
    ++m_memory[k];
    auto& miss = m_memoryMiss[k];
    if (miss.example.empty() || over < miss.over) {
        miss.over = over;
        miss.example = fmt::format("{}: rank {} over by {}", formatPlan(l.toPlan()), rank,
            formatBytes(Bytes(std::int64_t(over))));
    }
}

std::vector<RejectedGroup> RejectTally::groups() const
{
    std::vector<RejectedGroup> out;
    const RejectKind memoryKinds[2] = { RejectKind::StatesOverMemory, RejectKind::OverMemory };
    for (std::size_t k = 0; k < 2; ++k) {
        if (m_memory[k] > 0) {
            out.push_back({ { memoryKinds[k] }, describeRejection({ memoryKinds[k] }), m_memory[k],
                m_memoryMiss[k].example });
        }
    }
    for (const auto& [r, n] : m_counts) {
        out.push_back({ r, describeRejection(r), n, {} });
    }
    std::sort(out.begin(), out.end(), [](const RejectedGroup& a, const RejectedGroup& b) {
        return a.count != b.count ? a.count > b.count : a.reason < b.reason;
    });
    return out;
}

namespace {

bool sameStructure(const Layout& a, const Layout& b)
{
    return a.tp == b.tp && a.pp == b.pp && a.ep == b.ep && a.etp == b.etp && a.dp == b.dp
        && a.cp == b.cp;
}

bool better(const PlannedLayout& a, const PlannedLayout& b)
{
    return a.tokensPerSecond != b.tokensPerSecond ? a.tokensPerSecond > b.tokensPerSecond
                                                  : a.maxMemory < b.maxMemory;
}

} // namespace

TopList::TopList(int n, bool distinct)
    : m_n(std::max(1, n))
    , m_distinct(distinct)
{
}

void TopList::offer(PlannedLayout&& p)
{
    if (m_distinct) {
        // One entry per parallel structure: the best of its micro-batch, ZeRO, recompute, split
        // and interleaving variants.
        for (auto& item : m_items) {
            if (sameStructure(item.layout, p.layout)) {
                if (better(p, item)) {
                    item = std::move(p);
                }
                return;
            }
        }
    }
    m_items.push_back(std::move(p));
    if (m_items.size() >= std::size_t(m_n) * 4) {
        trim();
    }
}

std::vector<PlannedLayout> TopList::take()
{
    trim();
    return std::move(m_items);
}

void TopList::trim()
{
    std::sort(m_items.begin(), m_items.end(), better);
    if (m_items.size() > std::size_t(m_n)) {
        m_items.resize(std::size_t(m_n));
    }
    if (m_items.size() == std::size_t(m_n)) {
        m_floor = m_items.back().tokensPerSecond;
    }
}

std::vector<int> candidates(const std::vector<int>& wanted, int world)
{
    std::vector<int> out;
    for (const int d : divisorsOf(world)) {
        if (wanted.empty() || std::find(wanted.begin(), wanted.end(), d) != wanted.end()) {
            out.push_back(d);
        }
    }
    return out;
}

std::vector<Split> splitsFor(const ModelSummary& m, int pp, bool uneven)
{
    std::vector<Split> out;
    for (const auto policy : { StageSplit::Balanced, StageSplit::LightEnds }) {
        if (policy == StageSplit::LightEnds && (!uneven || pp == 1)) {
            continue;
        }
        const auto counts = splitStages(m.numLayers, pp, policy);
        if (counts.empty()) {
            continue;
        }
        Split s { policy, { 0 } };
        for (const int c : counts) {
            s.start.push_back(s.start.back() + c);
        }
        if (std::none_of(
                out.begin(), out.end(), [&](const Split& o) { return o.start == s.start; })) {
            out.push_back(std::move(s));
        }
    }
    return out;
}

int minStageLayers(const std::vector<int>& start)
{
    int smallest = std::numeric_limits<int>::max();
    for (std::size_t s = 0; s + 1 < start.size(); ++s) {
        smallest = std::min(smallest, start[s + 1] - start[s]);
    }
    return smallest;
}

} // namespace day0::plan::detail
