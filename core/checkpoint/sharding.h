#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/manifest.h"
#include "model/layer_graph.h"
#include "plan/parallel_plan.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// The parallel degrees of a plan::ParallelPlan that decide how weights are split (CP/SP, ZeRO,
/// recompute and batch sizes do not change which weights a rank holds; CP ranks hold what their
/// TP peer holds, so they are not written separately).
struct ShardLayout {
    int tp = 1; ///< tensor parallel
    int pp = 1; ///< pipeline stages
    int ep = 1; ///< expert parallel, carved out of dp × tp of each stage
    int dp = 1; ///< data parallel replicas
    /// Context parallel, as the plan gave it. CP ranks hold what their TP peer holds, so shard
    /// writes no pieces for them; the executor does not run CP and refuses cp > 1.
    int cp = 1;
    /// Expert tensor parallel; 0 (not given): plan::defaultExpertTp for inference, the same
    /// default the memory estimate and the planner apply (shardLayoutFromPlan of a training plan
    /// sets Megatron's etp = tp explicitly).
    int etpGiven = 0;
    std::vector<std::int64_t> stageLayerCounts; ///< explicit decoder layers per stage, or empty
    plan::StageSplit split = plan::StageSplit::Balanced;
    /// Sequence parallelism (Megatron): outside the tensor-parallel regions (norms, residual
    /// stream, pipeline sends) each TP rank holds a contiguous share of the tokens; the weights
    /// are sharded as without it.
    bool sp = false;

    /// Ranks that hold weights: pp × dp × tp.
    [[nodiscard]] int worldSize() const { return pp * dp * tp; }
    /// Expert tensor parallel size with the default applied.
    [[nodiscard]] int etp() const
    {
        return etpGiven > 0 ? etpGiven : plan::defaultExpertTp(plan::Mode::Infer, tp, ep);
    }
    /// Expert data parallel: dp × tp / (ep × etp) replicas of each expert slice.
    [[nodiscard]] int edp() const { return dp * tp / (ep * etp()); }
};

/// The layout of a plan (dp 0, "the rest of the cluster", counts as 1: shard writes one replica
/// unless dp is given), with the defaults of `mode` for what the plan leaves out. ep × etp must
/// divide dp × tp.
Result<ShardLayout> shardLayoutFromPlan(
    const plan::ParallelPlan& plan, plan::Mode mode = plan::Mode::Infer);

/// Parses a plan string with plan::parsePlan ("tp=4,pp=2,ep=4", layers=15/16/..., split=...,
/// etp=...) and takes its layout.
Result<ShardLayout> parseShardLayout(const std::string& text);

/// Where one rank sits, in plan::RankLayout's order (the one the topology view draws):
/// rank = (stage × dp + dpRank) × tp + tpRank (TP fastest, then DP, then PP, as Megatron orders
/// them). Inside a stage the flat index dpRank × tp + tpRank splits into
/// (edpRank × ep + epRank) × etp + etpRank: ETP fastest, then EP, then expert-DP.
struct RankCoord {
    int rank = 0;
    int stage = 0;
    int dpRank = 0;
    int tpRank = 0;
    int epRank = 0;
    int etpRank = 0;
    int edpRank = 0;
};

/// The coordinates of `rank`.
RankCoord rankCoord(const ShardLayout& layout, int rank);

/// Half-open ranges [first, second) along one dimension; a rank's piece concatenates them.
struct DimSlice {
    int dim = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
};

/// The part of one tensor a rank holds: the dims not listed are whole. An empty list means the
/// whole tensor (replicated).
struct TensorSlice {
    std::vector<DimSlice> dims;
    [[nodiscard]] bool whole() const { return dims.empty(); }
};

/// The split rule of one tensor for one rank, or nullopt when the rank does not hold it (another
/// pipeline stage, another expert range). Rules: column-parallel along dim 0 (fused qkv as three
/// parts, packed gate_up along the last dim per half), row-parallel along dim 1 (biases
/// replicated), vocab-parallel rows in ceil(V/tp) ranges, replicated as a whole; K/V heads
/// replicated as head r / (tp / kv) when tp exceeds the KV heads; routed experts in contiguous EP
/// ranges (the first ranks take the remainder) and split by etp inside; block-FP8 scales take
/// the blocks that cover their weight's slice. Errors name the tensor when a dimension does not
/// divide.
Result<std::optional<TensorSlice>> sliceFor(const model::LayerGraph& graph,
    const model::TensorSpec& tensor, const ShardLayout& layout, const RankCoord& rank);

/// Decoder layers [first, last) of pipeline stage `stage`: the explicit per-stage counts when the
/// layout has them, else plan::splitStages with the layout's split policy.
std::pair<std::int64_t, std::int64_t> stageLayers(
    const ShardLayout& layout, std::int64_t layers, int stage);

/// Routed experts [first, last) of EP rank `epRank`.
std::pair<std::int64_t, std::int64_t> expertRange(std::int64_t experts, int ep, int epRank);

/// Shape of a slice of a tensor of shape `shape`.
std::vector<std::int64_t> sliceShape(
    const std::vector<std::int64_t>& shape, const TensorSlice& slice);

/// Copies the slice out of a row-major tensor (`elemSize` bytes per element) into `out`.
void extractSlice(std::span<const std::byte> src, const std::vector<std::int64_t>& shape,
    std::size_t elemSize, const TensorSlice& slice, std::span<std::byte> out);
/// Writes a piece back into the whole tensor (inverse of extractSlice).
void scatterSlice(std::span<const std::byte> piece, const std::vector<std::int64_t>& shape,
    std::size_t elemSize, const TensorSlice& slice, std::span<std::byte> whole);

/// What shardCheckpoint wrote.
struct ShardSummary {
    ShardLayout layout;
    int ranks = 0;
    std::size_t tensors = 0; ///< source tensors
    std::uint64_t bytes = 0; ///< bytes written over all ranks
    std::vector<std::string> files;
};

/// Splits the safetensors checkpoint at `src` (which needs its config.json) for `layout`: one
/// rank-NNNNN.safetensors per rank holding that rank's slices under the HF names, plan.json
/// (layout, rank coordinates and every tensor's per-rank slices), a copy of config.json and a
/// manifest, written atomically.
Result<ShardSummary> shardCheckpoint(const std::filesystem::path& src,
    const std::filesystem::path& dst, const ShardLayout& layout, const HashOptions& hash,
    bool replace, Progress& progress, std::stop_token stop);

/// Reads plan.json of a sharded output folder.
Result<nlohmann::json> readShardPlan(const std::filesystem::path& shardedDir);

/// Rebuilds tensor `name` of a sharded output folder from the ranks' pieces as `plan` (from
/// readShardPlan) describes them; fails if the pieces do not cover it or overlapping pieces
/// disagree.
Result<std::vector<std::byte>> reassembleTensor(
    const std::filesystem::path& shardedDir, const nlohmann::json& plan, const std::string& name);

} // namespace day0::checkpoint
