#pragma once

#include "plan/layout.h"

#include <string>
#include <vector>

namespace day0::plan {

/// The process groups of a layout.
enum class GroupKind {
    Tensor, ///< TP: ranks that split each matrix
    Context, ///< CP: ranks that split the sequence for attention
    Data, ///< DP: replicas of the dense weights
    Pipeline, ///< PP: the stages one micro-batch passes through
    ExpertTensor, ///< ETP: ranks that split each expert's matrices
    Expert, ///< EP: ranks that hold different experts
    ExpertData, ///< EDP: replicas of the expert weights
};

/// "tp", "cp", "dp", "pp", "etp", "ep", "edp".
std::string groupKindName(GroupKind kind);

/// Position of a rank in every parallel dimension.
struct RankCoordinates {
    int tp = 0;
    int cp = 0;
    int dp = 0;
    int pp = 0;
    int etp = 0;
    int ep = 0;
    int edp = 0;
};

/// Rank ↔ device mapping and group membership, in Megatron-LM's default order "tp-cp-ep-dp-pp":
/// for dense weights rank = tp + TP·(cp + CP·(dp + DP·pp)), TP fastest and PP slowest; for
/// experts rank = etp + ETP·(ep + EP·(edp + EDP·pp)). Rank r runs on device r (node r / GPUs per
/// node), so TP groups are consecutive devices inside a node and PP groups are the farthest
/// apart. Cheap to copy; thread-safe to read.
class RankLayout {
public:
    explicit RankLayout(const Layout& layout);
    RankLayout(int tp, int cp, int dp, int pp, int ep, int etp);

    [[nodiscard]] int worldSize() const { return m_tp * m_cp * m_dp * m_pp; }
    /// Coordinates of a rank in [0, worldSize()).
    [[nodiscard]] RankCoordinates coordinates(int rank) const;
    /// The rank at dense coordinates.
    [[nodiscard]] int rankOf(int tp, int cp, int dp, int pp) const;
    /// Ranks per group of a kind.
    [[nodiscard]] int groupSize(GroupKind kind) const;
    /// Distance between consecutive members of a group.
    [[nodiscard]] int stride(GroupKind kind) const;
    /// Number of groups of a kind (worldSize() / groupSize()).
    [[nodiscard]] int numGroups(GroupKind kind) const { return worldSize() / groupSize(kind); }
    /// Index of the group of `kind` that holds `rank`, in [0, numGroups(kind)): what the topology
    /// view colours by.
    [[nodiscard]] int groupIndex(GroupKind kind, int rank) const;
    /// The ranks of the group of `kind` that holds `rank`, ascending.
    [[nodiscard]] std::vector<int> group(GroupKind kind, int rank) const;
    /// Every group of a kind, ordered by groupIndex.
    [[nodiscard]] std::vector<std::vector<int>> groups(GroupKind kind) const;
    /// First rank of pipeline stage `stage` (the stage's representative).
    [[nodiscard]] int firstRankOfStage(int stage) const { return stage * m_tp * m_cp * m_dp; }

private:
    int m_tp, m_cp, m_dp, m_pp, m_ep, m_etp, m_edp;
};

/// How a group of `size` ranks spaced `stride` apart sits on fast-link domains of `domainSize`
/// devices: members that share a domain and domains it spans (for the group at rank 0).
struct GroupSpan {
    int perDomain = 1;
    int domains = 1;
};
GroupSpan groupSpan(int stride, int size, int domainSize);

} // namespace day0::plan
