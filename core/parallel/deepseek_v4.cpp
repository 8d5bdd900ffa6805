// DeepSeek-V4 on the sharded executor, split as DeepSeek's reference inference code splits it
// (inference/model.py of DeepSeek-V4-Flash, read for its layout: Attention's n_local_heads =
// n_heads / world_size and n_local_groups = n_groups / world_size):
// - attention: wq_a, q_norm, the one K=V head (wkv, kv_norm), the compressors and the Lightning
//   indexer replicated (each rank keeps the whole K=V cache and pools every entry, so every rank
//   selects the same entries); wq_b and attn_sink by heads; wo_a by output group (the groups of
//   the rank's heads), wo_b row-parallel, reduced over TP;
// - MoE: the router (sqrtsoftplus, hash-routed layers' tid2eid) replicated, the routed experts
//   over EP (and ETP), the shared expert TP-sliced;
// - hyper-connections replicated: every rank mixes the streams of the rows it holds (all rows,
//   or with sequence parallelism its share of the tokens), which carry hc_mult × hidden floats
//   per row between stages.
// The block's pieces are the single-rank engine's (exec/deepseek_v4.h), run on this rank's
// slices, so a split that is not the engine's computation cannot pass for one.
#include "exec/null_taps.h"
#include "parallel/forward.h"

#include <fmt/format.h>

namespace day0::parallel::detail {

std::int64_t ParallelForward::hiddenWidth() const
{
    return m_spec.family == model::Family::DeepseekV4
        ? m_spec.hiddenSize * m_spec.hyperConnections->streams
        : m_spec.hiddenSize;
}

bool ParallelForward::needsStepIds() const { return m_spec.family == model::Family::DeepseekV4; }

Result<void> ParallelForward::deepseekV4Init()
{
    const auto& ca = *m_spec.compressedAttention;
    const int tp = m_layout.tp;
    // Each rank projects whole output groups of its own heads (n_local_groups).
    if (ca.oGroups % tp != 0) {
        return Error::badInput(
            fmt::format("--plan: tp={} does not divide the {} output groups of {} (o_groups)", tp,
                ca.oGroups, m_spec.name));
    }
    auto ropes = exec::detail::deepseekV4Ropes(m_spec);
    if (!ropes) {
        return ropes.error();
    }
    m_rope = std::move(ropes->first);
    m_compressRope = std::move(ropes->second);
    return success();
}

Result<void> ParallelForward::deepseekV4Layer(
    int layer, ShardCache& cache, std::vector<float>& hidden, std::int64_t n, std::int64_t start)
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t s = m_spec.hyperConnections->streams;
    const std::int64_t rows = localRows(n);
    const std::string p = layerPrefix(layer);
    std::vector<float> x(std::size_t(rows * h));
    std::vector<float> normed(std::size_t(rows * h));
    std::vector<float> partial(std::size_t(n * h));
    std::vector<float> branch;
    std::vector<float> gathered;
    exec::detail::NullTaps<float> taps; // the sharded forward captures nothing
    for (const bool attention : { true, false }) {
        const auto maps = exec::detail::deepseekV4HyperMaps<float>(m_weights,
            p + (attention ? ".hc_attn" : ".hc_ffn"), hidden.data(), rows, s, h, m_spec, false);
        exec::detail::deepseekV4Collapse<float>(maps, hidden.data(), rows, s, h, x.data());
        exec::rmsNorm<float>(x.data(),
            weight(p + (attention ? ".attn_norm.weight" : ".ffn_norm.weight")), normed.data(), rows,
            h, m_spec.normEps);
        auto in = allTokens(normed, n, gathered);
        if (!in) {
            return in.error();
        }
        partial.assign(std::size_t(n * h), 0.0F);
        if (attention) {
            exec::detail::deepseekV4Attention<float>(m_weights, m_spec, layer,
                cache.v4[std::size_t(layer)], *in, n, start, taps, partial.data());
        } else {
            DAY0_TRY(deepseekV4Moe(layer, *in, partial.data(), n));
        }
        DAY0_TRY(finishRowParallel(partial, n, {}, branch));
        exec::detail::deepseekV4Expand<float>(maps, hidden.data(), branch.data(), rows, s, h);
    }
    return success();
}

Result<void> ParallelForward::deepseekV4Moe(int layer, const float* x, float* out, std::int64_t n)
{
    const auto& moe = *m_spec.moe;
    const std::int64_t h = m_spec.hiddenSize;
    if (std::int64_t(m_stepIds.size()) != n) {
        return Error::internal(fmt::format(
            "rank {}: {} token ids for a step of {} tokens", m_coord.rank, m_stepIds.size(), n));
    }
    exec::Routing routing;
    routing.tokens = n;
    routing.k = moe.topK;
    exec::detail::deepseekV4Route<float>(
        m_weights, m_spec, layer, m_stepIds, x, n, routing.experts, routing.weights);
    std::vector<float> acc(std::size_t(n * h), 0.0F);
    DAY0_TRY(dispatchExperts(layer, routing, n, x, h, acc.data()));
    // The shared expert: w1 / w3 rows and w2 columns of this TP rank, a partial sum.
    std::vector<float> shared(std::size_t(n * h));
    exec::detail::deepseekV4ClampedMlp<float>(m_weights, layerPrefix(layer) + ".ffn.shared_experts",
        x, shared.data(), n, h, moe.sharedIntermediate / m_layout.tp, m_spec.swigluLimit);
    exec::addInPlace(acc.data(), shared.data(), n * h);
    std::copy(acc.begin(), acc.end(), out);
    return success();
}

std::vector<float> ParallelForward::deepseekV4Collapse(
    const std::vector<float>& hidden, std::int64_t n) const
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t s = m_spec.hyperConnections->streams;
    const std::int64_t rows = localRows(n);
    const auto maps = exec::detail::deepseekV4HyperMaps<float>(
        m_weights, "hc_head", hidden.data(), rows, s, h, m_spec, true);
    std::vector<float> x(std::size_t(rows * h));
    exec::detail::deepseekV4Collapse<float>(maps, hidden.data(), rows, s, h, x.data());
    return x;
}

} // namespace day0::parallel::detail
