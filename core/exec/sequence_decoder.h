#pragma once

#include "base/result.h"
#include "exec/engine.h"
#include "exec/precision.h"

#include <cstdint>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec {

/// One sequence fed step by step on an Engine's weights, with its own KV cache (and recurrent
/// states) for up to `capacity` tokens: what a server's scheduler advances one step at a time.
/// It runs the same forward as Engine::run (a prefill of the whole prompt at position 0, then one
/// token per step), so its greedy picks equal `day0 run`'s. Text only (no image input), no
/// captures. Thread-compatible: one call at a time; many decoders may share one Engine as long as
/// they are stepped one at a time (the engine's weights are only read).
class SequenceDecoder {
public:
    /// A decoder over `engine` (which must outlive it) in `plan`'s arithmetic (fp64 plans need an
    /// fp64 engine); `deltaChunk` as RunOptions::linearAttentionChunk; `backend` (may be null:
    /// the CPU reference) computes its float operators as RunOptions::backend, fp32 only.
    static Result<SequenceDecoder> open(const Engine& engine, const PrecisionPlan& plan,
        std::int64_t capacity, std::int64_t deltaChunk = 64, Backend* backend = nullptr);

    SequenceDecoder(SequenceDecoder&&) noexcept;
    SequenceDecoder& operator=(SequenceDecoder&&) noexcept;
    ~SequenceDecoder();

    /// Runs `ids` at the next positions and returns the logits of the last one [vocab], widened
    /// to double. Errors when the tokens would overflow the capacity.
    Result<std::vector<double>> feed(std::span<const std::int64_t> ids, std::stop_token stop);

    /// One decode step of several sequences opened on the same engine and plan: token ids[i]
    /// fed to seqs[i] at its next position, the linear layers run once over all the rows (one
    /// matrix product each), each row's attention over its own cache. Returns each sequence's
    /// logits [vocab] in order, on the sequences' backend (one for all). Only where
    /// batchRefusal(engine) is empty; each sequence advances by one on success.
    static Result<std::vector<std::vector<double>>> feedBatch(
        std::span<SequenceDecoder* const> seqs, std::span<const std::int64_t> ids,
        std::stop_token stop);
    /// One step of several sequences, each fed several tokens (a batched prefill: prompts of
    /// any lengths): tokens[i] fed to seqs[i] at its next positions, the linear layers run once
    /// over every sequence's rows, each sequence's rows attending causally over its own cache.
    /// Returns each sequence's logits of its last token [vocab], in order; the same conditions
    /// as the one-token feedBatch. Each sequence advances by its token count on success.
    static Result<std::vector<std::vector<double>>> feedBatch(
        std::span<SequenceDecoder* const> seqs,
        std::span<const std::span<const std::int64_t>> tokens, std::stop_token stop);
    /// Why feedBatch does not serve `engine`'s model (exec/batch_decode.h); empty: it does.
    [[nodiscard]] static std::string batchRefusal(const Engine& engine);

    /// Tokens fed so far.
    [[nodiscard]] std::int64_t position() const { return m_position; }
    [[nodiscard]] std::int64_t capacity() const { return m_capacity; }

    struct State;

private:
    SequenceDecoder(std::unique_ptr<State> state, std::int64_t capacity);
    std::unique_ptr<State> m_state;
    std::int64_t m_position = 0;
    std::int64_t m_capacity = 0;
};

/// The greedy pick of a logits row, as Engine::run makes it: the largest, ties to the lower id.
std::int64_t greedyToken(std::span<const double> logits);

/// log Σ exp(l) of a logits row, computed as max + log Σ exp(l − max); a token's
/// log-probability is its logit minus this.
double logSumExp(std::span<const double> logits);

} // namespace day0::exec
