#pragma once

// Hand-built model specs and layer graphs for the plan tests: independent of core/model's graph
// builder, so the estimator is checked against layer graphs whose every tensor is written here.

#include "base/result.h"
#include "model/layer_graph.h"
#include "model/model_spec.h"
#include "plan/model_summary.h"

#include <nlohmann/json.hpp>

namespace day0::plan::test {

/// GPT-3 style: MHA, 2-matrix (GeLU) MLP of width ffn, untied embeddings, norm weights only.
model::ModelSpec gptSpec(int hidden, int heads, int layers, int vocab, int ffn);
/// Llama style: GQA with `kvHeads`, SwiGLU MLP of width ffn.
model::ModelSpec llamaSpec(int hidden, int heads, int kvHeads, int layers, int vocab, int ffn);
/// Mixtral / Qwen-MoE style: GQA attention and MoE in every layer after `firstDense` dense ones.
model::ModelSpec moeSpec(int hidden, int heads, int kvHeads, int layers, int vocab, int ffn,
    int experts, int topK, int expertFfn, int sharedFfn, int firstDense);
/// DeepSeek-V3 style: MLA attention, shared + routed experts, `mtp` MTP layers.
model::ModelSpec mlaSpec(int hidden, int heads, int layers, int vocab, int ffn, int experts,
    int topK, int expertFfn, int sharedFfn, int firstDense, int qLora, int kvLora, int nope,
    int rope, int vDim, int mtp);

/// Every weight tensor of the spec with its HF name, shape, dtype and parallel role.
model::LayerGraph buildTestGraph(const model::ModelSpec& spec);

/// The model of a row of resources/plan/published_measurements.json: an inline GPT shape
/// ({"gpt": {hidden, heads, layers, ffn, vocab}}, Megatron's with a tied head) built here, or a
/// bundled config.
Result<ModelSummary> publishedCaseModel(const nlohmann::json& model);

} // namespace day0::plan::test
