#pragma once

// One sequence fed step by step over weights streamed layer by layer (the streamed twin of
// SequenceDecoder): every feed streams the checkpoint's layers once, while the sequence's KV
// cache stays in memory. What `day0 eval --stream` samples its corpus with.

#include "base/progress.h"
#include "base/result.h"
#include "exec/layer_stream.h"
#include "exec/precision.h"
#include "model/model_spec.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <stop_token>
#include <vector>

namespace day0::exec {

/// A sequence of up to `capacity` tokens run in `plan` over the checkpoint at `path` (model
/// `spec`), its weights streamed as runStreamed streams them, so its logits equal those of a
/// SequenceDecoder on a loaded engine bit for bit. Single-threaded; cancelled through the token
/// given to open (also between the tensors of a feed).
class StreamedSequence {
public:
    /// Refuses by name what runStreamed refuses; plans the stream for `steps` feeds (progress).
    static Result<StreamedSequence> open(const std::filesystem::path& path,
        const model::ModelSpec& spec, const PrecisionPlan& plan, std::int64_t capacity,
        const StreamOptions& stream, std::int64_t steps, Progress& progress, std::stop_token stop);

    StreamedSequence(StreamedSequence&&) noexcept;
    StreamedSequence& operator=(StreamedSequence&&) noexcept;
    ~StreamedSequence();

    /// Runs `ids` at the next positions and returns the logits of the last one [vocab], widened
    /// to double. Errors when the tokens would overflow the capacity.
    Result<std::vector<double>> feed(std::span<const std::int64_t> ids);

    struct State;

private:
    explicit StreamedSequence(std::unique_ptr<State> state);
    std::unique_ptr<State> m_state;
};

namespace detail {

/// The layer stream runStreamed runs over, planned (names, shapes, dtypes, the budget) for
/// `steps` forward steps of `plan`'s arithmetic; refuses by name what cannot be streamed.
Result<std::unique_ptr<LayerStream>> openCheckpointStream(const std::filesystem::path& path,
    const model::ModelSpec& spec, const PrecisionPlan& plan, const StreamOptions& stream,
    std::int64_t steps, Progress& progress, std::stop_token stop);

} // namespace detail

} // namespace day0::exec
