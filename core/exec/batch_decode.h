#pragma once
// Batched decode over several sequences' Forwards (forward.cpp, attention_block.cpp). Kept out of
// forward.h, which about a hundred files include: the batch's rows reach Forward<T>::step and its
// attention through a thread-local set only while decodeBatch runs.

#include "base/result.h"
#include "model/model_spec.h"

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec::detail {

template <typename T> class Forward;

/// The rows of the batched step running on this thread: sequence i's count(i) tokens, its rows
/// consecutive and in order, at positions starts[i], starts[i] + 1, ... A decode step has one
/// row per sequence (counts empty); a batched prefill several.
template <typename T> struct DecodeBatch {
    std::span<Forward<T>* const> seqs;
    std::span<const std::int64_t> starts;
    std::span<const std::int64_t> counts; ///< tokens of each sequence; empty: one each
    [[nodiscard]] std::int64_t count(std::size_t i) const { return counts.empty() ? 1 : counts[i]; }
};

/// The batched decode step running on this thread, or null (thread-local).
template <typename T> const DecodeBatch<T>* currentDecodeBatch();

/// One sequence's rows of a step: `count` rows from row `offset`, run over `seq`'s own states.
template <typename T> struct SequenceRows {
    Forward<T>* seq;
    std::int64_t offset;
    std::int64_t count;
};

/// The sequences of the step on this thread with their rows, in order: each batch sequence's
/// rows (batch_decode.h) or, outside a batched step, `self`'s `n` rows. The recurrent mixers run
/// each sequence's rows over its own state, as that sequence alone would.
template <typename T>
std::vector<SequenceRows<T>> stepSequenceRows(Forward<T>* self, std::int64_t n)
{
    std::vector<SequenceRows<T>> rows;
    const DecodeBatch<T>* batch = currentDecodeBatch<T>();
    if (batch == nullptr) {
        rows.push_back({ self, 0, n });
        return rows;
    }
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < batch->seqs.size(); ++i) {
        rows.push_back({ batch->seqs[i], offset, batch->count(i) });
        offset += batch->count(i);
    }
    return rows;
}

/// Whether the step's tokens fit the KV cache: each batch sequence's positions starts[i] ..
/// starts[i] + count(i) within `capacityOf(seq)` or, outside a batched step, start + n within
/// `capacity`. An internal error names the sequence otherwise.
template <typename T, typename CapacityOf>
Result<void> checkStepCapacity(const DecodeBatch<T>* batch, std::int64_t start, std::int64_t n,
    std::int64_t capacity, CapacityOf capacityOf)
{
    if (batch == nullptr) {
        if (start + n > capacity) {
            return Error::internal(
                fmt::format("KV cache holds {} tokens, step needs {}", capacity, start + n));
        }
        return success();
    }
    for (std::size_t i = 0; i < batch->seqs.size(); ++i) {
        const std::int64_t held = capacityOf(batch->seqs[i]);
        if (batch->starts[i] + batch->count(i) > held) {
            return Error::internal(
                fmt::format("KV cache of batch sequence {} holds {} tokens, step "
                            "needs {}",
                    i, held, batch->starts[i] + batch->count(i)));
        }
    }
    return success();
}

/// Why decodeBatch does not serve `spec` (its family or a layer kind, named); empty when it does:
/// models whose layers are softmax attention (full, sliding or chunked; MLA for DeepSeek-V3, not
/// with the DSA indexer; Kimi-Linear's), Gated DeltaNet, Mamba-2 or Kimi Delta Attention (each
/// sequence's rows over its own recurrent state), a linear or no mixer, and a dense or linear
/// feed-forward, or Qwen3-MoE's, Qwen3-Next's, Mixtral's, DeepSeek-V3's, Nemotron-H's and
/// Kimi-Linear's routed experts.
std::string batchDecodeRefusal(const model::ModelSpec& spec);

/// One step of every sequence in `seqs` (Forwards over the same spec, weights and plan, each
/// with its own cache): counts[i] tokens of sequence i (one each when `counts` is empty), their
/// ids consecutive in `ids`, at positions starts[i] on, run as one pass whose linear layers take
/// all rows in one matrix product, each sequence's rows attending causally over its own cache.
/// seqs[0] supplies the weights. Returns the logits of every row [rows, vocab].
template <typename T>
Result<std::vector<T>> decodeBatch(std::span<Forward<T>* const> seqs,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> starts, std::stop_token stop,
    std::span<const std::int64_t> counts = {});

} // namespace day0::exec::detail
