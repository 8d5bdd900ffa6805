#pragma once

// Internals of the planner: the rejection tally, the top list and the stage-split candidates.

#include "plan/layout.h"
#include "plan/planner.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace day0::plan::detail {

/// Hash of a Rejection (kind and numbers).
struct RejectionHash {
    std::size_t operator()(const Rejection& r) const noexcept;
};

/// Counts rejections by reason and keeps the closest miss of each memory reason.
class RejectTally {
public:
    /// Adds `n` layouts rejected for `r`.
    void add(const Rejection& r, std::int64_t n);
    /// Adds one layout whose most loaded rank is `over` bytes above the capacity.
    void addMemory(RejectKind kind, const Layout& l, int rank, double over);
    /// Every reason with its count, most common first.
    [[nodiscard]] std::vector<RejectedGroup> groups() const;

private:
    struct Miss {
        double over = 0;
        std::string example;
    };
    std::unordered_map<Rejection, std::int64_t, RejectionHash> m_counts;
    std::int64_t m_memory[2] = { 0, 0 }; // StatesOverMemory, OverMemory: too frequent to hash
    Miss m_memoryMiss[2];
};

/// Keeps the N fastest layouts without sorting everything; with `distinct`, one per parallel
/// structure (tp, pp, ep, etp, dp, cp).
class TopList {
public:
    TopList(int n, bool distinct);
    /// True if a layout with this throughput would be kept (so the caller builds it).
    [[nodiscard]] bool wants(double tokensPerSecond) const { return tokensPerSecond > m_floor; }
    /// Offers a layout; it is kept if it is among the N best.
    void offer(PlannedLayout&& p);
    /// The kept layouts, fastest first.
    std::vector<PlannedLayout> take();

private:
    void trim();
    int m_n;
    bool m_distinct = true;
    double m_floor = -1.0;
    std::vector<PlannedLayout> m_items;
};

/// Divisors of `world` that are in `wanted` (all divisors when `wanted` is empty).
std::vector<int> candidates(const std::vector<int>& wanted, int world);

/// A stage split the planner tries.
struct Split {
    StageSplit policy;
    std::vector<int> start; ///< pp + 1 stage boundaries
};

/// The distinct splits of the model's layers over pp stages (balanced, and light ends when
/// `uneven`).
std::vector<Split> splitsFor(const ModelSummary& m, int pp, bool uneven);

/// Layers on the smallest stage of a split.
int minStageLayers(const std::vector<int>& start);

} // namespace day0::plan::detail
