#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// The sliding window of a shrunk model unless told otherwise: shorter than the 6-10 token
/// prompts the tests run, so that the window masks something and a broken mask shows.
inline constexpr std::int64_t kShrunkWindow = 4;

/// The DSA indexer's index_topk in a shrunk model (DeepSeek-V3.2, GLM-5): fewer keys than the
/// 6-10 token prompts the tests run, so that the selection drops keys and a broken one shows.
inline constexpr std::int64_t kShrunkIndexTopK = 4;

/// DeepSeek-V4's heavily compressed ratio (128 published) in a shrunk model: a short prompt fills
/// a few of its windows, so that the compressed entries exist and a broken compressor shows.
inline constexpr std::int64_t kShrunkHcaRatio = 8;
/// MiniMax-M3's sparse attention in a shrunk model: blocks of 2 keys, 2 kept per query (its own
/// and the best other), so that a 10-16 token prompt spans several blocks, the selection drops
/// some, and a broken block score or selection shows.
inline constexpr std::int64_t kShrunkSparseBlockSize = 2;
inline constexpr std::int64_t kShrunkSparseTopKBlocks = 2;

/// gpt-oss's swiglu_limit in a shrunk model: at the scale of the shrunk weights' activations, so
/// that the clamp bites (the published 7 never would) and an engine without it fails.
inline constexpr double kShrunkSwigluLimit = 0.25;
/// Gemma-4's final_logit_softcapping in a shrunk model: the shrunk logits' scale, so that the
/// cap bends them and an engine without it shows.
inline constexpr double kShrunkLogitSoftcap = 0.5;
/// The Mamba-2 chunk_size of a shrunk model (Nemotron-H): shorter than the 6-10 token prompts
/// the tests run and not dividing them, so that a prefill spans several chunks, the last one
/// partial, and a broken inter-chunk state shows.
inline constexpr std::int64_t kShrunkMambaChunk = 4;

/// Sizes of a shrunk model; unset values get small defaults that keep every structural feature.
struct ShrinkOptions {
    std::optional<std::int64_t> layers; ///< decoder layers (default 4)
    std::optional<std::int64_t> hidden; ///< hidden size (default 128, or heads × 16)
    std::optional<std::int64_t>
        heads; ///< attention heads (default keeps the GQA ratio, 2 KV heads)
    std::optional<std::int64_t> experts; ///< routed experts (default min(E, 16))
    std::optional<std::int64_t> vocab; ///< vocabulary (default min(V, 2048))
    std::optional<std::int64_t> intermediate; ///< dense MLP width (default scaled with hidden)
    std::optional<std::int64_t>
        fp8Block; ///< block size of block-FP8 weights (default: the original's)
    /// Sliding window of the layers that have one (default min(original, kShrunkWindow)).
    std::optional<std::int64_t> window;
    /// Mamba-2 chunk_size of the SSD scan (default min(original, kShrunkMambaChunk)).
    std::optional<std::int64_t> chunk;
    /// Drop the weight format: the shrunk model is written unquantised (bf16), as if from the
    /// BF16 release, for formats shrink does not generate (FP4, E8M0-scaled FP8, ModelOpt). Its
    /// config loses quantization_config (top level and text_config) and DeepSeek-V4's
    /// expert_dtype, and a ModelOpt hf_quant_config.json beside it is not read.
    bool unquantized = false;
    std::uint64_t seed = 0;
    ShardingOptions sharding { 1'000'000 }; ///< small shards, so the result is sharded
    HashOptions hash;
    bool replace = false;
};

/// Turns a Hugging Face config.json into the config of a small model of the same architecture:
/// same model_type, attention kind and GQA ratio, MLA with scaled ranks, MoE with its routing kind,
/// top-k, groups, shared experts and first_k_dense_replace, RoPE scaling kind (M-RoPE sections
/// rescaled to the new head size), tied or untied embeddings, MTP layers, the quantization_config
/// (block FP8, MXFP4), and the vision tower of VL models, each scaled down; a sliding window
/// wider than kShrunkWindow becomes kShrunkWindow (or options.window), a DSA index_topk
/// kShrunkIndexTopK. Per-layer lists are cut to the new depth and special token ids moved
/// inside the new vocabulary. DeepSeek-V4 keeps one layer of each compress ratio and hash
/// routing, 4 heads, index_topk 2 and its heavily compressed ratio scaled to kShrunkHcaRatio.
/// Pure.
Result<nlohmann::ordered_json> shrinkConfig(
    const nlohmann::ordered_json& config, const ShrinkOptions& options);

/// The config.json that `<model>` names: a folder holding one, the file itself, or a bundled name.
Result<std::filesystem::path> resolveConfigPath(const std::string& modelArg);

/// A shrunk config that reads as a model homologous to its source.
struct ShrinkPlan {
    nlohmann::ordered_json config; ///< the shrunk config.json
    std::string configText; ///< as written (NaN / Infinity as Python writes them)
    model::ModelSpec original; ///< the source's exact reading
    model::ModelSpec spec; ///< the shrunk config's reading
};

/// Reads `modelArg` exactly, shrinks its config and checks the result is homologous: the same
/// family with every kind of layer and feed-forward, its MTP layers, vision tower and weight
/// format. Refuses, naming why, a model whose config has structure Day0 does not model, a weight
/// format shrink cannot generate (NVFP4 and the other FP4 codes, per-tensor FP8), or a shrunk
/// config that loses a kind of layer. Pure (reads the config only).
Result<ShrinkPlan> planShrink(const std::string& modelArg, const ShrinkOptions& options);

/// What shrinkModel wrote.
struct ShrinkSummary {
    std::string modelType;
    std::size_t tensors = 0;
    std::uint64_t bytes = 0; ///< tensor bytes
    std::int64_t parameters = 0;
    std::vector<std::string> files;
    /// What the shrunk architecture changed beyond sizes (DeepSeek-V4's compress ratios).
    std::vector<std::string> notes;
};

/// The `count` values shrink draws for the tensor `name` with `seed`: N(0, stddev), the same on
/// every platform. A plain weight's values; for gpt-oss MXFP4 experts, `name` is the expert
/// parameter (`...mlp.experts.gate_up_proj`) and the values its logical [E, out, in] weights
/// before quantisation (gate_up_proj: out = 2I, gate and up interleaved; down_proj: out = H).
std::vector<float> shrinkNormal(
    std::uint64_t seed, const std::string& name, std::size_t count, float stddev);

/// Writes a small checkpoint of the architecture of `modelArg` into `out`: config.json,
/// day0-shrink.json (source and options), sharded safetensors with index, and a manifest.
/// Weights are deterministic for a seed on every platform (integer generator, per-tensor
/// streams keyed by name) and initialised like Hugging Face does: N(0, initializer_range) for
/// linear and embedding weights (a 4-term Irwin-Hall approximation), ones for norms, zeros for
/// biases; block-FP8 weights are quantised with their scales, gpt-oss MXFP4 experts drawn as
/// logical [E, out, in] weights (shrinkNormal of the expert parameter's name) and quantised
/// with quantizeMxfp4. gpt-oss also gets N(0, initializer_range) biases and N(0, 1) attention
/// sinks: zeros there would hide a broken bias or sink in the engine. Written atomically.
Result<ShrinkSummary> shrinkModel(const std::string& modelArg, const std::filesystem::path& out,
    const ShrinkOptions& options, Progress& progress, std::stop_token stop);

} // namespace day0::checkpoint
