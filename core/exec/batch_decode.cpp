// Batched decode over several sequences' Forwards (exec/batch_decode.h).
#include "exec/batch_decode.h"

#include "exec/forward.h"
#include "exec/null_taps.h"

#include <fmt/format.h>

namespace day0::exec::detail {

namespace {

template <typename T> const DecodeBatch<T>*& decodeBatchSlot()
{
    thread_local const DecodeBatch<T>* slot = nullptr;
    return slot;
}

} // namespace

template <typename T> const DecodeBatch<T>* currentDecodeBatch() { return decodeBatchSlot<T>(); }

std::string batchDecodeRefusal(const model::ModelSpec& spec)
{
    switch (spec.family) {
    case model::Family::DeepseekV4:
    case model::Family::Gemma4:
        return fmt::format("{} decodes with a step of its own", model::familyName(spec.family));
    default:
        break;
    }
    // MLA rows write their expanded keys into their own sequence's cache and attend over it;
    // the DSA indexer keeps a selection per sequence, which a batch does not.
    if (spec.attention == model::AttentionKind::MLA && spec.mla.indexerHeads > 0) {
        return "MLA with the DSA indexer (sparse attention)";
    }
    // Kimi-Linear's MLA layers are DeepSeek-V3's without RoPE (mla_use_nope), Kimi-K3's with a
    // per-row output gate.
    if (spec.attention == model::AttentionKind::MLA && spec.family != model::Family::DeepseekV3
        && spec.family != model::Family::KimiLinear) {
        return fmt::format("MLA attention of {} (batched for DeepSeek-V3 and Kimi-Linear)",
            model::familyName(spec.family));
    }
    // Qwen3-MoE's, Mixtral's and DeepSeek-V3's experts route every row on its own (router top-k,
    // DeepSeek-V3's groups included, then each expert's product over the rows that chose it; the
    // shared experts a per-row MLP), so a batch of sequences routes as each alone; the other MoE
    // blocks (latent experts, gates, biased or fused experts) are not checked batched yet.
    // Qwen3-Next's (and Qwen3.5's) block is Qwen3-MoE's with a sigmoid-gated shared expert, a
    // per-row gate; Nemotron-H's relu² experts (nemotron_h_block.cpp) route each row alone too.
    // Kimi-Linear's is DeepSeek-V3's sigmoid router with Mixtral's expert names; Kimi-K3's latent
    // experts add a per-row down projection, RMS norm and up projection around them.
    const bool rowRouted = spec.family == model::Family::Qwen3Moe
        || spec.family == model::Family::Mixtral || spec.family == model::Family::DeepseekV3
        || spec.family == model::Family::NemotronH || spec.family == model::Family::KimiLinear
        || isQwenNext(spec);
    if (spec.moe && !rowRouted) {
        return fmt::format("a mixture of experts of {} (batched for Qwen3-MoE, Qwen3-Next, "
                           "Mixtral, DeepSeek-V3, Nemotron-H and Kimi-Linear)",
            model::familyName(spec.family));
    }
    // Gated DeltaNet, Mamba-2 and Kimi Delta Attention layers keep a recurrent state per
    // sequence: a batched step runs each sequence's rows over its own (gated_delta_net.cpp,
    // nemotron_h_block.cpp, kimi_delta.cpp).
    for (std::size_t l = 0; l < spec.layers.size(); ++l) {
        const auto mixer = spec.layers[l].mixer;
        if (mixer != model::MixerKind::Attention && mixer != model::MixerKind::Sliding
            && mixer != model::MixerKind::Chunked && mixer != model::MixerKind::Linear
            && mixer != model::MixerKind::None && mixer != model::MixerKind::GatedDeltaNet
            && mixer != model::MixerKind::Mamba2 && mixer != model::MixerKind::KimiDelta) {
            return fmt::format("layer {}'s {} mixer", l, model::mixerKindName(mixer));
        }
    }
    return {};
}

template <typename T>
Result<std::vector<T>> decodeBatch(std::span<Forward<T>* const> seqs,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> starts, std::stop_token stop,
    std::span<const std::int64_t> counts)
{
    std::int64_t rows = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (counts[i] < 1) {
            return Error::internal(fmt::format("batched step: sequence {} has no tokens", i));
        }
        rows += counts[i];
    }
    if (counts.empty()) {
        rows = std::int64_t(seqs.size());
    }
    if (seqs.empty() || std::int64_t(ids.size()) != rows || seqs.size() != starts.size()
        || (!counts.empty() && counts.size() != seqs.size())) {
        return Error::internal(fmt::format("batched step: {} sequences, {} ids for {} rows, {} "
                                           "positions, {} counts",
            seqs.size(), ids.size(), rows, starts.size(), counts.size()));
    }
    const DecodeBatch<T> batch { seqs, starts, counts };
    decodeBatchSlot<T>() = &batch;
    NullTaps<T> taps;
    auto out = seqs.front()->step(ids, 0, taps, stop);
    decodeBatchSlot<T>() = nullptr;
    return out;
}

template const DecodeBatch<float>* currentDecodeBatch<float>();
template const DecodeBatch<double>* currentDecodeBatch<double>();
template Result<std::vector<float>> decodeBatch<float>(std::span<Forward<float>* const>,
    std::span<const std::int64_t>, std::span<const std::int64_t>, std::stop_token,
    std::span<const std::int64_t>);
template Result<std::vector<double>> decodeBatch<double>(std::span<Forward<double>* const>,
    std::span<const std::int64_t>, std::span<const std::int64_t>, std::stop_token,
    std::span<const std::int64_t>);

} // namespace day0::exec::detail
