#include "tiny_models.h"

#include "checkpoint/tensor_file.h"
#include "exec/forward.h"

#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

namespace day0::test {

namespace {

std::uint32_t fnv1a(const std::string& s)
{
    std::uint32_t h = 2166136261u;
    for (const char c : s) {
        h = (h ^ std::uint8_t(c)) * 16777619u;
    }
    return h;
}

/// Deterministic weights: norms near 1, biases small, matrices N(0, 1/in).
numerics::Tensor makeWeight(const std::string& name, const std::vector<std::int64_t>& shape)
{
    std::mt19937 rng(fnv1a(name));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(numerics::numelOf(shape)));
    const bool norm = name.find("norm.weight") != std::string::npos;
    const bool bias = name.ends_with(".bias") || name.ends_with("e_score_correction_bias");
    const bool embed = name == "model.embed_tokens.weight";
    const float scale = shape.size() == 2 && !embed ? 1.0f / std::sqrt(float(shape[1])) : 1.0f;
    for (auto& x : v) {
        const float g = normal(rng);
        if (norm) {
            x = 1.0f + 0.1f * g;
        } else if (bias) {
            x = 0.05f * g;
        } else {
            x = scale * g;
        }
    }
    return numerics::Tensor::fromFloats(shape, v);
}

void fillWeights(TinyModel& m)
{
    for (const auto& req : exec::detail::requiredWeights(m.spec)) {
        if (req.optional && m.spec.tieEmbeddings) {
            continue;
        }
        m.weights[req.name] = makeWeight(req.name, req.shape);
    }
}

model::ModelSpec baseSpec(const std::string& modelType, model::Family family)
{
    model::ModelSpec s;
    s.name = "tiny-" + modelType;
    s.modelType = modelType;
    s.family = family;
    s.hiddenSize = 64;
    s.numLayers = 2;
    s.numHeads = 4;
    s.numKvHeads = 2;
    s.headDim = 16;
    s.intermediateSize = 128;
    s.vocabSize = 256;
    s.maxPositions = 512;
    s.attention = model::AttentionKind::GQA;
    s.normEps = 1e-5;
    s.ropeTheta = 10000.0;
    s.dtype = DType::F32;
    s.layers.assign(2, model::LayerSpec {});
    return s;
}

nlohmann::json baseConfig(const model::ModelSpec& s, const std::string& architecture)
{
    return { { "architectures", { architecture } }, { "model_type", s.modelType },
        { "hidden_size", s.hiddenSize }, { "num_hidden_layers", s.numLayers },
        { "num_attention_heads", s.numHeads }, { "num_key_value_heads", s.numKvHeads },
        { "intermediate_size", s.intermediateSize }, { "vocab_size", s.vocabSize },
        { "max_position_embeddings", s.maxPositions }, { "rms_norm_eps", s.normEps },
        { "rope_theta", s.ropeTheta }, { "hidden_act", "silu" }, { "tie_word_embeddings", false },
        { "torch_dtype", "float32" } };
}

} // namespace

TinyModel tinyLlama()
{
    TinyModel m;
    m.spec = baseSpec("llama", model::Family::Llama);
    m.spec.ropeScaling.type = "llama3";
    m.spec.ropeScaling.factor = 8.0;
    m.spec.ropeScaling.lowFreqFactor = 1.0;
    m.spec.ropeScaling.highFreqFactor = 4.0;
    m.spec.ropeScaling.originalMaxPositions = 64;
    m.config = baseConfig(m.spec, "LlamaForCausalLM");
    m.config["rope_scaling"]
        = { { "rope_type", "llama3" }, { "factor", 8.0 }, { "low_freq_factor", 1.0 },
              { "high_freq_factor", 4.0 }, { "original_max_position_embeddings", 64 } };
    fillWeights(m);
    return m;
}

TinyModel tinyQwen2()
{
    TinyModel m;
    m.spec = baseSpec("qwen2", model::Family::Qwen2);
    m.spec.attentionBias = true;
    m.spec.ropeTheta = 1000000.0;
    m.config = baseConfig(m.spec, "Qwen2ForCausalLM");
    fillWeights(m);
    return m;
}

TinyModel tinyMixtral()
{
    TinyModel m;
    m.spec = baseSpec("mixtral", model::Family::Mixtral);
    model::MoeSpec moe;
    moe.numExperts = 4;
    moe.topK = 2;
    moe.expertIntermediate = 96;
    moe.normTopkProb = true;
    m.spec.moe = moe;
    for (auto& l : m.spec.layers) {
        l.ffn = model::FfnKind::Moe;
    }
    m.config = baseConfig(m.spec, "MixtralForCausalLM");
    m.config["intermediate_size"] = 96;
    m.config["num_local_experts"] = 4;
    m.config["num_experts_per_tok"] = 2;
    fillWeights(m);
    return m;
}

TinyModel tinyQwen3Moe()
{
    TinyModel m;
    m.spec = baseSpec("qwen3_moe", model::Family::Qwen3Moe);
    m.spec.headDim = 32;
    m.spec.qkNorm = true;
    m.spec.normEps = 1e-6;
    model::MoeSpec moe;
    moe.numExperts = 8;
    moe.topK = 2;
    moe.expertIntermediate = 48;
    moe.normTopkProb = true;
    m.spec.moe = moe;
    for (auto& l : m.spec.layers) {
        l.ffn = model::FfnKind::Moe;
    }
    m.config = baseConfig(m.spec, "Qwen3MoeForCausalLM");
    m.config["head_dim"] = 32;
    m.config["rms_norm_eps"] = 1e-6;
    m.config["num_experts"] = 8;
    m.config["num_experts_per_tok"] = 2;
    m.config["moe_intermediate_size"] = 48;
    m.config["norm_topk_prob"] = true;
    m.config["decoder_sparse_step"] = 1;
    m.config["mlp_only_layers"] = nlohmann::json::array();
    fillWeights(m);
    return m;
}

TinyModel tinyDeepseekV3()
{
    TinyModel m;
    m.spec = baseSpec("deepseek_v3", model::Family::DeepseekV3);
    m.spec.numLayers = 3;
    m.spec.numKvHeads = 4;
    m.spec.attention = model::AttentionKind::MLA;
    m.spec.mla.qLoraRank = 32;
    m.spec.mla.kvLoraRank = 32;
    m.spec.mla.qkNopeHeadDim = 16;
    m.spec.mla.qkRopeHeadDim = 8;
    m.spec.mla.vHeadDim = 16;
    m.spec.headDim = 24;
    m.spec.normEps = 1e-6;
    m.spec.maxPositions = 40 * 64;
    m.spec.ropeScaling.type = "yarn";
    m.spec.ropeScaling.factor = 40.0;
    m.spec.ropeScaling.originalMaxPositions = 64;
    m.spec.ropeScaling.betaFast = 32.0;
    m.spec.ropeScaling.betaSlow = 1.0;
    m.spec.ropeScaling.mscale = 1.0;
    m.spec.ropeScaling.mscaleAllDim = 1.0;
    model::MoeSpec moe;
    moe.numExperts = 8;
    moe.topK = 2;
    moe.expertIntermediate = 32;
    moe.numSharedExperts = 1;
    moe.sharedIntermediate = 32;
    moe.scoring = model::RouterScoring::Sigmoid;
    moe.expertScoreBias = true;
    moe.normTopkProb = true;
    moe.routedScalingFactor = 2.5;
    moe.numGroups = 4;
    moe.topkGroup = 2;
    m.spec.moe = moe;
    m.spec.layers.assign(3, model::LayerSpec {});
    m.spec.layers[1].ffn = model::FfnKind::Moe;
    m.spec.layers[2].ffn = model::FfnKind::Moe;
    m.config = baseConfig(m.spec, "DeepseekV3ForCausalLM");
    m.config["num_key_value_heads"] = 4;
    m.config["rms_norm_eps"] = 1e-6;
    m.config["max_position_embeddings"] = 40 * 64;
    m.config["q_lora_rank"] = 32;
    m.config["kv_lora_rank"] = 32;
    m.config["qk_nope_head_dim"] = 16;
    m.config["qk_rope_head_dim"] = 8;
    m.config["v_head_dim"] = 16;
    m.config["n_routed_experts"] = 8;
    m.config["num_experts_per_tok"] = 2;
    m.config["moe_intermediate_size"] = 32;
    m.config["n_shared_experts"] = 1;
    m.config["n_group"] = 4;
    m.config["topk_group"] = 2;
    m.config["routed_scaling_factor"] = 2.5;
    m.config["scoring_func"] = "sigmoid";
    m.config["topk_method"] = "noaux_tc";
    m.config["norm_topk_prob"] = true;
    m.config["first_k_dense_replace"] = 1;
    m.config["moe_layer_freq"] = 1;
    m.config["rope_interleave"] = true;
    m.config["rope_scaling"] = { { "type", "yarn" }, { "factor", 40.0 },
        { "original_max_position_embeddings", 64 }, { "beta_fast", 32.0 }, { "beta_slow", 1.0 },
        { "mscale", 1.0 }, { "mscale_all_dim", 1.0 } };
    fillWeights(m);
    return m;
}

void writeCheckpoint(const TinyModel& model, const std::filesystem::path& dir, DType storage)
{
    std::filesystem::create_directories(dir);
    std::vector<checkpoint::NamedTensor> tensors;
    for (const auto& [name, t] : model.weights) {
        tensors.push_back({ name, storage == DType::F32 ? t : t.to(storage) });
    }
    if (!checkpoint::writeTensorFile(dir / "model.safetensors", tensors, { { "format", "pt" } })
             .ok()) {
        throw std::runtime_error("cannot write " + (dir / "model.safetensors").string());
    }
    auto config = model.config;
    config["torch_dtype"] = storage == DType::BF16 ? "bfloat16" : "float32";
    std::ofstream(dir / "config.json") << config.dump(2) << "\n";
}

} // namespace day0::test
