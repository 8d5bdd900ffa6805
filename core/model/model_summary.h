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

/// The architecture in readable lines (family, layers, widths, attention, experts, RoPE, vision,
/// quantisation, dtype), as `day0 inspect` prints it and the model panel shows it.
std::vector<SummaryLine> describeArchitecture(const ModelSpec& spec);

/// The `day0 inspect --json` document of a graph: model_type, family, num_layers, the widths,
/// MoE/MLA/vision/quantisation sections, and "params" {total, active, embedding, lm_head, mtp,
/// vision, active_without_embedding, main_model, by_component} as integers.
nlohmann::json inspectJson(const LayerGraph& graph, const ParameterCounts& counts);

} // namespace day0::model
