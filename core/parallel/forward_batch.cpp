// Several sequences' steps as one batched step of a rank (parallel/forward.h: layersBatch).
#include "parallel/forward.h"

#include <fmt/format.h>

namespace day0::parallel::detail {

std::string ParallelForward::batchRefusal(const model::ModelSpec& spec)
{
    switch (spec.family) {
    case model::Family::NemotronH:
    case model::Family::Gemma4:
    case model::Family::DeepseekV4:
        return fmt::format(
            "{} runs sharded with a layer block of its own", model::familyName(spec.family));
    default:
        break;
    }
    if (spec.attention == model::AttentionKind::MLA && spec.mla.indexerHeads > 0) {
        return "MLA with the DSA indexer (a key selection per sequence)";
    }
    for (std::size_t l = 0; l < spec.layers.size(); ++l) {
        const auto mixer = spec.layers[l].mixer;
        if (mixer != model::MixerKind::Attention && mixer != model::MixerKind::Sliding
            && mixer != model::MixerKind::Chunked) {
            return fmt::format("layer {}'s mixer (recurrent or sparse attention: a state per "
                               "sequence the sharded batched step does not split)",
                l);
        }
    }
    // Routed experts take each row on its own here (router, dispatch and combine by token); the
    // families whose batched tokens are checked against the reference: as for one rank.
    if (spec.moe && spec.family != model::Family::Qwen3Moe && spec.family != model::Family::Mixtral
        && spec.family != model::Family::DeepseekV3) {
        return fmt::format("a mixture of experts of {} (batched for Qwen3-MoE, Mixtral and "
                           "DeepSeek-V3)",
            model::familyName(spec.family));
    }
    return {};
}

Result<void> ParallelForward::layersBatch(
    std::span<const StepSegment> segments, std::vector<float>& hidden, std::stop_token stop)
{
    if (const auto why = batchRefusal(m_spec); !why.empty()) {
        return Error::unsupported("a batched sharded step: " + why);
    }
    std::int64_t n = 0;
    m_positions.clear();
    for (const auto& s : segments) {
        if (s.cache == nullptr || s.n < 1 || s.offset != n) {
            return Error::internal(fmt::format("batched step: segment at row {} of {} rows "
                                               "starting at row {} is malformed",
                s.offset, s.n, n));
        }
        if (s.start + s.n > s.cache->capacity) {
            return Error::internal(fmt::format(
                "KV cache holds {} tokens, step needs {}", s.cache->capacity, s.start + s.n));
        }
        for (std::int64_t i = 0; i < s.n; ++i) {
            m_positions.push_back(s.start + i);
        }
        n += s.n;
    }
    if (n == 0) {
        return Error::internal("batched step: no rows");
    }
    m_segments.assign(segments.begin(), segments.end());
    return runLayers(hidden, n, stop);
}

} // namespace day0::parallel::detail
