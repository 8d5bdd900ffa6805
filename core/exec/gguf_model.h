#pragma once

#include "base/result.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace day0::exec {

/// Looks up one GGUF metadata value by key (nullptr when absent).
using GgufLookup = std::function<const nlohmann::json*(std::string_view key)>;

/// A ModelSpec from the metadata of a llama-architecture GGUF (general.architecture "llama":
/// llama.embedding_length, block_count, attention.head_count(_kv), feed_forward_length,
/// rope.freq_base, attention.layer_norm_rms_epsilon, the vocabulary size from
/// tokenizer.ggml.tokens). Other architectures: Unsupported, naming them.
Result<model::ModelSpec> specFromGguf(
    const GgufLookup& lookup, std::int64_t vocabSize, const std::string& origin);

/// The Hugging Face name of a llama GGUF tensor ("blk.3.attn_q.weight" ->
/// "model.layers.3.self_attn.q_proj.weight"); nullopt for names with no HF counterpart.
std::optional<std::string> hfNameForGguf(std::string_view ggufName);

/// Undoes llama.cpp's rotary permutation of q_proj / k_proj rows (convert_hf_to_gguf `permute`):
/// GGUF rows are [heads, 2, half, in] with the two halves swapped against HF's [heads, half, 2].
/// `weight` is [heads × headDim, in] row-major; returns the HF layout.
numerics::Tensor unpermuteRotary(const numerics::Tensor& weight, std::int64_t heads);

} // namespace day0::exec
