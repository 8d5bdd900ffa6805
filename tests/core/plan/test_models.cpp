#include "test_models.h"

#include "plan/published_measurements.h"

#include <fmt/format.h>

#include <string>

namespace day0::plan::test {

using model::Block;
using model::BlockKind;
using model::Component;
using model::ParallelRole;
using model::TensorSpec;

namespace {

TensorSpec tensor(std::string name, std::vector<std::int64_t> shape, ParallelRole role,
    Component component, int layer, int expert = -1)
{
    TensorSpec t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.role = role;
    t.component = component;
    t.layer = layer;
    t.expert = expert;
    t.dtype = DType::BF16;
    return t;
}

model::ModelSpec base(int hidden, int heads, int kvHeads, int layers, int vocab, int ffn)
{
    model::ModelSpec s;
    s.name = "test";
    s.modelType = "llama";
    s.family = model::Family::Llama;
    s.hiddenSize = hidden;
    s.numHeads = heads;
    s.numKvHeads = kvHeads;
    s.headDim = hidden / heads;
    s.numLayers = layers;
    s.vocabSize = vocab;
    s.intermediateSize = ffn;
    s.attention = kvHeads == heads
        ? model::AttentionKind::MHA
        : (kvHeads == 1 ? model::AttentionKind::MQA : model::AttentionKind::GQA);
    s.layers.assign(std::size_t(layers), model::LayerSpec {});
    return s;
}

void addAttention(Block& b, const model::ModelSpec& s, int layer)
{
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    const std::int64_t h = s.hiddenSize;
    if (s.attention == model::AttentionKind::MLA) {
        const auto& m = s.mla;
        const std::int64_t qk = m.qkNopeHeadDim + m.qkRopeHeadDim;
        if (m.qLoraRank > 0) {
            b.tensors.push_back(tensor(p + "q_a_proj.weight", { m.qLoraRank, h },
                ParallelRole::Replicated, Component::Attention, layer));
            b.tensors.push_back(tensor(p + "q_a_layernorm.weight", { m.qLoraRank },
                ParallelRole::Replicated, Component::Norm, layer));
            b.tensors.push_back(tensor(p + "q_b_proj.weight", { s.numHeads * qk, m.qLoraRank },
                ParallelRole::ColumnParallel, Component::Attention, layer));
        } else {
            b.tensors.push_back(tensor(p + "q_proj.weight", { s.numHeads * qk, h },
                ParallelRole::ColumnParallel, Component::Attention, layer));
        }
        b.tensors.push_back(
            tensor(p + "kv_a_proj_with_mqa.weight", { m.kvLoraRank + m.qkRopeHeadDim, h },
                ParallelRole::Replicated, Component::Attention, layer));
        b.tensors.push_back(tensor(p + "kv_a_layernorm.weight", { m.kvLoraRank },
            ParallelRole::Replicated, Component::Norm, layer));
        b.tensors.push_back(tensor(p + "kv_b_proj.weight",
            { s.numHeads * (m.qkNopeHeadDim + m.vHeadDim), m.kvLoraRank },
            ParallelRole::ColumnParallel, Component::Attention, layer));
        b.tensors.push_back(tensor(p + "o_proj.weight", { h, s.numHeads * m.vHeadDim },
            ParallelRole::RowParallel, Component::Attention, layer));
        return;
    }
    const std::int64_t d = s.headDim;
    b.tensors.push_back(tensor(p + "q_proj.weight", { s.numHeads * d, h },
        ParallelRole::ColumnParallel, Component::Attention, layer));
    b.tensors.push_back(tensor(p + "k_proj.weight", { s.numKvHeads * d, h },
        ParallelRole::ColumnParallel, Component::Attention, layer));
    b.tensors.push_back(tensor(p + "v_proj.weight", { s.numKvHeads * d, h },
        ParallelRole::ColumnParallel, Component::Attention, layer));
    b.tensors.push_back(tensor(p + "o_proj.weight", { h, s.numHeads * d },
        ParallelRole::RowParallel, Component::Attention, layer));
}

void addMlp(Block& b, const std::string& p, std::int64_t h, std::int64_t f, bool gated,
    Component component, int layer, int expert)
{
    const auto col = ParallelRole::ColumnParallel;
    if (gated) {
        b.tensors.push_back(
            tensor(p + "gate_proj.weight", { f, h }, col, component, layer, expert));
    }
    b.tensors.push_back(tensor(p + "up_proj.weight", { f, h }, col, component, layer, expert));
    b.tensors.push_back(tensor(
        p + "down_proj.weight", { h, f }, ParallelRole::RowParallel, component, layer, expert));
}

Block decoder(const model::ModelSpec& s, int layer, const std::string& prefix, BlockKind kind)
{
    Block b;
    b.anchor = prefix + std::to_string(layer);
    b.kind = kind;
    b.layer = layer;
    const std::int64_t h = s.hiddenSize;
    const std::string p = b.anchor + ".";
    b.tensors.push_back(tensor(
        p + "input_layernorm.weight", { h }, ParallelRole::Replicated, Component::Norm, layer));
    addAttention(b, s, layer);
    b.tensors.push_back(tensor(p + "post_attention_layernorm.weight", { h },
        ParallelRole::Replicated, Component::Norm, layer));
    const bool moe
        = s.moe && (std::size_t(layer) >= s.layers.size() || s.layers[std::size_t(layer)].moe());
    b.moe = moe;
    if (!moe) {
        addMlp(b, p + "mlp.", h, s.intermediateSize, s.gatedMlp, Component::DenseMlp, layer, -1);
        return b;
    }
    const auto& m = *s.moe;
    b.tensors.push_back(tensor(p + "mlp.gate.weight", { m.numExperts, h }, ParallelRole::Replicated,
        Component::Router, layer));
    for (int e = 0; e < m.numExperts; ++e) {
        addMlp(b, p + "mlp.experts." + std::to_string(e) + ".", h, m.expertIntermediate, s.gatedMlp,
            Component::RoutedExperts, layer, e);
    }
    if (m.sharedIntermediate > 0) {
        addMlp(b, p + "mlp.shared_experts.", h, m.sharedIntermediate, s.gatedMlp,
            Component::SharedExperts, layer, -1);
    }
    return b;
}

} // namespace

model::ModelSpec gptSpec(int hidden, int heads, int layers, int vocab, int ffn)
{
    auto s = base(hidden, heads, heads, layers, vocab, ffn);
    s.gatedMlp = false;
    s.hiddenAct = "gelu";
    return s;
}

model::ModelSpec llamaSpec(int hidden, int heads, int kvHeads, int layers, int vocab, int ffn)
{
    return base(hidden, heads, kvHeads, layers, vocab, ffn);
}

model::ModelSpec moeSpec(int hidden, int heads, int kvHeads, int layers, int vocab, int ffn,
    int experts, int topK, int expertFfn, int sharedFfn, int firstDense)
{
    auto s = base(hidden, heads, kvHeads, layers, vocab, ffn);
    s.family = model::Family::Mixtral;
    model::MoeSpec m;
    m.numExperts = experts;
    m.topK = topK;
    m.expertIntermediate = expertFfn;
    m.sharedIntermediate = sharedFfn;
    m.numSharedExperts = sharedFfn > 0 ? 1 : 0;
    s.moe = m;
    for (int i = 0; i < layers; ++i) {
        s.layers[std::size_t(i)].ffn
            = i >= firstDense ? model::FfnKind::Moe : model::FfnKind::Dense;
    }
    return s;
}

model::ModelSpec mlaSpec(int hidden, int heads, int layers, int vocab, int ffn, int experts,
    int topK, int expertFfn, int sharedFfn, int firstDense, int qLora, int kvLora, int nope,
    int rope, int vDim, int mtp)
{
    auto s = moeSpec(
        hidden, heads, heads, layers, vocab, ffn, experts, topK, expertFfn, sharedFfn, firstDense);
    s.family = model::Family::DeepseekV3;
    s.attention = model::AttentionKind::MLA;
    s.headDim = nope + rope;
    s.mla.qLoraRank = qLora;
    s.mla.kvLoraRank = kvLora;
    s.mla.qkNopeHeadDim = nope;
    s.mla.qkRopeHeadDim = rope;
    s.mla.vHeadDim = vDim;
    s.numMtpLayers = mtp;
    return s;
}

model::LayerGraph buildTestGraph(const model::ModelSpec& s)
{
    model::LayerGraph g;
    g.spec = s;
    const std::int64_t h = s.hiddenSize;
    Block emb { "model.embed_tokens", BlockKind::Embedding, -1, false, {} };
    emb.tensors.push_back(tensor("model.embed_tokens.weight", { s.vocabSize, h },
        ParallelRole::VocabParallel, Component::Embedding, -1));
    g.blocks.push_back(emb);
    for (int i = 0; i < s.numLayers; ++i) {
        g.blocks.push_back(decoder(s, i, "model.layers.", BlockKind::Decoder));
    }
    Block norm { "model.norm", BlockKind::FinalNorm, -1, false, {} };
    norm.tensors.push_back(
        tensor("model.norm.weight", { h }, ParallelRole::Replicated, Component::Norm, -1));
    g.blocks.push_back(norm);
    if (!s.tieEmbeddings) {
        Block head { "lm_head", BlockKind::LmHead, -1, false, {} };
        head.tensors.push_back(tensor("lm_head.weight", { s.vocabSize, h },
            ParallelRole::VocabParallel, Component::LmHead, -1));
        g.blocks.push_back(head);
    }
    for (int k = 0; k < s.numMtpLayers; ++k) {
        const int layer = int(s.numLayers) + k;
        Block mtp = decoder(s, layer, "model.layers.", BlockKind::Mtp);
        const std::string p = mtp.anchor + ".";
        for (auto& t : mtp.tensors) {
            t.component = Component::Mtp;
        }
        mtp.tensors.push_back(
            tensor(p + "enorm.weight", { h }, ParallelRole::Replicated, Component::Mtp, layer));
        mtp.tensors.push_back(
            tensor(p + "hnorm.weight", { h }, ParallelRole::Replicated, Component::Mtp, layer));
        mtp.tensors.push_back(tensor(p + "eh_proj.weight", { h, 2 * h },
            ParallelRole::ColumnParallel, Component::Mtp, layer));
        mtp.tensors.push_back(tensor(p + "embed_tokens.weight", { s.vocabSize, h },
            ParallelRole::VocabParallel, Component::Mtp, layer));
        mtp.tensors.push_back(tensor(
            p + "shared_head.norm.weight", { h }, ParallelRole::Replicated, Component::Mtp, layer));
        mtp.tensors.push_back(tensor(p + "shared_head.head.weight", { s.vocabSize, h },
            ParallelRole::VocabParallel, Component::Mtp, layer));
        g.blocks.push_back(mtp);
    }
    return g;
}

Result<ModelSummary> publishedCaseModel(const nlohmann::json& model)
{
    if (!model.contains("gpt")) {
        return bundledCaseModel(model);
    }
    try {
        const auto& g = model.at("gpt");
        auto spec = gptSpec(g.at("hidden").get<int>(), g.at("heads").get<int>(),
            g.at("layers").get<int>(), g.at("vocab").get<int>(), g.at("ffn").get<int>());
        spec.tieEmbeddings = true;
        return summarizeModel(buildTestGraph(spec));
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(fmt::format("model {}: {}", model.dump(), e.what()));
    }
}

} // namespace day0::plan::test
