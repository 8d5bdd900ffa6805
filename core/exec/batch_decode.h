#pragma once
// Batched decode over several sequences' Forwards (forward.cpp, attention_block.cpp). Kept out of
// forward.h, which about a hundred files include: the batch's rows reach Forward<T>::step and its
// attention through a thread-local set only while decodeBatch runs.

#include "base/result.h"
#include "model/model_spec.h"

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

/// Why decodeBatch does not serve `spec` (its family or a layer kind, named); empty when it does:
/// models whose layers are softmax attention (full, sliding or chunked; MLA for DeepSeek-V3, not
/// with the DSA indexer), Gated DeltaNet or Mamba-2 (each sequence's rows over its own recurrent
/// state), a linear or no mixer, and a dense or linear feed-forward, or Qwen3-MoE's,
/// Qwen3-Next's, Mixtral's, DeepSeek-V3's and Nemotron-H's routed experts.
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
