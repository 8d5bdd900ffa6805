#include "exec/streamed_sequence.h"

#include "exec/engine_taps.h"
#include "exec/forward.h"
#include "exec/null_taps.h"

#include <fmt/format.h>

#include <variant>

namespace day0::exec {

struct StreamedSequence::State {
    std::unique_ptr<detail::LayerStream> stream;
    std::int64_t vocab = 0;
    std::int64_t position = 0;
    std::int64_t capacity = 0;
    std::variant<std::unique_ptr<detail::Forward<float>>, std::unique_ptr<detail::Forward<double>>>
        forward;
};

StreamedSequence::StreamedSequence(std::unique_ptr<State> state)
    : m_state(std::move(state))
{
}

StreamedSequence::StreamedSequence(StreamedSequence&&) noexcept = default;
StreamedSequence& StreamedSequence::operator=(StreamedSequence&&) noexcept = default;
StreamedSequence::~StreamedSequence() = default;

Result<StreamedSequence> StreamedSequence::open(const std::filesystem::path& path,
    const model::ModelSpec& spec, const PrecisionPlan& plan, std::int64_t capacity,
    const StreamOptions& stream, std::int64_t steps, Progress& progress, std::stop_token stop)
{
    if (capacity < 1) {
        return Error::badInput(fmt::format("a sequence needs room for a token, got {}", capacity));
    }
    auto layers
        = detail::openCheckpointStream(path, spec, plan, stream, steps, progress, std::move(stop));
    if (!layers) {
        return layers.error();
    }
    auto state = std::make_unique<State>();
    state->stream = std::move(*layers);
    state->vocab = spec.vocabSize;
    state->capacity = capacity;
    // As Engine::run over a stream (engine.cpp) builds its Forward: over the stream's table.
    const auto make = [&]<typename T>() -> Result<void> {
        auto forward
            = std::make_unique<detail::Forward<T>>(spec, state->stream->table(), plan, capacity);
        DAY0_TRY(forward->init());
        state->forward = std::move(forward);
        return success();
    };
    DAY0_TRY(plan.isF64() ? make.template operator()<double>() : make.template operator()<float>());
    return StreamedSequence(std::move(state));
}

Result<std::vector<double>> StreamedSequence::feed(std::span<const std::int64_t> ids)
{
    State& s = *m_state;
    if (ids.empty()) {
        return Error::badInput("no tokens to feed");
    }
    if (s.position + std::int64_t(ids.size()) > s.capacity) {
        return Error::badInput(fmt::format("{} more token(s) after {} overflow the sequence's "
                                           "capacity of {}",
            ids.size(), s.position, s.capacity));
    }
    auto logits = std::visit(
        [&]<typename T>(
            std::unique_ptr<detail::Forward<T>>& forward) -> Result<std::vector<double>> {
            detail::NullTaps<T> none;
            detail::StreamingTaps<T> taps(none, *s.stream);
            DAY0_TRY(s.stream->beginStep());
            auto out = forward->step(ids, s.position, taps, s.stream->stopToken());
            // The load that failed, if one did (the forward only saw the stop).
            DAY0_TRY(s.stream->endStep());
            if (!out) {
                return out.error();
            }
            return std::vector<double>(out->end() - s.vocab, out->end());
        },
        s.forward);
    if (logits) {
        s.position += std::int64_t(ids.size());
    }
    return logits;
}

} // namespace day0::exec
