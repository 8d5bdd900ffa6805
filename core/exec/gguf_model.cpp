#include "exec/gguf_model.h"

#include <fmt/format.h>

#include <cstring>

namespace day0::exec {

namespace {

std::optional<std::int64_t> integer(const GgufLookup& lookup, const std::string& key)
{
    const auto* v = lookup(key);
    if (v == nullptr || !v->is_number_integer()) {
        return std::nullopt;
    }
    return v->get<std::int64_t>();
}

std::optional<double> number(const GgufLookup& lookup, const std::string& key)
{
    const auto* v = lookup(key);
    if (v == nullptr || !v->is_number()) {
        return std::nullopt;
    }
    return v->get<double>();
}

} // namespace

Result<model::ModelSpec> specFromGguf(
    const GgufLookup& lookup, std::int64_t vocabSize, const std::string& origin)
{
    const auto* arch = lookup("general.architecture");
    const std::string architecture
        = arch != nullptr && arch->is_string() ? arch->get<std::string>() : "";
    if (architecture != "llama") {
        return Error::unsupported(fmt::format("{}: GGUF architecture '{}' is not run by the engine "
                                              "(llama is; other families run from "
                                              "safetensors checkpoints)",
            origin, architecture));
    }
    const auto need = [&](const std::string& key) -> Result<std::int64_t> {
        const auto v = integer(lookup, "llama." + key);
        if (!v || *v <= 0) {
            return Error::badInput(
                fmt::format("{}: GGUF key 'llama.{}' is missing or not positive", origin, key));
        }
        return *v;
    };
    model::ModelSpec s;
    s.modelType = "llama";
    s.family = model::Family::Llama;
    s.architecture = "LlamaForCausalLM";
    for (const auto& [field, key] : { std::pair { &s.hiddenSize, "embedding_length" },
             std::pair { &s.numLayers, "block_count" },
             std::pair { &s.numHeads, "attention.head_count" },
             std::pair { &s.intermediateSize, "feed_forward_length" } }) {
        auto v = need(key);
        if (!v) {
            return v.error();
        }
        *field = *v;
    }
    s.numKvHeads = integer(lookup, "llama.attention.head_count_kv").value_or(s.numHeads);
    if (s.hiddenSize % s.numHeads != 0 || s.numHeads % s.numKvHeads != 0) {
        return Error::badInput(fmt::format("{}: {} heads ({} kv) do not divide the width {}",
            origin, s.numHeads, s.numKvHeads, s.hiddenSize));
    }
    s.headDim = s.hiddenSize / s.numHeads;
    const auto rotary = integer(lookup, "llama.rope.dimension_count").value_or(s.headDim);
    if (rotary != s.headDim) {
        return Error::unsupported(
            fmt::format("{}: partial rotary embedding ({} of {} lanes) is not implemented", origin,
                rotary, s.headDim));
    }
    s.vocabSize = integer(lookup, "llama.vocab_size").value_or(vocabSize);
    s.maxPositions = integer(lookup, "llama.context_length").value_or(4096);
    s.normEps = number(lookup, "llama.attention.layer_norm_rms_epsilon").value_or(1e-5);
    s.ropeTheta = number(lookup, "llama.rope.freq_base").value_or(10000.0);
    s.attention = s.numKvHeads == s.numHeads ? model::AttentionKind::MHA
        : s.numKvHeads == 1                  ? model::AttentionKind::MQA
                                             : model::AttentionKind::GQA;
    s.layers.assign(std::size_t(s.numLayers), model::LayerSpec {});
    s.dtype = DType::F16;
    return s;
}

std::optional<std::string> hfNameForGguf(std::string_view name)
{
    static const std::pair<std::string_view, std::string_view> kTop[] = {
        { "token_embd.weight", "model.embed_tokens.weight" },
        { "output_norm.weight", "model.norm.weight" },
        { "output.weight", "lm_head.weight" },
    };
    for (const auto& [gguf, hf] : kTop) {
        if (name == gguf) {
            return std::string(hf);
        }
    }
    if (name.rfind("blk.", 0) != 0) {
        return std::nullopt;
    }
    const auto dot = name.find('.', 4);
    if (dot == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view layer = name.substr(4, dot - 4);
    const std::string_view rest = name.substr(dot + 1);
    static const std::pair<std::string_view, std::string_view> kLayer[] = {
        { "attn_norm.weight", "input_layernorm.weight" },
        { "attn_q.weight", "self_attn.q_proj.weight" },
        { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" },
        { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_norm.weight", "post_attention_layernorm.weight" },
        { "ffn_gate.weight", "mlp.gate_proj.weight" },
        { "ffn_up.weight", "mlp.up_proj.weight" },
        { "ffn_down.weight", "mlp.down_proj.weight" },
    };
    for (const auto& [gguf, hf] : kLayer) {
        if (rest == gguf) {
            return fmt::format("model.layers.{}.{}", layer, hf);
        }
    }
    return std::nullopt;
}

numerics::Tensor unpermuteRotary(const numerics::Tensor& weight, std::int64_t heads)
{
    const numerics::Tensor w = weight.contiguous();
    const std::int64_t rows = w.dim(0);
    const std::int64_t cols = w.numel() / rows;
    const std::int64_t headDim = rows / heads;
    const std::int64_t half = headDim / 2;
    const std::int64_t rowBytes = cols * dtypeSize(w.dtype());
    numerics::Tensor out = numerics::Tensor::zeros(w.shape(), w.dtype());
    for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t a = 0; a < 2; ++a) {
            for (std::int64_t b = 0; b < half; ++b) {
                const std::int64_t hfRow = h * headDim + a * half + b;
                const std::int64_t ggufRow = h * headDim + 2 * b + a;
                std::memcpy(out.rawData() + hfRow * rowBytes, w.rawData() + ggufRow * rowBytes,
                    std::size_t(rowBytes));
            }
        }
    }
    return out;
}

} // namespace day0::exec
