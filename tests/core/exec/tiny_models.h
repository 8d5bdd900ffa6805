#pragma once

// Small random models of the supported families, built in memory (spec, HF config.json and
// weights), so the engine can be tested without the model reader or the shrink command.

#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>

namespace day0::test {

struct TinyModel {
    model::ModelSpec spec;
    nlohmann::json config; ///< the HF config.json describing the same model
    std::map<std::string, numerics::Tensor> weights; ///< F32 unless said otherwise
};

TinyModel tinyLlama(); ///< GQA, llama3 rope scaling
TinyModel tinyMixtral(); ///< softmax top-2 of 4 experts, block_sparse_moe names
TinyModel tinyQwen3Moe(); ///< QK-norm, head_dim != hidden/heads, top-2 of 8 experts
TinyModel tinyDeepseekV3(); ///< MLA, YaRN, sigmoid grouped routing with bias, shared expert
TinyModel tinyQwen2(); ///< q/k/v biases

/// Writes config.json and model.safetensors into `dir` (created), weights stored as `storage`.
void writeCheckpoint(
    const TinyModel& model, const std::filesystem::path& dir, DType storage = DType::F32);

} // namespace day0::test
