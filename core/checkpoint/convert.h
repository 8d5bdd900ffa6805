#pragma once

#include "base/dtype.h"
#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/block_fp8.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/quant_groups.h"
#include "model/layer_graph.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::checkpoint {

/// What `convert` does to a checkpoint.
struct ConvertOptions {
    /// Target for floating-point tensors: F32, BF16, F16, or F8E4M3 (block-scaled: 2-D linear
    /// weights of the decoder layers are quantised with a `weight_scale_inv` per block, every
    /// other tensor keeps its type).
    DType dtype = DType::BF16;
    /// Only dequantise the quantised weights (every format the config lays out: block FP8,
    /// ModelOpt FP8 and NVFP4, MXFP4, packed INT4, ...) and leave every other tensor as it is
    /// (what DeepSeek's fp8_cast_bf16.py does for block FP8).
    bool onlyFp8 = false;
    BlockShape block; ///< block size when quantising
    ShardingOptions sharding;
    HashOptions hash;
    int threads = 0; ///< conversion threads; 0: one per hardware thread
    bool replace = false; ///< allow replacing a non-empty output folder
};

/// What a conversion did.
struct ConvertSummary {
    std::size_t tensorsIn = 0;
    std::size_t tensorsOut = 0;
    std::size_t dequantized = 0; ///< quantised weights turned into the target type
    /// Tensors left out: the activation (`input_scale`) and KV-cache scales of dequantised
    /// checkpoints, meaningless without the quantisation.
    std::size_t dropped = 0;
    std::size_t quantized = 0; ///< weights turned into block FP8
    std::size_t converted = 0; ///< other tensors whose dtype changed
    std::size_t copied = 0; ///< tensors written unchanged
    std::uint64_t bytesIn = 0;
    std::uint64_t bytesOut = 0;
    std::vector<std::string> files; ///< every file of the new checkpoint
};

/// A quantised checkpoint's config as `convert` reads it: the layer graph of the config, the
/// graph of the config convert writes for the dequantised weights (no quantization_config), and
/// how the quantised weights of the one become tensors of the other. The groups point into both
/// graphs, whose tensors live on the heap: the struct may be moved, not copied.
struct DequantLayout {
    DequantLayout() = default;
    DequantLayout(DequantLayout&&) = default;
    DequantLayout& operator=(DequantLayout&&) = default;
    DequantLayout(const DequantLayout&) = delete; // the groups would point into the original
    DequantLayout& operator=(const DequantLayout&) = delete;

    model::LayerGraph source;
    model::LayerGraph converted;
    QuantLayout quant;
    std::string configName; ///< the source config.json, for messages
};

/// The layout of the checkpoint whose config.json is `configPath`, parsed as `config` and read
/// by the model module as `spec` (which declares a quantisation, or none: then no groups); the
/// converted config is the one convert writes for `options`, named `convertedName` in
/// messages. Convert and the engine's dequantising reader find the groups through this one
/// function. An error names the config when the two graphs do not correspond.
Result<DequantLayout> readDequantLayout(const std::filesystem::path& configPath,
    const nlohmann::ordered_json& config, const model::ModelSpec& spec,
    const ConvertOptions& options, const std::string& convertedName);

/// True for names that DeepSeek-style block-FP8 checkpoints quantise: 2-D projection weights
/// inside decoder (or MTP) layers, not embeddings, lm_head, norms, routers or vision towers.
bool isBlockFp8Candidate(const std::string& name, const std::vector<std::int64_t>& shape);

/// Converts the safetensors checkpoint at `src` into a new sharded checkpoint at `dst` (shards,
/// index, config.json with torch_dtype/quantization_config updated, other files copied, and a
/// day0-manifest.json). Everything is written to a temporary folder renamed at the end.
///
/// When Day0 reads the folder's config.json (with a ModelOpt hf_quant_config.json beside it),
/// the layer graph says which tensors form each quantised weight, in any format the model
/// module reads: block FP8 (F32 or E8M0 scales), ModelOpt FP8 and NVFP4, compressed-tensors
/// packed INT4 and MXFP4, DeepSeek-V4 FP4 experts, gpt-oss MXFP4 experts (written transposed,
/// as the BF16 release stores them). Each is dequantised to the target (F32, BF16, F16), its
/// activation and KV-cache scales are dropped, and the new config.json has no
/// quantization_config (hf_quant_config.json is not copied), so that the output verifies
/// against it. A tensor group that does not fit the layout is an error naming the file and
/// tensor. Without a readable config, F8_E4M3 weights are paired with `<name>_scale_inv` by
/// name. Refuses a source with structural problems; nothing is written before every tensor is
/// planned. Progress counts output bytes, then bytes hashed.
Result<ConvertSummary> convertCheckpoint(const std::filesystem::path& src,
    const std::filesystem::path& dst, const ConvertOptions& options, Progress& progress,
    std::stop_token stop);

} // namespace day0::checkpoint
