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
    GptOss, ///< gpt_oss: sinks, alternating sliding/full layers, biased fused MXFP4 experts
    MiniMaxM2, ///< minimax_m2 (MiniMax-M2, M2.5, M2.7)
    MiniMaxM3, ///< minimax_m3: block-sparse attention, dense first layers, MTP modules
    Qwen3Next, ///< qwen3_next: Gated DeltaNet / gated attention hybrid, 512 experts
    Qwen35, ///< qwen3_5 (Qwen3.5 / 3.6 dense): the Qwen3-Next hybrid, multimodal wrapper
    Qwen35Moe, ///< qwen3_5_moe (Qwen3.5 / 3.6 MoE)
    NemotronH, ///< nemotron_h (Nemotron-H, Nemotron-3): Mamba-2 / attention / MLP / MoE layers
    NemotronNas, ///< nemotron-nas (DeciLM): per-layer block_configs
    DeepseekV4, ///< deepseek_v4: compressed attention, hyper-connections, hash routing
    GlmMoeDsa, ///< glm_moe_dsa (GLM-5): MLA with the DSA indexer
    Gemma4, ///< gemma4: sliding/full layers of different widths, MoE beside a dense MLP
    Hunyuan, ///< hunyuan (HunYuanMoEV1): per-layer expert lists, mixed dense MLP
    KimiLinear, ///< kimi_linear (Kimi-Linear, Kimi-K3 text): KDA / MLA hybrid, latent MoE
    GenericDecoder, ///< unknown model_type whose every key is a Llama decoder's (a note says so)
};

/// How queries attend to keys and values.
enum class AttentionKind {
    MHA, ///< kv heads == heads
    GQA, ///< 1 < kv heads < heads
    MQA, ///< one kv head
    MLA, ///< DeepSeek multi-head latent attention
};

/// How a MoE router turns logits into expert weights.
enum class RouterScoring {
    Softmax,
    Sigmoid,
    SqrtSoftplus, ///< DeepSeek-V4: sqrt(softplus(logit))
};

/// What mixes tokens in a decoder layer.
enum class MixerKind : std::uint8_t {
    Attention, ///< softmax attention over every earlier token (MHA/GQA/MQA/MLA as spec.attention)
    Sliding, ///< softmax attention over the last LayerSpec::slidingWindow tokens
    Chunked, ///< Llama-4 chunked attention within blocks of LayerSpec::attentionChunk tokens
    SparseMla, ///< MLA over the keys a DSA indexer selects (DeepSeek-V3.2, GLM-5)
    Compressed, ///< DeepSeek-V4: a sliding window plus KV compressed LayerSpec::compressRatio:1
    BlockSparse, ///< MiniMax-M3 block-sparse attention
    GatedDeltaNet, ///< Qwen3-Next / Qwen3.5 linear attention: a fixed recurrent state
    KimiDelta, ///< Kimi Delta Attention: a fixed recurrent state
    Mamba2, ///< Mamba-2 mixer (Nemotron-H): fixed convolution and SSM states
    Linear, ///< DeciLM: attention replaced by one linear layer
    None, ///< no token mixing in this layer (DeciLM no-op; Nemotron-H MLP/MoE layers)
};

/// What the feed-forward part of a decoder layer is.
enum class FfnKind : std::uint8_t {
    Dense, ///< one MLP of LayerSpec::ffnWidth (0: spec.intermediateSize)
    Moe, ///< routed experts, with the family's shared experts or dense MLP beside them
    Linear, ///< DeciLM: replaced by one linear layer
    None, ///< no feed-forward in this layer (DeciLM no-op; Nemotron-H mixer layers)
};

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
    bool mropeInterleaved = false; ///< Qwen3.5 `mrope_interleaved`: t/h/w pairs interleaved
    bool truncate = true; ///< yarn: round the correction range to whole dims (gpt-oss: false)
    /// Hunyuan dynamic NTK-alpha: base' = theta · alpha^(d / (d − 2)); 0: not given.
    double alpha = 0.0;
};

/// The RoPE of the sliding-window layers when it differs from the full layers' (Gemma-3/4).
struct LocalRope {
    double theta = 10000.0;
    RopeScaling scaling;
    double partialRotaryFactor = 1.0;
};

/// DeepSeek multi-head latent attention dimensions.
struct MlaSpec {
    std::int64_t qLoraRank = 0; ///< 0: q is projected directly (no q_a/q_b)
    std::int64_t kvLoraRank = 0;
    std::int64_t qkNopeHeadDim = 0;
    std::int64_t qkRopeHeadDim = 0;
    std::int64_t vHeadDim = 0;
    /// DeepSeek-V3.2 / GLM-5 sparse-attention indexer (extra weights per layer), 0 when absent.
    std::int64_t indexerHeads = 0;
    std::int64_t indexerHeadDim = 0;
    std::int64_t indexerTopK = 0;
    /// The indexer's rotary pairs: adjacent lanes (GLM-5's indexer_rope_interleave true) or
    /// rotate-half halves (DeepSeek-V3.2's reference: "rope in indexer is not interleaved").
    bool indexerRopeInterleave = false;
    bool noRope = false; ///< Kimi-Linear `mla_use_nope`: no rotary part at all
    /// `rope_interleave` (HF DeepseekV3 default true): the rotary dims rotate as adjacent pairs,
    /// as DeepSeek's reference does; false rotates halves (HF rotate_half).
    bool ropeInterleave = true;
    bool outputGate = false; ///< Kimi-K3 `mla_use_output_gate`: a sigmoid gate on the output
    /// The eps of q_a_layernorm and kv_a_layernorm. HF builds both with its RMSNorm's default,
    /// 1e-6, not rms_norm_eps (DeepseekV3Attention, the remote modeling_deepseek.py of Kimi-K2.x,
    /// GlmMoeDsaAttention, Kimi-Linear/K3's KimiMLAAttention), so a config whose rms_norm_eps is
    /// 1e-5 (Kimi-K2.5/K2.6, GLM-5, Kimi-Linear, Kimi-K3) still normalises the latents with 1e-6.
    double latentNormEps = 1e-6;
};

/// Linear-attention dimensions (Gated DeltaNet, Kimi Delta Attention).
struct LinearAttentionSpec {
    std::int64_t keyHeads = 0;
    std::int64_t valueHeads = 0;
    std::int64_t keyHeadDim = 0;
    std::int64_t valueHeadDim = 0;
    std::int64_t convKernel = 0; ///< short causal convolution width
    DType stateDtype = DType::F32; ///< dtype of the recurrent state
    /// KDA output gate: one full-rank `g_proj` [heads·dim, hidden] (Kimi-K3
    /// `use_full_rank_gate`); false: the low-rank pair `g_a_proj` / `g_b_proj` (Kimi-Linear).
    bool fullRankGate = false;
    /// KDA `A_log` stored as [key_head_dim] with the heads' values zero-padded (Kimi-K3); false:
    /// Kimi-Linear's [1, 1, heads, 1].
    bool paddedALog = false;
    /// KDA `gate_lower_bound` (Kimi-K3's safe forget gate, lower_bound · σ(e^A_log · (g +
    /// dt_bias))); 0: absent, the softplus gate −e^A_log · softplus(g + dt_bias).
    double gateLowerBound = 0.0;
};

/// Mamba-2 mixer dimensions.
struct MambaSpec {
    std::int64_t numHeads = 0;
    std::int64_t headDim = 0;
    std::int64_t stateSize = 0; ///< ssm_state_size (N)
    std::int64_t numGroups = 1; ///< n_groups of B and C
    std::int64_t convKernel = 4;
    std::int64_t chunkSize = 0;
    bool convBias = true;
    bool projBias = false;
    DType stateDtype = DType::F32; ///< mamba_ssm_cache_dtype
    /// Inner width: heads × head width.
    [[nodiscard]] std::int64_t inner() const { return numHeads * headDim; }
    /// Width of the convolved channels: x, B and C.
    [[nodiscard]] std::int64_t convChannels() const { return inner() + 2 * numGroups * stateSize; }
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
    bool expertBias = false; ///< biased expert projections (gpt-oss)
    bool routerBias = false; ///< a bias on the router logits (gpt-oss)
    bool gatedExperts = true; ///< gate/up/down experts (false: up/down, e.g. relu2)
    /// Experts work at this width between a shared down and up projection (Nemotron-3 latent
    /// MoE, Kimi-K3); 0: at the hidden size.
    std::int64_t latentSize = 0;
    /// An RMSNorm of latentSize on the experts' latent output before the up projection (Kimi-K3
    /// `latent_moe_use_norm`: `routed_expert_norm`).
    bool latentNorm = false;
    std::int64_t numHashLayers = 0; ///< DeepSeek-V4: first layers routed by token-id hash
    /// A dense MLP of the layer's ffnWidthOf runs beside the experts in every MoE layer, with
    /// its own norms (Gemma-4's `mlp` next to its experts). Hunyuan's mixed `shared_mlp` is a
    /// shared expert instead (numSharedExperts, sharedIntermediate).
    bool denseBeside = false;
};

/// How quantised Linear weights are stored.
enum class QuantScheme {
    BlockFp8, ///< `quant_method: fp8` with weight_block_size: F8 weight + per-block scale
    PackedInt, ///< compressed-tensors `pack-quantized` (Kimi-K2.5 INT4): I32 `weight_packed`,
               ///< BF16 `weight_scale` per group, I32 `weight_shape`
    Mxfp4, ///< gpt-oss `quant_method: mxfp4`: U8 `<p>_blocks` (two E2M1 per byte, 32 per block)
           ///< and U8 E8M0 `<p>_scales`
    PackedMxfp4, ///< compressed-tensors `mxfp4-pack-quantized`: U8 `weight_packed`, U8 E8M0
                 ///< `weight_scale` per 32
    Nvfp4, ///< ModelOpt NVFP4: U8 `weight` (two E2M1 per byte), F8_E4M3 `weight_scale` per 16,
           ///< F32 `weight_scale_2` and `input_scale`
    Fp8PerTensor, ///< ModelOpt FP8: F8_E4M3 `weight`, F32 `weight_scale` and `input_scale`
    Fp4Block, ///< DeepSeek-V4 FP4 experts: two E2M1 per byte, E8M0 `scale` per 32
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
    std::int64_t groupSize = 0; ///< values per scale along the input dim (group schemes)
    std::string format; ///< compressed-tensors format ("pack-quantized"); scale_fmt for FP8
    DType scaleDtype = DType::F32; ///< dtype of the per-block / per-group scales
    std::string source; ///< where it was read: "config.json", "hf_quant_config.json"
    /// The routed experts use another scheme than the other Linear modules (DeepSeek-V4: FP4
    /// experts beside FP8 attention).
    std::optional<QuantScheme> expertScheme;
    std::int64_t expertGroupSize = 0; ///< group size of expertScheme
    /// ModelOpt / gpt-oss wildcard patterns of modules left unquantised ("model.layers.*.attn").
    std::vector<std::string> excludePatterns;
    std::optional<DType> kvCacheDtype; ///< the checkpoint's KV-cache quantisation (ModelOpt FP8)
    /// Exactly the routed experts are quantised, whatever the ignore list leaves to the rule
    /// (Kimi-K3: its latent projections and AttnRes projections are Linear modules the list does
    /// not name, yet stored in BF16).
    bool routedExpertsOnly = false;
    /// ModelOpt MIXED_PRECISION over this format (nvidia DeepSeek-V4-*-NVFP4): the modules its
    /// `quantized_layers` names ("layers.3.ffn.experts") are re-quantised to mixedScheme, with
    /// their sub-modules; every other module keeps the scheme above.
    std::vector<std::string> mixedModules;
    std::optional<QuantScheme> mixedScheme;
    std::int64_t mixedGroupSize = 0; ///< group size of mixedScheme
};

/// The vision tower of a multimodal model (Qwen VL towers, Kimi-K2.5's MoonViT, Gemma-4's,
/// Kimi-K3's).
struct VisionSpec {
    std::string kind; ///< "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "moonvit", "gemma4", "moonvit3"
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
    std::int64_t numKvHeads = 0; ///< KV heads when they differ from numHeads, 0: numHeads
    std::int64_t headDim = 0; ///< head width when not hiddenSize / numHeads, 0: derived
    std::int64_t qkvWidth = 0; ///< width of the fused qkv projection when not 3·hidden, 0
    bool rmsNorm = false; ///< RMSNorm (no bias) instead of LayerNorm
    bool biases = true; ///< linear layers carry biases (MoonViT: the MLP's, `linear_bias`)
    bool attentionBias = true; ///< MoonViT `attn_bias`: wqkv and wo carry biases
    bool patchEmbedBias = true; ///< MoonViT `patch_embed_proj_bias`: the patch conv has a bias
    /// MoonViT `mm_projector_type`: "patchmerger" (LayerNorm before, biased Linears) or
    /// "patchmergerv2" (RMSNorm after, Linears without bias); empty for other towers.
    std::string projector;
    std::int64_t positionTableSize = 0; ///< learned position table rows (Gemma-4), 0: none
    std::int64_t poolingKernel = 0; ///< output pooling kernel (Gemma-4), 0: none
    std::int64_t projectorWidth = 0; ///< projector inner width when it differs, 0: merged width
    /// Gemma-4 `standardize`: learned per-channel bias and scale on the tower output.
    bool standardize = false;
    /// Gemma-4 `use_clipped_linears`: every Linear carries input/output min/max clip scalars.
    bool clippedLinears = false;
};

/// The audio encoder of a multimodal model (Gemma-4 E2B/E4B `gemma4_audio`): a convolutional
/// subsampler, conformer layers, an output projection. Counted with the vision tower (encoder
/// towers are outside the per-token active count).
struct AudioSpec {
    std::string kind; ///< "gemma4"
    std::int64_t depth = 0; ///< conformer layers
    std::int64_t hiddenSize = 0;
    std::int64_t numHeads = 0;
    std::vector<std::int64_t> subsamplingChannels; ///< output channels of the two 3×3 convs
    std::int64_t convKernel = 0; ///< depthwise conv1d width of the conformer's conv module
    std::int64_t outputSize = 0; ///< output_proj_dims
    bool clippedLinears = false; ///< input/output min/max clip scalars on every Linear
};

/// DeepSeek-V4 attention: one shared K=V head, low-rank queries, a grouped low-rank output,
/// and per-layer compressors / an indexer by compress ratio.
struct CompressedAttentionSpec {
    std::int64_t qLoraRank = 0;
    std::int64_t ropeDim = 0; ///< rotary part of the head
    std::int64_t oGroups = 0; ///< groups of the output projection
    std::int64_t oLoraRank = 0; ///< rank of each group's output projection
    double compressRopeTheta = 0.0; ///< RoPE base of the compressed entries
    std::int64_t indexerHeads = 0;
    std::int64_t indexerHeadDim = 0;
    std::int64_t indexerTopK = 0;
};

/// Hyper-connections (DeepSeek-V4): `streams` copies of the residual stream mixed by learned
/// per-layer maps (normalised with Sinkhorn iterations).
struct HyperConnectionSpec {
    std::int64_t streams = 0; ///< hc_mult
    std::int64_t sinkhornIters = 0;
    double eps = 0.0;
};

/// A block-sparse attention's indexer (MiniMax-M3): index heads score key blocks.
struct BlockSparseSpec {
    std::int64_t indexHeads = 0;
    std::int64_t indexDim = 0;
    std::int64_t blockSize = 0; ///< keys per block
    std::int64_t topKBlocks = 0; ///< blocks each query attends to
    std::int64_t initBlocks = 0; ///< first blocks every query keeps (sparse_init_block)
    std::int64_t localBlocks = 0; ///< newest blocks every query keeps (sparse_local_block)
    std::string scoreType; ///< how a block's score pools its keys' scores ("max")
};

/// Where a checkpoint keeps its weights: the prefixes of the Hugging Face tensor names.
struct CheckpointLayout {
    std::string textPrefix = "model"; ///< "model", "model.language_model", "language_model.model"
    std::string lmHead = "lm_head"; ///< "lm_head", "language_model.lm_head"
    std::string visionPrefix; ///< "visual", "model.visual", "vision_tower"; empty without vision
    std::string projectorPrefix; ///< "mm_projector" (Kimi-K2.5); empty when the tower merges
    std::string audioPrefix; ///< "model.audio_tower" (Gemma-4); empty without audio
    std::string audioProjectorPrefix; ///< "model.embed_audio" (Gemma-4)
};

/// Per-decoder-layer variations.
struct LayerSpec {
    MixerKind mixer = MixerKind::Attention;
    FfnKind ffn = FfnKind::Dense;
    bool rope = true; ///< Llama-4 NoPE layers have false
    std::int64_t slidingWindow = 0; ///< Sliding and Compressed layers: keys kept; 0: all
    std::int64_t attentionChunk = 0; ///< Chunked layers (Llama-4), 0: none
    std::int64_t compressRatio = 0; ///< Compressed layers: tokens per compressed KV entry
    std::int64_t numHeads = 0; ///< query heads of this layer, 0: spec.numHeads
    std::int64_t numKvHeads = 0; ///< KV heads of this layer, 0: spec.numKvHeads
    std::int64_t headDim = 0; ///< q/k/v head width of this layer, 0: spec.headDim
    bool sharedKv = false; ///< keys double as values (Gemma-4 attention_k_eq_v): no v_proj
    std::int64_t ffnWidth = 0; ///< dense MLP width of this layer, 0: spec.intermediateSize
    std::int64_t topK = 0; ///< MoE: experts per token here, 0: spec.moe->topK
    std::int64_t expertWidth = 0; ///< MoE: width of one routed expert here, 0: the spec's
    std::int64_t sharedWidth = -1; ///< MoE: shared-expert width here, -1: the spec's
    bool hashRouted = false; ///< DeepSeek-V4: experts chosen by a token-id hash table

    /// True if the feed-forward is a MoE.
    [[nodiscard]] bool moe() const { return ffn == FfnKind::Moe; }
    /// True if the mixer is softmax attention of any kind (it keeps a KV cache).
    [[nodiscard]] bool attends() const;
};

/// How the config reader accounted for one key of a config.
enum class KeyStatus {
    Understood, ///< read into the spec
    Inert, ///< changes no structure or parameter count (token ids, dropout, generation settings)
    Unknown, ///< not modelled: an error, or with ReadOptions::partial an ignored key
};

/// One key of a config (its dotted path, "text_config.layer_types") and its status.
struct ConfigKey {
    std::string path;
    KeyStatus status = KeyStatus::Understood;
};

/// A key whose structure Day0 does not model, and why ("not read by the deepseek_v3 reader",
/// "quant_method \"awq\" is not modelled").
struct IgnoredKey {
    std::string path;
    std::string reason;
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
    /// MiniMax-M2 `qk_norm_type: per_layer`: one RMSNorm over the whole q projection
    /// ([heads·head_dim]) and one over the whole k projection; qkNorm is then false.
    bool qkNormAcrossHeads = false;
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
    std::optional<LocalRope> slidingRope; ///< RoPE of the sliding layers, when it differs
    bool tieEmbeddings = false;

    DType dtype = DType::BF16; ///< torch_dtype of the published weights
    std::optional<QuantizationSpec> quantization;

    std::optional<MoeSpec> moe;
    std::optional<LinearAttentionSpec> linearAttention; ///< Gated DeltaNet / KDA layers
    std::optional<MambaSpec> mamba; ///< Mamba-2 layers
    bool attentionSinks = false; ///< a learned sink logit per head (gpt-oss `sinks`)
    bool attentionOutputGate = false; ///< sigmoid gate on the attention output (Qwen3-Next)
    double finalLogitSoftcap = 0.0; ///< tanh soft-capping of the logits (Gemma), 0: none
    double swigluLimit = 0.0; ///< clamp of the SwiGLU inputs (gpt-oss, DeepSeek-V4), 0: none
    double swigluAlpha = 0.0; ///< gain of the sigmoid in gpt-oss-style SwiGLU, 0: plain SiLU
    /// RMSNorm weights stored as offsets, y = x̂·(1 + w) (Gemma, Qwen3-Next, MiniMax-M3).
    bool normOffset = false;
    std::optional<CompressedAttentionSpec> compressedAttention; ///< DeepSeek-V4
    std::optional<HyperConnectionSpec> hyperConnections; ///< DeepSeek-V4
    std::optional<BlockSparseSpec> blockSparse; ///< MiniMax-M3
    std::int64_t attnResBlockSize = 0; ///< Kimi-K3 attention-residual block size, 0: none
    /// Kimi-K3 SiTU-GLU (hidden_act "situ"): β·tanh(gate/β)·σ(gate) · up, with
    /// `activation_situ_beta` β (absent: 1) and, when `activation_situ_linear_beta` β_lin is set
    /// (> 0), up replaced by β_lin·tanh(up/β_lin). Unused for other activations.
    double situBeta = 1.0;
    double situLinearBeta = 0.0; ///< 0: absent, up enters unclipped
    /// Gemma-4 per-layer input embeddings: width per layer and their vocabulary, 0: none.
    std::int64_t perLayerInputSize = 0;
    std::int64_t perLayerInputVocab = 0;
    std::int64_t kvSharedLayers = 0; ///< last layers reuse an earlier layer's KV (Gemma-4)
    /// Gemma-4 use_bidirectional_attention "all": text tokens attend both ways (not causal).
    bool bidirectionalText = false;
    /// MTP modules the config declares that the published checkpoints do not ship (MiniMax-M2
    /// num_mtp_modules), for messages; they hold no tensors.
    std::int64_t declaredMtpModules = 0;
    std::vector<LayerSpec> layers; ///< numLayers entries
    /// MTP decoder layers: DeepSeek num_nextn_predict_layers; Nemotron-H steps × the length of
    /// its MTP pattern (Super "*E": 2).
    std::int64_t numMtpLayers = 0;
    std::vector<LayerSpec> mtpLayers; ///< numMtpLayers entries: the pattern of each MTP decoder

    std::optional<VisionSpec> vision;
    std::optional<AudioSpec> audio; ///< Gemma-4 E2B/E4B audio encoder
    CheckpointLayout layout;

    std::string origin; ///< the file the spec was read from (for messages)
    std::vector<std::string> warnings; ///< e.g. "generic decoder reading of model_type 'foo'"
    std::vector<std::string> notes; ///< how the reading was made (non-finite JSON numbers, ...)
    /// Read with ReadOptions::partial although the config has structure Day0 does not model:
    /// every figure leaves `ignored` out, and every output says so.
    bool partial = false;
    std::vector<IgnoredKey> ignored; ///< the config keys not modelled; empty when exact
    std::vector<ConfigKey> keys; ///< every key of the config and how it was accounted for

    /// Number of decoder layers whose feed-forward is MoE.
    [[nodiscard]] std::int64_t numMoeLayers() const;
    /// Query heads, KV heads, head width of a layer (its overrides or the spec's).
    [[nodiscard]] std::int64_t headsOf(const LayerSpec& layer) const;
    [[nodiscard]] std::int64_t kvHeadsOf(const LayerSpec& layer) const;
    [[nodiscard]] std::int64_t headDimOf(const LayerSpec& layer) const;
    /// Dense MLP width of a layer.
    [[nodiscard]] std::int64_t ffnWidthOf(const LayerSpec& layer) const;
    /// MoE top-k, routed-expert width and shared-expert width of a layer (0 without MoE).
    [[nodiscard]] std::int64_t topKOf(const LayerSpec& layer) const;
    [[nodiscard]] std::int64_t expertWidthOf(const LayerSpec& layer) const;
    [[nodiscard]] std::int64_t sharedWidthOf(const LayerSpec& layer) const;
    /// Query heads × the q/k head width (the attention inner width).
    [[nodiscard]] std::int64_t qHeadWidth() const;
};

/// Lower-case name of a family ("deepseek_v3").
std::string familyName(Family family);
/// "MHA", "GQA", "MQA", "MLA".
std::string attentionKindName(AttentionKind kind);
/// MHA, MQA or GQA by the number of KV heads against query heads.
AttentionKind attentionKindForHeads(std::int64_t heads, std::int64_t kvHeads);
/// "attention", "sliding", "chunked", "sparse_mla", "compressed", "block_sparse",
/// "gated_deltanet", "kimi_delta", "mamba2", "linear", "none" (stable, used in JSON).
std::string mixerKindName(MixerKind kind);
/// "dense", "moe", "linear", "none".
std::string ffnKindName(FfnKind kind);
/// "understood", "inert", "unknown".
std::string keyStatusName(KeyStatus status);
/// "block_fp8", "packed_int", "mxfp4", "packed_mxfp4", "nvfp4", "fp8_tensor", "fp4_block".
std::string quantSchemeName(QuantScheme scheme);
/// Parses a family name as familyName() spells it.
std::optional<Family> parseFamily(const std::string& name);

} // namespace day0::model
