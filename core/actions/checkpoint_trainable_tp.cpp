// CheckpointTrainable::tensorParallel: one TP rank's share of a checkpoint for the trainer, cut
// with the sharded forward's slicing rules (checkpoint::sliceFor) and computed by the exec
// backward with its TP reductions (GradientOptions::tpSum).
#include "actions/checkpoint_trainable.h"
#include "checkpoint/sharding.h"
#include "comm/communicator.h"
#include "exec/forward.h"
#include "model/layer_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace day0::actions {

namespace {

/// `whole` divided by `tp`, or an error naming the config field it does not divide.
Result<std::int64_t> divided(
    std::int64_t whole, int tp, const char* field, const std::string& model)
{
    if (whole % tp != 0) {
        return Error::badInput(
            fmt::format("--plan: tp={} does not divide {}={} of {}", tp, field, whole, model));
    }
    return whole / tp;
}

/// The spec one TP rank computes: its share of the query and KV heads (MLA: of its heads,
/// whose per-head projections q_b_proj / q_proj, kv_b_proj and o_proj are cut with them), of the
/// MLP width, each routed expert's and the shared experts' widths.
Result<model::ModelSpec> localSpec(const model::ModelSpec& spec, int tp)
{
    const bool mla = spec.attention == model::AttentionKind::MLA;
    if (spec.headDim <= 0 && !mla) {
        return Error::internal(fmt::format("{}: no head width in the spec", spec.name));
    }
    model::ModelSpec local = spec;
    auto heads = divided(spec.numHeads, tp, "num_attention_heads", spec.name);
    // MLA has no KV heads of its own: each query head reads its own slice of kv_b_proj.
    auto kv = mla ? heads
                  : divided(spec.numKvHeads > 0 ? spec.numKvHeads : spec.numHeads, tp,
                      "num_key_value_heads", spec.name);
    // intermediate_size matters only where a dense layer uses it (not in an all-MoE model).
    const bool denseDefault = std::any_of(spec.layers.begin(), spec.layers.end(),
        [](const model::LayerSpec& l) { return !l.moe() && l.ffnWidth == 0; });
    auto inter = denseDefault ? divided(spec.intermediateSize, tp, "intermediate_size", spec.name)
                              : Result<std::int64_t>(spec.intermediateSize);
    auto expert = spec.moe
        ? divided(spec.moe->expertIntermediate, tp, "moe_intermediate_size", spec.name)
        : Result<std::int64_t>(0);
    // DeepSeek's shared experts are one MLP of n_shared_experts × moe_intermediate_size.
    auto shared = spec.moe && spec.moe->sharedIntermediate > 0
        ? divided(
            spec.moe->sharedIntermediate, tp, "n_shared_experts*moe_intermediate_size", spec.name)
        : Result<std::int64_t>(0);
    // The embedding and the head are vocab-parallel; an uneven vocabulary is not padded.
    auto vocab = divided(spec.vocabSize, tp, "vocab_size", spec.name);
    for (const auto* r : { &heads, &kv, &inter, &expert, &shared, &vocab }) {
        if (!*r) {
            return r->error();
        }
    }
    local.vocabSize = *vocab;
    local.numHeads = *heads;
    local.numKvHeads = *kv;
    local.intermediateSize = *inter;
    if (local.moe) {
        local.moe->expertIntermediate = *expert;
        local.moe->sharedIntermediate = *shared;
    }
    for (auto& layer : local.layers) {
        if (layer.numKvHeads > 0) {
            auto n = divided(layer.numKvHeads, tp, "num_key_value_heads", spec.name);
            if (!n) {
                return n.error();
            }
            layer.numKvHeads = *n;
        }
        if (layer.ffnWidth > 0) {
            auto n = divided(layer.ffnWidth, tp, "intermediate_size", spec.name);
            if (!n) {
                return n.error();
            }
            layer.ffnWidth = *n;
        }
    }
    return local;
}

std::span<const std::byte> bytesOf(std::span<const double> v) { return std::as_bytes(v); }
std::span<std::byte> bytesOf(std::span<double> v) { return std::as_writable_bytes(v); }

class CheckpointShard final : public train::TensorParallelShard {
public:
    CheckpointShard(model::ModelSpec local, std::map<std::string, numerics::Tensor> fixed, int rank,
        comm::Communicator& group)
        : m_local(std::move(local))
        , m_fixed(std::move(fixed))
        , m_rank(rank)
        , m_group(group)
    {
    }

    /// Cuts every parameter of `whole` (its specs and values, in order) for this rank.
    Result<void> cut(const model::ModelSpec& spec, const std::vector<train::ParameterSpec>& whole,
        std::span<const double> values, int tp)
    {
        std::map<std::string, std::vector<std::int64_t>> wanted;
        for (const auto& req : exec::detail::requiredWeights(m_local)) {
            wanted[req.name] = req.shape;
        }
        const model::LayerGraph graph = model::buildLayerGraph(spec);
        checkpoint::ShardLayout layout;
        layout.tp = tp;
        layout.etpGiven = tp; // Megatron's training default: experts split as the MLPs are
        const auto coord = checkpoint::rankCoord(layout, m_rank);
        m_whole = train::FlatLayout::of(whole);
        for (std::size_t i = 0; i < whole.size(); ++i) {
            const auto& p = whole[i];
            const auto it = wanted.find(p.name);
            if (it == wanted.end()) {
                return Error::internal(
                    fmt::format("tp={}: '{}' is not a weight of the rank's share", tp, p.name));
            }
            Piece piece;
            const auto full = m_whole.slice(values, i);
            // What the rank's spec needs whole (embeddings, norms, the head, the o_proj bias)
            // is replicated; the rest is the sharded forward's slice of it.
            if (it->second != p.shape) {
                const auto* t = graph.findTensor(p.name);
                if (t == nullptr) {
                    return Error::internal(
                        fmt::format("'{}' is not in the {} layer graph", p.name, spec.modelType));
                }
                auto slice = checkpoint::sliceFor(graph, *t, layout, coord);
                if (!slice) {
                    return slice.error();
                }
                if (!slice->has_value() || checkpoint::sliceShape(p.shape, **slice) != it->second) {
                    return Error::internal(fmt::format("tp={}: the sharded forward's slice of "
                                                       "'{}' is not the [{}] the rank computes "
                                                       "with",
                        tp, p.name, fmt::join(it->second, ", ")));
                }
                piece.slice = **slice;
            }
            const train::ParameterSpec mine { p.name, it->second };
            std::vector<double> local(std::size_t(mine.numel()));
            if (piece.slice.whole()) {
                std::copy(full.begin(), full.end(), local.begin());
            } else {
                checkpoint::extractSlice(bytesOf(full), p.shape, sizeof(double), piece.slice,
                    bytesOf(std::span<double>(local)));
            }
            m_initial.insert(m_initial.end(), local.begin(), local.end());
            m_parameters.push_back(mine);
            m_pieces.push_back(std::move(piece));
        }
        return success();
    }

    [[nodiscard]] std::vector<train::ParameterSpec> parameters() const override
    {
        return m_parameters;
    }
    [[nodiscard]] std::vector<double> initialValues(std::uint64_t /*seed*/) const override
    {
        return m_initial;
    }
    Result<double> lossAndGradients(std::span<const double> flat, const train::Batch& batch,
        DType compute, std::span<double> grad) const override
    {
        train::StepFootprint unused;
        return lossGradientsAndFootprint(flat, batch, compute, grad, unused);
    }
    /// The rank's own: what its share of the heads and widths kept.
    Result<double> lossGradientsAndFootprint(std::span<const double> flat,
        const train::Batch& batch, DType compute, std::span<double> grad,
        train::StepFootprint& footprint) const override
    {
        detail::TpShare tp;
        tp.sum = [this](void* data, std::int64_t count, DType type) {
            return m_group.allReduce(data, data, std::size_t(count), type, comm::ReduceOp::Sum);
        };
        tp.max = [this](void* data, std::int64_t count, DType type) {
            return m_group.allReduce(data, data, std::size_t(count), type, comm::ReduceOp::Max);
        };
        tp.vocabTotal = m_local.vocabSize * m_group.size();
        tp.vocabStart = m_local.vocabSize * m_rank;
        return detail::batchLossAndGradients(
            m_local, m_parameters, m_fixed, flat, batch, compute, grad, tp, &footprint);
    }
    [[nodiscard]] bool replicated(std::size_t i) const override
    {
        return m_pieces[i].slice.whole();
    }
    void scatter(std::span<const double> local, std::span<double> whole) const override
    {
        const auto layout = train::FlatLayout::of(m_parameters);
        for (std::size_t i = 0; i < m_parameters.size(); ++i) {
            const auto mine = layout.slice(local, i);
            const auto out = m_whole.slice(whole, i);
            if (!replicated(i)) {
                checkpoint::scatterSlice(bytesOf(mine), m_whole.parameters[i].shape, sizeof(double),
                    m_pieces[i].slice, bytesOf(out));
            } else if (m_rank == 0) {
                std::copy(mine.begin(), mine.end(), out.begin());
            }
        }
    }

private:
    struct Piece {
        checkpoint::TensorSlice slice; ///< whole: replicated
    };

    model::ModelSpec m_local;
    std::map<std::string, numerics::Tensor> m_fixed; ///< replicated, not trained
    int m_rank;
    comm::Communicator& m_group;
    train::FlatLayout m_whole;
    std::vector<train::ParameterSpec> m_parameters;
    std::vector<Piece> m_pieces;
    std::vector<double> m_initial;
};

/// What a TP rank's share of `spec` would need and this cut does not model, by name; empty
/// where the sharded forward's slicing rules and the backward's TP sums cover the family.
std::string trainingGap(const model::ModelSpec& spec)
{
    using F = model::Family;
    if (exec::detail::isQwenNext(spec)) {
        // The Gated DeltaNet's heads, the attention output gate and the gated shared expert are
        // not cut by heads or widths here.
        return fmt::format("{}: the Gated DeltaNet, the attention output gate, the gated shared "
                           "expert",
            model::familyName(spec.family));
    }
    switch (spec.family) {
    case F::GptOss:
        // Its sinks would be cut by heads and its fused biased experts by width.
        return "gpt-oss: per-head attention sinks, packed biased experts";
    case F::Gemma4:
        // Its full layers' own head widths and KV heads, k = v and the router's learned scales.
        return "Gemma-4: layers of their own head widths and KV heads, k = v";
    case F::NemotronH:
        // Its Mamba-2 mixers (in_proj's z | xBC | dt, the conv channels, heads and groups) and
        // its relu2 and latent experts.
        return "Nemotron-H: Mamba-2 heads and groups, relu2 experts, the latent MoE";
    case F::DeepseekV4:
        // Its hyper-connection streams, the one K=V head with its compressors, grouped wo_a.
        return "DeepSeek-V4: hyper-connection streams, the one K=V head and its compressors, "
               "grouped wo_a";
    case F::MiniMaxM3:
        // Its MSA index branch (replicated beside the heads it selects for) and its
        // checkpoint's language_model names.
        return "MiniMax-M3: the MSA index branch beside the split heads";
    case F::KimiLinear:
        // Its KDA layers (the q/k/v convs, the low-rank decay and output gates, the state) are
        // not cut by heads here.
        return "Kimi-Linear: Kimi Delta Attention's heads, convs and low-rank gates";
    case F::Llama4:
        // Its packed experts fed their score-scaled input, its chunked and NoPE attention and
        // its text tower under language_model are not cut here (nor in the backward).
        return "Llama-4: chunked and NoPE attention, packed experts fed their score-scaled input";
    default:
        return {};
    }
}

} // namespace

Result<std::unique_ptr<train::TensorParallelShard>> CheckpointTrainable::tensorParallel(
    int tp, int rank, comm::Communicator& group) const
{
    if (const auto gap = trainingGap(m_spec); !gap.empty()) {
        return Error::unsupported(fmt::format("--plan tp={}: tensor-parallel training of {} ({}) "
                                              "is not modelled; train it with tp=1",
            tp, m_spec.name, gap));
    }
    auto local = localSpec(m_spec, tp);
    if (!local) {
        return local.error();
    }
    // The fixed tensors (DeepSeek's e_score_correction_bias) only rank experts: replicated.
    auto shard = std::make_unique<CheckpointShard>(std::move(*local), m_fixed, rank, group);
    DAY0_TRY(shard->cut(m_spec, m_parameters, m_initial, tp));
    return std::unique_ptr<train::TensorParallelShard>(std::move(shard));
}

} // namespace day0::actions
