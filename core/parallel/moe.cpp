// Mixture-of-experts of the sharded forward: the router runs replicated, each TP rank dispatches
// the tokens it owns (token t belongs to TP rank t mod tp) to the ranks holding their experts
// (contiguous EP ranges, each expert split over ETP ranks) with all-to-all(v), and combines the
// returned partial outputs in expert order, as the single-rank engine sums them.
#include "parallel/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::parallel::detail {

namespace {

/// Variable all-to-all of `width`-element rows: rows for rank g are send[g]; returns what every
/// rank sent here, concatenated in rank order (a plain copy on a group of one).
template <typename V>
Result<std::vector<V>> exchangeRows(comm::Communicator& group,
    const std::vector<std::vector<V>>& send, const std::vector<std::size_t>& recvRows,
    std::int64_t width, DType type)
{
    const auto g = std::size_t(group.size());
    std::vector<std::size_t> sendCounts(g);
    std::vector<std::size_t> sendDispls(g);
    std::vector<std::size_t> recvCounts(g);
    std::vector<std::size_t> recvDispls(g);
    std::vector<V> flat;
    std::size_t total = 0;
    for (std::size_t r = 0; r < g; ++r) {
        sendDispls[r] = flat.size();
        sendCounts[r] = send[r].size();
        flat.insert(flat.end(), send[r].begin(), send[r].end());
        recvDispls[r] = total;
        recvCounts[r] = recvRows[r] * std::size_t(width);
        total += recvCounts[r];
    }
    if (g == 1) {
        return flat;
    }
    std::vector<V> recv(std::max<std::size_t>(total, 1));
    flat.resize(std::max<std::size_t>(flat.size(), 1));
    DAY0_TRY(group.allToAllV(
        flat.data(), sendCounts, sendDispls, recv.data(), recvCounts, recvDispls, type));
    recv.resize(total);
    return recv;
}

} // namespace

exec::detail::LayerNames ParallelForward::moeNames(int layer) const
{
    if (m_spec.family == model::Family::Gemma4) {
        // Gemma4TextRouter and Gemma4TextExperts sit on the layer itself: router.proj, and
        // experts.{e}.gate_proj / up_proj / down_proj (unpacked from experts.gate_up_proj).
        exec::detail::LayerNames names;
        names.prefix = layerPrefix(layer);
        names.ffn = names.prefix;
        names.router = names.prefix + ".router.proj";
        names.expertGate = "gate_proj";
        names.expertUp = "up_proj";
        names.expertDown = "down_proj";
        return names;
    }
    if (m_spec.family == model::Family::DeepseekV4) {
        // DeepSeek's native names: layers.{i}.ffn.gate, experts.{e}.w1 (gate) / w3 (up) / w2.
        exec::detail::LayerNames names;
        names.prefix = layerPrefix(layer);
        names.ffn = names.prefix + ".ffn";
        names.router = names.ffn + ".gate";
        names.expertGate = "w1";
        names.expertUp = "w3";
        names.expertDown = "w2";
        return names;
    }
    if (m_spec.family != model::Family::NemotronH) {
        return exec::detail::layerNames(m_spec, layer);
    }
    // NemotronHMoE (transformers modeling_nemotron_h.py): the block is the layer's mixer, its
    // router `gate` with e_score_correction_bias, relu² experts of up/down only, one shared
    // relu² MLP `shared_experts`.
    exec::detail::LayerNames names;
    names.prefix = layerPrefix(layer);
    names.ffn = names.prefix + ".mixer";
    names.router = names.ffn + ".gate";
    names.scoreBias = names.router + ".e_score_correction_bias";
    names.expertUp = "up_proj";
    names.expertDown = "down_proj";
    names.shared = names.ffn + ".shared_experts";
    return names;
}

Result<void> ParallelForward::expertMlpPartial(const std::string& module,
    const exec::detail::LayerNames& names, const float* x, float* out, std::int64_t n,
    std::int64_t width, std::int64_t inter)
{
    if (m_spec.family == model::Family::DeepseekV4) {
        // DeepSeek-V4's clamped SwiGLU is elementwise: each ETP rank's slice stays local.
        exec::detail::deepseekV4ClampedMlp<float>(
            m_weights, module, x, out, n, width, inter, m_spec.swigluLimit);
        return success();
    }
    if (!m_spec.moe->gatedExperts) {
        return relu2Partial(module, x, out, n, inter, width);
    }
    return mlpPartial(
        module, names.expertGate, names.expertUp, names.expertDown, x, out, n, inter, width);
}

Result<void> ParallelForward::moe(int layer, const float* x, float* out, std::int64_t n)
{
    const exec::detail::LayerNames names = moeNames(layer);
    const auto& moe = *m_spec.moe;
    const std::int64_t h = m_spec.hiddenSize;
    std::vector<float> acc(std::size_t(n * h), 0.0F);
    if (moe.latentSize > 0) {
        // Nemotron 3 Super (NemotronHMoE with moe_latent_size): the experts read
        // fc1_latent_proj(x) and their weighted sum passes fc2_latent_proj; both replicated.
        // Each TP rank's latent sum is non-zero only on the tokens it owns, so fc2 of it is that
        // rank's share of the TP reduction; fc2's bias joins on TP rank 0 only. Kimi-K3's latent
        // MoE is the same with routed_expert_down_proj / routed_expert_up_proj and, with
        // latent_moe_use_norm, routed_expert_norm on each token's whole sum (on its owner; the
        // other ranks' zero rows stay zero).
        const bool kimi = m_spec.family == model::Family::KimiLinear;
        const std::string down
            = names.ffn + (kimi ? ".routed_expert_down_proj" : ".fc1_latent_proj");
        const std::string up = names.ffn + (kimi ? ".routed_expert_up_proj" : ".fc2_latent_proj");
        const std::int64_t width = moe.latentSize;
        std::vector<float> latent(std::size_t(n * width));
        DAY0_TRY(linearOp(down, x, latent.data(), n, h, width));
        std::vector<float> sum(std::size_t(n * width), 0.0F);
        DAY0_TRY(routedExperts(layer, x, n, latent.data(), width, sum.data()));
        if (kimi && moe.latentNorm) {
            m_ops.rmsNorm(sum.data(), weight(names.ffn + ".routed_expert_norm.weight"), sum.data(),
                n, width, m_spec.normEps, exec::PrecisionMode::F32);
        }
        DAY0_TRY(linearOp(up, sum.data(), acc.data(), n, width, h, m_coord.tpRank != 0));
    } else {
        DAY0_TRY(routedExperts(layer, x, n, x, h, acc.data()));
    }
    if (!names.shared.empty()) {
        // Shared experts are TP-sliced like a dense MLP; their partial sums join the routed
        // output (non-zero only on the owning TP rank) in one all-reduce. The row-parallel bias
        // is added on TP rank 0 only, so the reduction adds it once.
        std::vector<float> shared(std::size_t(n * h));
        if (m_spec.family == model::Family::NemotronH) {
            DAY0_TRY(relu2Partial(
                names.shared, x, shared.data(), n, moe.sharedIntermediate / m_layout.tp));
        } else {
            DAY0_TRY(mlpPartial(names.shared, "gate_proj", "up_proj", "down_proj", x, shared.data(),
                n, moe.sharedIntermediate / m_layout.tp));
        }
        if (m_coord.tpRank == 0) {
            DAY0_TRY(addBias(names.shared + ".down_proj", shared.data(), n, h));
        }
        if (moe.sharedExpertGate) {
            std::vector<float> gate(static_cast<std::size_t>(n));
            DAY0_TRY(linearOp(names.ffn + ".shared_expert_gate", x, gate.data(), n, h, 1));
            for (std::int64_t t = 0; t < n; ++t) {
                const float s = 1.0F / (1.0F + std::exp(-gate[std::size_t(t)]));
                for (std::int64_t c = 0; c < h; ++c) {
                    shared[std::size_t(t * h + c)] *= s;
                }
            }
        }
        exec::addInPlace(acc.data(), shared.data(), n * h);
    }
    // The caller reduces over the TP group (each token's routed output lives on its owner).
    std::copy(acc.begin(), acc.end(), out);
    return success();
}

Result<void> ParallelForward::routedExperts(
    int layer, const float* x, std::int64_t n, const float* rowsIn, std::int64_t width, float* acc)
{
    const exec::detail::LayerNames names = moeNames(layer);
    const std::int64_t e = m_spec.moe->numExperts;
    std::vector<float> logits(std::size_t(n * e));
    DAY0_TRY(linearOp(names.router, x, logits.data(), n, m_spec.hiddenSize, e));
    exec::Routing routing = m_ops.route(logits.data(), n, m_router, weight(names.scoreBias));
    if (m_spec.family == model::Family::Gemma4) {
        // Gemma4TextRouter: each chosen weight times its expert's per_expert_scale.
        const float* perExpert = weight(names.prefix + ".router.per_expert_scale");
        for (std::size_t i = 0; i < routing.experts.size(); ++i) {
            routing.weights[i] *= double(perExpert[routing.experts[i]]);
        }
    }
    return dispatchExperts(layer, routing, n, rowsIn, width, acc);
}

Result<void> ParallelForward::dispatchExperts(int layer, const exec::Routing& routing,
    std::int64_t n, const float* rowsIn, std::int64_t width, float* acc)
{
    const exec::detail::LayerNames names = moeNames(layer);
    const auto& moe = *m_spec.moe;
    const std::int64_t e = moe.numExperts;
    const int ep = m_layout.ep;
    const int etp = m_layout.etp();
    comm::Communicator& group = *m_groups.expert;
    const auto g = std::size_t(group.size());
    std::vector<int> owner(static_cast<std::size_t>(e));
    for (int r = 0; r < ep; ++r) {
        const auto [first, last] = checkpoint::expertRange(e, ep, r);
        for (std::int64_t ex = first; ex < last; ++ex) {
            owner[std::size_t(ex)] = r;
        }
    }

    // Dispatch: every (owned token, chosen expert) goes to the ETP ranks of the expert's EP rank
    // in this rank's expert-DP replica.
    struct Entry {
        std::int64_t token;
        std::int64_t expert;
        double weight;
        std::size_t dest0; ///< first of the etp destination ranks
        std::size_t slot; ///< row index in each destination's list
    };
    std::vector<Entry> entries;
    std::vector<std::vector<float>> sendRows(g);
    std::vector<std::vector<std::int64_t>> sendExperts(g);
    for (std::int64_t t = m_coord.tpRank; t < n; t += m_layout.tp) {
        for (std::int64_t j = 0; j < routing.k; ++j) {
            const std::int64_t ex = routing.experts[std::size_t(t * routing.k + j)];
            const auto dest0 = std::size_t((m_coord.edpRank * ep + owner[std::size_t(ex)]) * etp);
            entries.push_back({ t, ex, routing.weights[std::size_t(t * routing.k + j)], dest0,
                sendExperts[dest0].size() });
            for (int q = 0; q < etp; ++q) {
                sendRows[dest0 + std::size_t(q)].insert(sendRows[dest0 + std::size_t(q)].end(),
                    rowsIn + t * width, rowsIn + (t + 1) * width);
                sendExperts[dest0 + std::size_t(q)].push_back(ex);
            }
        }
    }
    std::vector<std::int64_t> sendCount(g);
    for (std::size_t r = 0; r < g; ++r) {
        sendCount[r] = std::int64_t(sendExperts[r].size());
    }
    std::vector<std::int64_t> recvCount = sendCount;
    if (g > 1) {
        DAY0_TRY(group.allToAll(sendCount.data(), recvCount.data(), 1, DType::I64));
    }
    std::vector<std::size_t> recvRows(g);
    std::size_t received = 0;
    for (std::size_t r = 0; r < g; ++r) {
        recvRows[r] = std::size_t(recvCount[r]);
        received += recvRows[r];
    }
    auto rows = exchangeRows<float>(group, sendRows, recvRows, width, DType::F32);
    if (!rows) {
        return rows.error();
    }
    auto experts = exchangeRows<std::int64_t>(group, sendExperts, recvRows, 1, DType::I64);
    if (!experts) {
        return experts.error();
    }

    // Compute this rank's slice of each local expert over the rows it received.
    const std::int64_t inter = moe.expertIntermediate / etp;
    std::vector<float> results(received * std::size_t(width), 0.0F);
    const auto [first, last] = checkpoint::expertRange(e, ep, m_coord.epRank);
    std::vector<float> in;
    std::vector<float> outRows;
    for (std::int64_t ex = first; ex < last; ++ex) {
        std::vector<std::size_t> mine;
        for (std::size_t i = 0; i < received; ++i) {
            if ((*experts)[i] == ex) {
                mine.push_back(i);
            }
        }
        if (mine.empty()) {
            continue;
        }
        const auto m = std::int64_t(mine.size());
        in.resize(std::size_t(m * width));
        outRows.resize(std::size_t(m * width));
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(rows->begin() + std::int64_t(mine[std::size_t(i)]) * width, width,
                in.begin() + i * width);
        }
        const std::string module = fmt::format("{}.experts.{}", names.ffn, ex);
        DAY0_TRY(expertMlpPartial(module, names, in.data(), outRows.data(), m, width, inter));
        if (m_coord.etpRank == 0) {
            DAY0_TRY(addBias(module + "." + names.expertDown, outRows.data(), m, width));
        }
        for (std::int64_t i = 0; i < m; ++i) {
            std::copy_n(outRows.begin() + i * width, width,
                results.begin() + std::int64_t(mine[std::size_t(i)]) * width);
        }
    }

    // Combine: results travel back the way the rows came; sum the ETP partials, then weight and
    // add each token's experts in ascending expert order.
    std::vector<std::vector<float>> back(g);
    std::size_t offset = 0;
    for (std::size_t r = 0; r < g; ++r) {
        back[r].assign(results.begin() + std::int64_t(offset * std::size_t(width)),
            results.begin() + std::int64_t((offset + recvRows[r]) * std::size_t(width)));
        offset += recvRows[r];
    }
    std::vector<std::size_t> returnRows(g);
    for (std::size_t r = 0; r < g; ++r) {
        returnRows[r] = std::size_t(sendCount[r]);
    }
    auto returned = exchangeRows<float>(group, back, returnRows, width, DType::F32);
    if (!returned) {
        return returned.error();
    }
    std::vector<std::size_t> base(g, 0);
    for (std::size_t r = 1; r < g; ++r) {
        base[r] = base[r - 1] + returnRows[r - 1];
    }
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.token != b.token ? a.token < b.token : a.expert < b.expert;
    });
    std::vector<float> sum(static_cast<std::size_t>(width));
    for (const Entry& en : entries) {
        std::fill(sum.begin(), sum.end(), 0.0F);
        for (int q = 0; q < etp; ++q) {
            const std::size_t r = en.dest0 + std::size_t(q);
            exec::addInPlace(
                sum.data(), returned->data() + (base[r] + en.slot) * std::size_t(width), width);
        }
        const auto w = float(en.weight);
        float* dst = acc + en.token * width;
        for (std::int64_t c = 0; c < width; ++c) {
            dst[c] += w * sum[std::size_t(c)];
        }
    }
    return success();
}

} // namespace day0::parallel::detail
