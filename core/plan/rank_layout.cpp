#include "plan/rank_layout.h"

#include <algorithm>

namespace day0::plan {

std::string groupKindName(GroupKind kind)
{
    switch (kind) {
    case GroupKind::Tensor:
        return "tp";
    case GroupKind::Context:
        return "cp";
    case GroupKind::Data:
        return "dp";
    case GroupKind::Pipeline:
        return "pp";
    case GroupKind::ExpertTensor:
        return "etp";
    case GroupKind::Expert:
        return "ep";
    case GroupKind::ExpertData:
        return "edp";
    }
    return "?";
}

RankLayout::RankLayout(const Layout& layout)
    : RankLayout(layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
{
}

RankLayout::RankLayout(int tp, int cp, int dp, int pp, int ep, int etp)
    : m_tp(std::max(1, tp))
    , m_cp(std::max(1, cp))
    , m_dp(std::max(1, dp))
    , m_pp(std::max(1, pp))
    , m_ep(std::max(1, ep))
    , m_etp(std::max(1, etp))
{
    const int perStage = m_tp * m_cp * m_dp;
    m_edp = std::max(1, perStage / (m_ep * m_etp));
}

RankCoordinates RankLayout::coordinates(int rank) const
{
    RankCoordinates c;
    c.tp = rank % m_tp;
    c.cp = (rank / m_tp) % m_cp;
    c.dp = (rank / (m_tp * m_cp)) % m_dp;
    c.pp = rank / (m_tp * m_cp * m_dp);
    c.etp = rank % m_etp;
    c.ep = (rank / m_etp) % m_ep;
    c.edp = (rank / (m_etp * m_ep)) % m_edp;
    return c;
}

int RankLayout::rankOf(int tp, int cp, int dp, int pp) const
{
    return tp + m_tp * (cp + m_cp * (dp + m_dp * pp));
}

int RankLayout::groupSize(GroupKind kind) const
{
    switch (kind) {
    case GroupKind::Tensor:
        return m_tp;
    case GroupKind::Context:
        return m_cp;
    case GroupKind::Data:
        return m_dp;
    case GroupKind::Pipeline:
        return m_pp;
    case GroupKind::ExpertTensor:
        return m_etp;
    case GroupKind::Expert:
        return m_ep;
    case GroupKind::ExpertData:
        return m_edp;
    }
    return 1;
}

int RankLayout::stride(GroupKind kind) const
{
    switch (kind) {
    case GroupKind::Tensor:
    case GroupKind::ExpertTensor:
        return 1;
    case GroupKind::Context:
        return m_tp;
    case GroupKind::Data:
        return m_tp * m_cp;
    case GroupKind::Pipeline:
        return m_tp * m_cp * m_dp;
    case GroupKind::Expert:
        return m_etp;
    case GroupKind::ExpertData:
        return m_etp * m_ep;
    }
    return 1;
}

int RankLayout::groupIndex(GroupKind kind, int rank) const
{
    // A group is every rank that agrees on all coordinates but `kind`'s: drop that digit from
    // the mixed-radix number.
    const int s = stride(kind);
    const int n = groupSize(kind);
    return (rank % s) + s * (rank / (s * n));
}

std::vector<int> RankLayout::group(GroupKind kind, int rank) const
{
    const int s = stride(kind);
    const int n = groupSize(kind);
    const int base = (rank % s) + (rank / (s * n)) * (s * n);
    std::vector<int> members(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        members[std::size_t(i)] = base + i * s;
    }
    return members;
}

std::vector<std::vector<int>> RankLayout::groups(GroupKind kind) const
{
    std::vector<std::vector<int>> out(std::size_t(numGroups(kind)));
    for (int r = 0; r < worldSize(); ++r) {
        auto& g = out[std::size_t(groupIndex(kind, r))];
        g.push_back(r);
    }
    return out;
}

GroupSpan groupSpan(int stride, int size, int domainSize)
{
    GroupSpan span;
    if (size <= 1) {
        return span;
    }
    span.perDomain = std::min(size, (domainSize - 1) / std::max(1, stride) + 1);
    span.domains = (size + span.perDomain - 1) / span.perDomain;
    return span;
}

} // namespace day0::plan
