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
    case model::Family::NemotronH:
    case model::Family::DeepseekV4:
    case model::Family::Gemma4:
        return fmt::format("{} decodes with a step of its own", model::familyName(spec.family));
    default:
        break;
    }
    if (spec.attention == model::AttentionKind::MLA) {
        return "MLA attention";
    }
    if (spec.moe) {
        return "a mixture of experts (which rows each expert's product takes changes with the "
               "batch)";
    }
    for (std::size_t l = 0; l < spec.layers.size(); ++l) {
        const auto mixer = spec.layers[l].mixer;
        if (mixer != model::MixerKind::Attention && mixer != model::MixerKind::Sliding
            && mixer != model::MixerKind::Chunked && mixer != model::MixerKind::Linear
            && mixer != model::MixerKind::None) {
            return fmt::format("layer {}'s mixer (recurrent or sparse attention)", l);
        }
    }
    return {};
}

template <typename T>
Result<std::vector<T>> decodeBatch(std::span<Forward<T>* const> seqs,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> starts, std::stop_token stop)
{
    if (seqs.empty() || seqs.size() != ids.size() || seqs.size() != starts.size()) {
        return Error::internal(fmt::format("batched decode: {} sequences, {} ids, {} positions",
            seqs.size(), ids.size(), starts.size()));
    }
    const DecodeBatch<T> batch { seqs, starts };
    decodeBatchSlot<T>() = &batch;
    NullTaps<T> taps;
    auto out = seqs.front()->step(ids, 0, taps, stop);
    decodeBatchSlot<T>() = nullptr;
    return out;
}

template const DecodeBatch<float>* currentDecodeBatch<float>();
template const DecodeBatch<double>* currentDecodeBatch<double>();
template Result<std::vector<float>> decodeBatch<float>(std::span<Forward<float>* const>,
    std::span<const std::int64_t>, std::span<const std::int64_t>, std::stop_token);
template Result<std::vector<double>> decodeBatch<double>(std::span<Forward<double>* const>,
    std::span<const std::int64_t>, std::span<const std::int64_t>, std::stop_token);

} // namespace day0::exec::detail
