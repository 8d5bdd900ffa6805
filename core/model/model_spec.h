#pragma once

#include "base/dtype.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::model {

/// The model families whose Hugging Face config.json we read. A family fixes the module layout
/// and therefore the checkpoint tensor names.
enum class Family {
    Llama, ///< llama (incl. llama3 rope scaling)
    Mistral,
    Mixtral,
    Qwen2,
    Qwen2Moe,
    Qwen3,
    Qwen3Moe,
    DeepseekV2,
    DeepseekV3, ///< also Kimi-K2, DeepSeek-R1, DeepSeek-V3.2, Kimi-K2.5 text tower
    Llama4, ///< text tower
    Glm4Moe,
    Qwen2Vl,
    Qwen25Vl,
    Qwen3Vl,
    Qwen3VlMoe,
    GenericDecoder, ///< unknown model_type with the standard decoder keys (a warning is given)
};

/// How queries attend to keys and values.
enum class AttentionKind {
    MHA, ///< kv heads == heads
    GQA, ///< 1 < kv heads < heads
    MQA, ///< one kv head
    MLA, ///< DeepSeek multi-head latent attention
};

/// How a MoE router turns logits into expert weights.
enum class RouterScoring { Softmax, Sigmoid };

/// RoPE scaling as declared in config.json `rope_scaling` (type "default" when absent).
struct RopeScaling {
    std::string type = "default"; ///< default, linear, dynamic, llama3, yarn, mrope, ...
    double factor = 1.0;
    double lowFreqFactor = 1.0; ///< llama3
    double highFreqFactor = 4.0; ///< llama3
    std::int64_t originalMaxPositions = 0; ///< llama3, yarn
    double betaFast = 32.0; ///< yarn
    double betaSlow = 1.0; ///< yarn
    double mscale = 1.0; ///< yarn (DeepSeek)
    double mscaleAllDim = 0.0; ///< yarn (DeepSeek)
    std::vector<std::int64_t> mropeSection; ///< Qwen VL M-RoPE sections (t, h, w)
};

/// DeepSeek multi-head latent attention dimensions.
struct MlaSpec {
    std::int64_t qLoraRank = 0; ///< 0: q is projected directly (no q_a/q_b)
    std::int64_t kvLoraRank = 0;
    std::int64_t qkNopeHeadDim = 0;
    std::int64_t qkRopeHeadDim = 0;
    std::int64_t vHeadDim = 0;
    /// DeepSeek-V3.2 sparse-attention indexer (extra weights per layer), 0 when absent.
    std::int64_t indexerHeads = 0;
    std::int64_t indexerHeadDim = 0;
    std::int64_t indexerTopK = 0;
};

/// Mixture-of-experts feed-forward parameters (for the layers that are MoE).
struct MoeSpec {
    std::int64_t numExperts = 0; ///< routed experts
    std::int64_t topK = 0; ///< experts selected per token
    std::int64_t expertIntermediate = 0; ///< width of one routed expert's MLP
    std::int64_t numSharedExperts = 0; ///< DeepSeek/Kimi/GLM shared experts (fused into one MLP)
    std::int64_t sharedIntermediate = 0; ///< total width of the shared-expert MLP (0: none)
    bool sharedExpertGate = false; ///< Qwen2-MoE sigmoid gate on the shared expert
    RouterScoring scoring = RouterScoring::Softmax;
    bool expertScoreBias = false; ///< DeepSeek-V3 `e_score_correction_bias` (noaux_tc)
    bool normTopkProb = false;
    double routedScalingFactor = 1.0;
    std::int64_t numGroups = 1; ///< group-limited routing: n_group
    std::int64_t topkGroup = 1;
    bool packedExperts = false; ///< experts stored as fused 3-D tensors (Llama-4, Qwen3-VL-MoE)
};

/// How quantised Linear weights are stored.
enum class QuantScheme {
    BlockFp8, ///< `quant_method: fp8` with weight_block_size: F8 weight + F32 `weight_scale_inv`
    PackedInt, ///< compressed-tensors `pack-quantized` (Kimi-K2.5 INT4): I32 `weight_packed`,
               ///< BF16 `weight_scale` per group, I32 `weight_shape`
};

/// Quantised weights as published: block-wise FP8 (DeepSeek-V3/Kimi-K2/Qwen3-FP8) or
/// compressed-tensors packed INT4 groups (Kimi-K2.5 routed experts).
struct QuantizationSpec {
    std::string method; ///< "fp8", "compressed-tensors"
    QuantScheme scheme = QuantScheme::BlockFp8;
    DType weightDtype = DType::F8E4M3;
    std::int64_t blockRows = 128; ///< weight_block_size[0]
    std::int64_t blockCols = 128; ///< weight_block_size[1]
    std::string scaleSuffix = "weight_scale_inv"; ///< name of the per-block scale tensor
    std::vector<std::string> skippedModules; ///< modules_to_not_convert / ignored_layers / ignore
    std::vector<std::string> ignorePatterns; ///< compressed-tensors "re:" entries (regex bodies)
    std::int32_t bits = 8; ///< bits per quantised weight value
    std::int64_t groupSize = 0; ///< PackedInt: values per scale along the input dim
    std::string format; ///< compressed-tensors format ("pack-quantized"); scale_fmt for FP8
};

/// The vision tower of a multimodal model (Qwen VL towers, Kimi-K2.5's MoonViT).
struct VisionSpec {
    std::string kind; ///< "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "moonvit"
    std::int64_t depth = 0;
    std::int64_t hiddenSize = 0;
    std::int64_t intermediateSize = 0;
    std::int64_t numHeads = 0;
    std::int64_t patchSize = 14;
    std::int64_t temporalPatchSize = 2;
    std::int64_t spatialMergeSize = 2;
    std::int64_t inChannels = 3;
    std::int64_t outHiddenSize = 0; ///< width after the patch merger (= text hidden size)
    std::int64_t numPositionEmbeddings = 0; ///< Qwen3-VL learned position embedding
    std::vector<std::int64_t> deepstackIndexes; ///< Qwen3-VL deepstack mergers
    std::string hiddenAct;
    std::vector<std::int64_t> fullAttentionBlocks; ///< Qwen2.5-VL fullatt_block_indexes
    std::int64_t windowSize = 0; ///< Qwen2.5-VL window attention size (pixels)
    std::int64_t posEmbHeight = 0; ///< MoonViT learned 2-D position table rows
    std::int64_t posEmbWidth = 0; ///< MoonViT learned 2-D position table columns
};

/// Where a checkpoint keeps its weights: the prefixes of the Hugging Face tensor names.
struct CheckpointLayout {
    std::string textPrefix = "model"; ///< "model", "model.language_model", "language_model.model"
    std::string lmHead = "lm_head"; ///< "lm_head", "language_model.lm_head"
    std::string visionPrefix; ///< "visual", "model.visual", "vision_tower"; empty without vision
    std::string projectorPrefix; ///< "mm_projector" (Kimi-K2.5); empty when the tower merges
};

/// Per-decoder-layer variations.
struct LayerSpec {
    bool moe = false; ///< feed-forward is a MoE (else dense MLP)
    bool rope = true; ///< Llama-4 NoPE layers have false
    std::int64_t slidingWindow = 0; ///< 0: full attention
    std::int64_t attentionChunk = 0; ///< Llama-4 chunked attention, 0: none
};

/// A typed reading of a Hugging Face config.json: everything the graph builder, the memory
/// estimator and the engine need, with the source's quirks resolved.
struct ModelSpec {
    std::string name; ///< bundled short name or the folder name
    std::string modelType; ///< config `model_type` as written
    Family family = Family::Llama;
    std::string architecture; ///< architectures[0]

    std::int64_t hiddenSize = 0;
    std::int64_t numLayers = 0; ///< decoder layers, without MTP
    std::int64_t numHeads = 0;
    std::int64_t numKvHeads = 0;
    std::int64_t headDim = 0; ///< q/k/v head width (MLA: qkNope + qkRope for q/k; see mla)
    std::int64_t intermediateSize = 0; ///< dense MLP width
    std::int64_t vocabSize = 0;
    std::int64_t maxPositions = 0;

    AttentionKind attention = AttentionKind::MHA;
    MlaSpec mla;
    bool qkNorm = false; ///< Qwen3 per-head RMSNorm on q and k
    bool qkL2Norm = false; ///< Llama-4 weightless L2 norm of q and k on RoPE layers
    /// Llama-4 attention temperature tuning on NoPE layers: queries at position p are scaled by
    /// log(floor((p + 1) / attnFloorScale) + 1) · attnTemperatureScale + 1; 0: off.
    double attnTemperatureScale = 0.0;
    double attnFloorScale = 8192.0; ///< Llama-4 `floor_scale`
    bool attentionBias = false; ///< q/k/v biases (Qwen2) or all projections
    bool attentionOutputBias = false; ///< o_proj bias
    bool mlpBias = false;

    std::string hiddenAct = "silu";
    bool gatedMlp = true; ///< SwiGLU-style gate/up/down
    double normEps = 1e-6;
    double ropeTheta = 10000.0;
    RopeScaling ropeScaling;
    double partialRotaryFactor = 1.0; ///< share of the head width that is rotated (GLM-4.5: 0.5)
    bool tieEmbeddings = false;

    DType dtype = DType::BF16; ///< torch_dtype of the published weights
    std::optional<QuantizationSpec> quantization;

    std::optional<MoeSpec> moe;
    std::vector<LayerSpec> layers; ///< numLayers entries
    std::int64_t numMtpLayers = 0; ///< DeepSeek num_nextn_predict_layers
    std::vector<LayerSpec> mtpLayers; ///< numMtpLayers entries: the pattern of each MTP decoder

    std::optional<VisionSpec> vision;
    CheckpointLayout layout;

    std::string origin; ///< the file the spec was read from (for messages)
    std::vector<std::string> warnings; ///< e.g. "generic decoder reading of model_type 'foo'"

    /// Number of decoder layers whose feed-forward is MoE.
    [[nodiscard]] std::int64_t numMoeLayers() const;
    /// Query heads × the q/k head width (the attention inner width).
    [[nodiscard]] std::int64_t qHeadWidth() const;
};

/// Lower-case name of a family ("deepseek_v3").
std::string familyName(Family family);
/// "MHA", "GQA", "MQA", "MLA".
std::string attentionKindName(AttentionKind kind);
/// Parses a family name as familyName() spells it.
std::optional<Family> parseFamily(const std::string& name);

} // namespace day0::model
