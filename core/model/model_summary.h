#pragma once

#include "model/layer_graph.h"
#include "model/model_spec.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace day0::model {

/// One labelled line of a model's architecture summary ("attention", "MLA: 128 heads, ...").
struct SummaryLine {
    std::string label;
    std::string value;
};

/// One cell of a model's layer pattern: what a decoder (or MTP) layer is.
struct LayerCell {
    std::int64_t index = 0; ///< layer index (MTP layers continue after the decoder layers)
    bool mtp = false;
    MixerKind mixer = MixerKind::Attention;
    FfnKind ffn = FfnKind::Dense;
    std::int64_t window = 0; ///< sliding window / chunk, 0: none
    std::int64_t compressRatio = 0; ///< DeepSeek-V4 compressed attention
    std::int64_t heads = 0; ///< query heads where they vary per layer
    std::int64_t kvHeads = 0;
    std::int64_t ffnWidth = 0; ///< dense width where it varies per layer
    std::int64_t topK = 0; ///< experts per token of a MoE layer
    bool hashRouted = false;
};

/// Every decoder layer then every MTP layer, in order (the model panel draws one cell each).
std::vector<LayerCell> layerPattern(const ModelSpec& spec);

/// One letter per mixer kind for compact patterns: A attention, S sliding, C chunked, D sparse
/// MLA (DSA), Z compressed, B block-sparse, G Gated DeltaNet, K KDA, M Mamba-2, L linear,
/// '-' none.
char mixerLetter(MixerKind kind);

/// The layer pattern in one line: kinds with counts, then the pattern compressed into repeated
/// units ("sliding ×18, attention ×18; (SA)×18"), then the feed-forward kinds.
std::string patternLine(const ModelSpec& spec);

/// How the weights of one part of the model are stored in the checkpoint.
struct WeightFormat {
    Component component = Component::Attention;
    std::string format; ///< "bf16", "fp8 e4m3, 128×128 block scales", "nvfp4", "mxfp4", ...
    std::int64_t params = 0; ///< parameters stored this way
    std::int64_t bytes = 0; ///< their bytes with their scales
};

/// The storage formats of the graph's weights by component (a component may hold several,
/// e.g. FP8 projections beside BF16 norms), largest first within a component.
std::vector<WeightFormat> weightFormats(const LayerGraph& graph);

/// The architecture in readable lines (family, layers, widths, attention, experts, RoPE, vision,
/// quantisation, dtype), as `day0 inspect` prints it and the model panel shows it.
std::vector<SummaryLine> describeArchitecture(const ModelSpec& spec);

/// The `day0 inspect --json` document of a graph: model_type, family, num_layers, the widths,
/// MoE/MLA/vision/quantisation sections, and "params" {total, active, embedding, lm_head, mtp,
/// vision, active_without_embedding, main_model, by_component} as integers.
nlohmann::json inspectJson(const LayerGraph& graph, const ParameterCounts& counts);

} // namespace day0::model
