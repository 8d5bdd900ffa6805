#pragma once

#include "base/dtype.h"
#include "model/model_spec.h"

#include <cstdint>
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
};

/// What a tensor holds.
enum class TensorKind {
    Weight,
    Bias,
    Scale, ///< block-FP8 `weight_scale_inv`: not a parameter, travels with its weight
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

    /// Number of elements.
    [[nodiscard]] std::int64_t numel() const;
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
    std::int64_t vision = 0; ///< vision tower
    std::int64_t activeWithoutEmbedding = 0; ///< active minus the input-embedding lookup
    std::int64_t mainModel = 0; ///< total without MTP and vision ("671B" for DeepSeek-V3)

    /// Totals and per-token actives per component.
    struct ComponentCount {
        Component component;
        std::int64_t total = 0;
        std::int64_t active = 0;
    };
    std::vector<ComponentCount> byComponent;
};

/// Every block and weight tensor of a model, with HF names, shapes, dtypes and parallel roles.
struct LayerGraph {
    ModelSpec spec;
    std::vector<Block> blocks;

    /// Counts parameters from the tensors (total, active, embedding, ...).
    [[nodiscard]] ParameterCounts countParameters() const;
    /// Number of tensors (weights, biases and scales).
    [[nodiscard]] std::size_t tensorCount() const;
    /// Finds a tensor by its HF name, nullptr if absent.
    [[nodiscard]] const TensorSpec* findTensor(const std::string& name) const;
};

/// Builds the graph of a spec. Pure and deterministic.
LayerGraph buildLayerGraph(const ModelSpec& spec);

std::string componentName(Component component);
std::string parallelRoleName(ParallelRole role);
std::string blockKindName(BlockKind kind);

} // namespace day0::model
