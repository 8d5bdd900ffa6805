#include "model/layer_graph.h"

#include "model/graph_builder.h"

namespace day0::model {

namespace {

bool isVision(BlockKind kind)
{
    return kind == BlockKind::VisionPatchEmbed || kind == BlockKind::VisionBlock
        || kind == BlockKind::VisionMerger;
}

// Parameters of `t` that one token uses: the routed experts contribute top-k of their experts
// (all experts of a layer have the same size), everything else fully. `topK` is the block's.
std::int64_t activeParams(const TensorSpec& t, std::int64_t topK)
{
    const std::int64_t p = t.params();
    if (t.lookupTable) {
        return 0;
    }
    if (t.expert >= 0) {
        return t.expert < topK ? p : 0;
    }
    if (t.packedExperts > 0) {
        return p / t.packedExperts * std::min(topK, t.packedExperts);
    }
    return p;
}

} // namespace

std::int64_t TensorSpec::numel() const
{
    std::int64_t n = 1;
    for (const auto d : shape) {
        n *= d;
    }
    return n;
}

std::int64_t TensorSpec::params() const
{
    if (kind == TensorKind::Scale || kind == TensorKind::Metadata) {
        return 0;
    }
    return numel() * packFactor;
}

LayerGraph buildLayerGraph(const ModelSpec& spec)
{
    detail::GraphBuilder builder(spec);
    // Data-flow order: the vision tower feeds the embedding sequence of the text tower.
    detail::addVisionTower(builder);
    detail::addTextTower(builder);
    LayerGraph graph = builder.take();
    graph.summaries = summarizeBlocks(graph);
    return graph;
}

std::vector<BlockSummary> summarizeBlocks(const LayerGraph& graph)
{
    std::vector<BlockSummary> out;
    out.reserve(graph.blocks.size());
    for (std::size_t i = 0; i < graph.blocks.size(); ++i) {
        const Block& block = graph.blocks[i];
        BlockSummary s;
        s.blockIndex = i;
        s.kind = block.kind;
        s.layer = block.layer;
        s.moe = block.moe;
        const std::int64_t topK = block.topK;
        for (const auto& t : block.tensors) {
            const TensorTally tally { t.params(), t.bytes(), 1 };
            s.total += tally;
            if (t.isExpert()) {
                s.experts += tally;
            } else {
                s.byRole[static_cast<std::size_t>(t.role)] += tally;
            }
            const std::int64_t active = activeParams(t, topK);
            s.activeParams += active;
            s.paramsByComponent[static_cast<std::size_t>(t.component)] += tally.params;
            s.activeByComponent[static_cast<std::size_t>(t.component)] += active;
        }
        s.numExperts = block.numExperts;
        out.push_back(s);
    }
    return out;
}

ParameterCounts LayerGraph::countParameters() const
{
    ParameterCounts c;
    std::array<ParameterCounts::ComponentCount, kComponentCount> components {};
    for (std::size_t i = 0; i < kComponentCount; ++i) {
        components[i].component = static_cast<Component>(i);
    }
    for (const auto& block : blocks) {
        const bool mtp = block.kind == BlockKind::Mtp;
        const bool vision = isVision(block.kind);
        const std::int64_t topK = block.topK;
        for (const auto& t : block.tensors) {
            const std::int64_t p = t.params();
            const std::int64_t active = activeParams(t, topK);
            c.total += p;
            c.bytes += t.bytes();
            c.tensors += 1;
            auto& component = components[static_cast<std::size_t>(t.component)];
            component.total += p;
            component.active += active;
            if (mtp) {
                c.mtp += p;
                continue;
            }
            if (vision) {
                c.vision += p;
                continue;
            }
            c.active += active;
            if (t.component == Component::Embedding) {
                c.embedding += p;
            } else if (t.component == Component::LmHead) {
                c.lmHead += p;
            }
        }
    }
    c.activeWithoutEmbedding = c.active - c.embedding;
    c.mainModel = c.total - c.mtp - c.vision;
    for (const auto& component : components) {
        if (component.total > 0) {
            c.byComponent.push_back(component);
        }
    }
    return c;
}

std::size_t LayerGraph::tensorCount() const
{
    std::size_t n = 0;
    for (const auto& block : blocks) {
        n += block.tensors.size();
    }
    return n;
}

const TensorSpec* LayerGraph::findTensor(const std::string& name) const
{
    auto searchBlock = [&](const Block& block) -> const TensorSpec* {
        for (const auto& t : block.tensors) {
            if (t.name == name) {
                return &t;
            }
        }
        return nullptr;
    };
    // Most names start with their block's anchor followed by '.'; try those blocks first.
    for (const auto& block : blocks) {
        const auto& a = block.anchor;
        if (name.size() > a.size() && name.compare(0, a.size(), a) == 0 && name[a.size()] == '.') {
            if (const auto* t = searchBlock(block)) {
                return t;
            }
        }
    }
    for (const auto& block : blocks) {
        if (const auto* t = searchBlock(block)) {
            return t;
        }
    }
    return nullptr;
}

const Block* LayerGraph::findBlock(const std::string& anchor) const
{
    for (const auto& block : blocks) {
        if (block.anchor == anchor) {
            return &block;
        }
    }
    return nullptr;
}

std::vector<const Block*> LayerGraph::decoderBlocks() const
{
    std::vector<const Block*> out;
    for (const auto& block : blocks) {
        if (block.kind == BlockKind::Decoder) {
            out.push_back(&block);
        }
    }
    return out;
}

std::string componentName(Component component)
{
    switch (component) {
    case Component::Embedding:
        return "embedding";
    case Component::Attention:
        return "attention";
    case Component::DenseMlp:
        return "dense_mlp";
    case Component::RoutedExperts:
        return "routed_experts";
    case Component::SharedExperts:
        return "shared_experts";
    case Component::Router:
        return "router";
    case Component::Norm:
        return "norm";
    case Component::LmHead:
        return "lm_head";
    case Component::Mtp:
        return "mtp";
    case Component::Vision:
        return "vision";
    case Component::Residual:
        return "residual";
    }
    return "?";
}

std::string parallelRoleName(ParallelRole role)
{
    switch (role) {
    case ParallelRole::ColumnParallel:
        return "column";
    case ParallelRole::RowParallel:
        return "row";
    case ParallelRole::VocabParallel:
        return "vocab";
    case ParallelRole::Replicated:
        return "replicated";
    }
    return "?";
}

std::string blockKindName(BlockKind kind)
{
    switch (kind) {
    case BlockKind::Embedding:
        return "embedding";
    case BlockKind::Decoder:
        return "decoder";
    case BlockKind::FinalNorm:
        return "final_norm";
    case BlockKind::LmHead:
        return "lm_head";
    case BlockKind::Mtp:
        return "mtp";
    case BlockKind::VisionPatchEmbed:
        return "vision_patch_embed";
    case BlockKind::VisionBlock:
        return "vision_block";
    case BlockKind::VisionMerger:
        return "vision_merger";
    }
    return "?";
}

std::string tensorKindName(TensorKind kind)
{
    switch (kind) {
    case TensorKind::Weight:
        return "weight";
    case TensorKind::Bias:
        return "bias";
    case TensorKind::Scale:
        return "scale";
    case TensorKind::Metadata:
        return "metadata";
    }
    return "?";
}

} // namespace day0::model
