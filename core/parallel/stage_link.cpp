// The messages between pipeline stages (parallel/stage_link.h).
#include "parallel/stage_link.h"

#include "parallel/forward.h"

#include <fmt/format.h>

namespace day0::parallel::detail {

Result<OwnedRankGroups> splitRankGroups(
    comm::Communicator& world, const checkpoint::ShardLayout& l, const checkpoint::RankCoord& c)
{
    const int replica = c.stage * l.dp + c.dpRank;
    auto tp = world.split(replica, c.tpRank, fmt::format("tp{}", replica));
    if (!tp) {
        return tp.error();
    }
    auto expert
        = world.split(c.stage, c.dpRank * l.tp + c.tpRank, fmt::format("expert{}", c.stage));
    if (!expert) {
        return expert.error();
    }
    return OwnedRankGroups { std::move(*tp), std::move(*expert) };
}

Result<void> receiveStageInput(ParallelForward& forward, comm::Communicator& world, std::int64_t n,
    int from, std::vector<float>& hidden, StepIds ids)
{
    hidden.resize(std::size_t(forward.localRows(n) * forward.hiddenWidth()));
    DAY0_TRY(world.recv(hidden.data(), hidden.size(), DType::F32, from, kTagStageHidden));
    // Gemma-4's per-layer inputs, computed once by the first stage.
    if (const std::int64_t count = forward.perLayerInputFloats(n); count > 0) {
        auto& inputs = forward.perLayerInputs();
        inputs.resize(std::size_t(count));
        DAY0_TRY(world.recv(inputs.data(), inputs.size(), DType::F32, from, kTagStagePerLayer));
    }
    if (ids == StepIds::Send && forward.needsStepIds()) {
        auto& stepIds = forward.stepIds();
        stepIds.resize(std::size_t(n));
        DAY0_TRY(world.recv(stepIds.data(), stepIds.size(), DType::I64, from, kTagStageIds));
    }
    return success();
}

Result<void> sendStageOutput(ParallelForward& forward, comm::Communicator& world, std::int64_t n,
    int to, const std::vector<float>& hidden, StepIds ids)
{
    DAY0_TRY(world.send(hidden.data(), hidden.size(), DType::F32, to, kTagStageHidden));
    if (forward.perLayerInputFloats(n) > 0) {
        const auto& inputs = forward.perLayerInputs();
        DAY0_TRY(world.send(inputs.data(), inputs.size(), DType::F32, to, kTagStagePerLayer));
    }
    if (ids == StepIds::Send && forward.needsStepIds()) {
        const auto& stepIds = forward.stepIds();
        DAY0_TRY(world.send(stepIds.data(), stepIds.size(), DType::I64, to, kTagStageIds));
    }
    return success();
}

} // namespace day0::parallel::detail
