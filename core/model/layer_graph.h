#pragma once

#include "base/dtype.h"
#include "model/model_spec.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace day0::model {

/// How a tensor is split across tensor-parallel ranks (experts additionally split by EP).
enum class ParallelRole {
    ColumnParallel, ///< output dim split (q/k/v, gate/up)
    RowParallel, ///< input dim split (o, down)
    VocabParallel, ///< vocabulary rows split (embedding, lm_head)
    Replicated, ///< every rank holds all of it (norms, routers, MLA latent projections)
};
inline constexpr std::size_t kParallelRoleCount = 4;

/// What part of the model a tensor belongs to, for parameter breakdowns.
enum class Component {
    Embedding,
    Attention,
    DenseMlp,
    RoutedExperts,
    SharedExperts,
    Router,
    Norm,
    LmHead,
    Mtp,
    Vision,
    Residual, ///< residual-stream mixing weights (DeepSeek-V4 hyper-connections, Kimi AttnRes)
};
inline constexpr std::size_t kComponentCount = 11;

/// What a tensor holds.
enum class TensorKind {
    Weight,
    Bias,
    Scale, ///< block-FP8 `weight_scale_inv` or group `weight_scale`: not a parameter, travels
           ///< with its weight
    Metadata, ///< compressed-tensors `weight_shape`: not a parameter
};

/// One tensor as it is named and shaped in the Hugging Face checkpoint.
struct TensorSpec {
    std::string name; ///< e.g. "model.layers.7.self_attn.q_proj.weight"
    std::vector<std::int64_t> shape; ///< PyTorch order ([out, in] for linear weights)
    DType dtype = DType::BF16;
    ParallelRole role = ParallelRole::Replicated;
    Component component = Component::Attention;
    TensorKind kind = TensorKind::Weight;
    std::int32_t layer = -1; ///< decoder (or MTP / vision) layer index, -1 outside layers
    std::int32_t expert = -1; ///< routed expert index, -1 when not a per-expert tensor
    std::int64_t packedExperts = 0; ///< >0 for fused [E, ...] expert tensors (experts in dim 0)
    std::int32_t packFactor = 1; ///< logical weights per stored element (8: INT4 packed in I32)
    bool optional = false; ///< some published checkpoints of the family omit it (see its note)
    /// An integer table indexed by token id (DeepSeek-V4's hash-routing `tid2eid`): stored and
    /// counted in totals, but no token computes with it, so it is not in the active count.
    bool lookupTable = false;
    /// A second dtype published checkpoints of the family store it in (Qwen3.5 keeps A_log in
    /// F32, Qwen3.6 in BF16; config.json cannot tell them apart); equal to dtype when there is
    /// one. Counts and bytes use dtype.
    std::optional<DType> altDtype;

    /// Number of stored elements.
    [[nodiscard]] std::int64_t numel() const;
    /// Parameters it holds: numel × packFactor for weights and biases, 0 for scales/metadata.
    [[nodiscard]] std::int64_t params() const;
    /// Bytes at `dtype`.
    [[nodiscard]] std::int64_t bytes() const { return numel() * dtypeSize(dtype); }
    /// True if the tensor is a routed-expert tensor (split by EP).
    [[nodiscard]] bool isExpert() const { return expert >= 0 || packedExperts > 0; }
};

/// What a block of the graph is.
enum class BlockKind {
    Embedding,
    Decoder,
    FinalNorm,
    LmHead,
    Mtp,
    VisionPatchEmbed,
    VisionBlock,
    VisionMerger,
};

/// A module with weights, named by its anchor (DESIGN.md §3: HF module path).
struct Block {
    std::string anchor; ///< "model.embed_tokens", "model.layers.7", "lm_head", "visual.blocks.3"
    BlockKind kind = BlockKind::Decoder;
    std::int32_t layer = -1; ///< decoder / MTP / vision block index
    bool moe = false;
    std::int64_t topK = 0; ///< routed experts one token uses in this block (0 without experts)
    std::int64_t numExperts = 0; ///< routed experts of this block
    std::vector<TensorSpec> tensors;
};

/// Parameter counts, all in parameters (not bytes). Scales are not parameters.
struct ParameterCounts {
    std::int64_t total = 0; ///< every parameter in the checkpoint (incl. MTP and vision)
    std::int64_t active = 0; ///< per token: top-k routed + shared + everything dense, incl. input
                             ///< embedding and lm_head (MTP and vision excluded)
    std::int64_t embedding = 0; ///< input embedding
    std::int64_t lmHead = 0; ///< output head (0 when tied)
    std::int64_t mtp = 0; ///< MTP / next-n layers (all their weights)
    std::int64_t vision = 0; ///< encoder towers: vision and (Gemma-4 E2B/E4B) audio, projectors
    std::int64_t activeWithoutEmbedding = 0; ///< active minus the input-embedding lookup
    std::int64_t mainModel = 0; ///< total without MTP and vision ("671B" for DeepSeek-V3)
    std::int64_t bytes = 0; ///< checkpoint bytes of every tensor at its dtype, scales included
    std::int64_t tensors = 0; ///< number of tensors, scales included

    /// Totals and per-token actives per component.
    struct ComponentCount {
        Component component;
        std::int64_t total = 0;
        std::int64_t active = 0;
    };
    std::vector<ComponentCount> byComponent;
};

/// Parameters, bytes and tensor count of a set of tensors.
struct TensorTally {
    std::int64_t params = 0; ///< parameters (scales and metadata are not parameters)
    std::int64_t bytes = 0; ///< stored bytes at the tensors' dtypes, scales included
    std::int64_t tensors = 0;

    TensorTally& operator+=(const TensorTally& other)
    {
        params += other.params;
        bytes += other.bytes;
        tensors += other.tensors;
        return *this;
    }
};

/// One block reduced to the figures a memory estimator or planner needs, so that re-planning
/// thousands of layouts never walks the tensors again (Kimi-K2 has ~140k). Computed once by
/// buildLayerGraph (LayerGraph::summaries); plain data, safe to read from any thread.
///
/// How to use: per rank, the bytes a block puts on a device are
///   byRole[Replicated].bytes + (byRole[ColumnParallel] + byRole[RowParallel]
///   + byRole[VocabParallel]).bytes / tp + experts.bytes / (ep × etp)
/// and the same with `params` for gradients and optimizer state. Scales split with their weights.
/// k_proj/v_proj are column-parallel by KV head; once tp exceeds spec.numKvHeads, serving
/// engines replicate them instead (vLLM QKVParallelLinear), which the estimator derives from the
/// spec rather than from these tallies.
struct BlockSummary {
    std::size_t blockIndex = 0; ///< index into LayerGraph::blocks
    BlockKind kind = BlockKind::Decoder;
    std::int32_t layer = -1;
    bool moe = false;
    std::array<TensorTally, kParallelRoleCount> byRole {}; ///< non-expert tensors by ParallelRole
    TensorTally experts; ///< routed-expert tensors of all experts (split by EP, then ETP)
    std::int64_t numExperts = 0; ///< routed experts in this block (0 for dense blocks)
    TensorTally total; ///< everything in the block
    std::int64_t activeParams = 0; ///< parameters one token uses (top-k of the routed experts)
    std::array<std::int64_t, kComponentCount> paramsByComponent {}; ///< indexed by Component
    std::array<std::int64_t, kComponentCount> activeByComponent {}; ///< indexed by Component

    /// Tally of the non-expert tensors with a given role.
    [[nodiscard]] const TensorTally& role(ParallelRole r) const
    {
        return byRole[static_cast<std::size_t>(r)];
    }
};

/// Every block and weight tensor of a model, with HF names, shapes, dtypes and parallel roles.
/// Blocks are in data-flow order: vision tower (if any), embedding, decoder layers, final norm,
/// lm_head, MTP layers.
struct LayerGraph {
    ModelSpec spec;
    std::vector<Block> blocks;
    std::vector<BlockSummary> summaries; ///< one per block; call summarizeBlocks after edits

    /// Counts parameters from the tensors (total, active, embedding, ...).
    [[nodiscard]] ParameterCounts countParameters() const;
    /// Number of tensors (weights, biases and scales).
    [[nodiscard]] std::size_t tensorCount() const;
    /// Finds a tensor by its HF name, nullptr if absent. Looks in the blocks whose anchor
    /// prefixes the name first, so a lookup costs one block, not the whole graph.
    [[nodiscard]] const TensorSpec* findTensor(const std::string& name) const;
    /// Finds a block by its anchor, nullptr if absent.
    [[nodiscard]] const Block* findBlock(const std::string& anchor) const;
    /// Decoder blocks (not MTP, not vision), in layer order.
    [[nodiscard]] std::vector<const Block*> decoderBlocks() const;
};

/// Builds the graph of a spec (and its summaries). Pure and deterministic; Kimi-K2's ~140k
/// tensors take about 30 ms of one core (tests/bench/model_graph_bench).
LayerGraph buildLayerGraph(const ModelSpec& spec);

/// Reduces every block of `graph` to its BlockSummary (in block order). O(tensors).
std::vector<BlockSummary> summarizeBlocks(const LayerGraph& graph);

/// "embedding", "attention", "dense_mlp", "routed_experts", ... (stable, used in JSON).
std::string componentName(Component component);
/// "column", "row", "vocab", "replicated".
std::string parallelRoleName(ParallelRole role);
/// "embedding", "decoder", "final_norm", "lm_head", "mtp", "vision_patch_embed", ...
std::string blockKindName(BlockKind kind);
/// "weight", "bias", "scale", "metadata".
std::string tensorKindName(TensorKind kind);

} // namespace day0::model
