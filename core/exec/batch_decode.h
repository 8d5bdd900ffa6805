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

/// The rows of the batched decode step running on this thread: row i is one token of seqs[i] at
/// position starts[i].
template <typename T> struct DecodeBatch {
    std::span<Forward<T>* const> seqs;
    std::span<const std::int64_t> starts;
};

/// The batched decode step running on this thread, or null (thread-local).
template <typename T> const DecodeBatch<T>* currentDecodeBatch();

/// Why decodeBatch does not serve `spec` (its family or a layer kind, named); empty when it does:
/// models whose layers are softmax attention (full, sliding or chunked, not MLA), a linear or no
/// mixer, and a dense or linear feed-forward, or Qwen3-MoE's and Mixtral's routed experts.
std::string batchDecodeRefusal(const model::ModelSpec& spec);

/// One decode step of every sequence in `seqs` (Forwards over the same spec, weights and plan,
/// each with its own cache): token ids[i] at position starts[i], run as one pass whose linear
/// layers take all rows in one matrix product, each row's attention over its own sequence's
/// cache. seqs[0] supplies the weights. Returns the logits [seqs, vocab].
template <typename T>
Result<std::vector<T>> decodeBatch(std::span<Forward<T>* const> seqs,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> starts, std::stop_token stop);

} // namespace day0::exec::detail
