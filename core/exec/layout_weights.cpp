#include "exec/layout_weights.h"

#include <fmt/format.h>

#include <charconv>

namespace day0::exec::detail {

bool needsLayoutMapping(const model::ModelSpec& spec)
{
    return spec.layout.textPrefix != "model" || spec.layout.lmHead != "lm_head" || spec.vision
        || (spec.moe && spec.moe->packedExperts);
}

LayoutWeights::LayoutWeights(const WeightSource& inner, const model::ModelSpec& spec)
    : m_inner(inner)
    , m_spec(spec)
{
}

std::string LayoutWeights::checkpointName(const std::string& name) const
{
    const std::string& vision = m_spec.layout.visionPrefix;
    if (!vision.empty() && name.starts_with(vision + ".")) {
        return name;
    }
    // Gemma-4's embed_vision sits beside the text tower, not under its prefix.
    const std::string& projector = m_spec.layout.projectorPrefix;
    if (!projector.empty() && name.starts_with(projector + ".")) {
        return name;
    }
    if (name.starts_with("lm_head.")) {
        return m_spec.layout.lmHead + name.substr(7);
    }
    if (name.starts_with("model.")) {
        return m_spec.layout.textPrefix + name.substr(5);
    }
    return name;
}

bool LayoutWeights::packed(const std::string& name, Packed& out) const
{
    if (!m_spec.moe || !m_spec.moe->packedExperts) {
        return false;
    }
    const auto at = name.find(".experts.");
    if (at == std::string::npos) {
        return false;
    }
    const std::string_view rest = std::string_view(name).substr(at + 9);
    const auto dot = rest.find('.');
    if (dot == std::string_view::npos
        || std::from_chars(rest.data(), rest.data() + dot, out.expert).ec != std::errc {}) {
        return false;
    }
    const std::string_view leaf = rest.substr(dot + 1);
    const std::string base = checkpointName(name.substr(0, at)) + ".experts.";
    out.bias = leaf.ends_with(".bias");
    if (out.bias && !m_spec.moe->expertBias) {
        return false;
    }
    const std::string suffix = out.bias ? "_bias" : "";
    if (leaf == "gate_proj.weight" || leaf == "up_proj.weight" || leaf == "gate_proj.bias"
        || leaf == "up_proj.bias") {
        out.tensor = base + "gate_up_proj" + suffix;
        out.part = leaf.starts_with("gate_proj") ? 0 : 1;
    } else if (leaf == "down_proj.weight" || leaf == "down_proj.bias") {
        out.tensor = base + "down_proj" + suffix;
        out.part = 2;
    } else {
        return false;
    }
    return true;
}

bool LayoutWeights::has(const std::string& name) const
{
    Packed p;
    if (packed(name, p)) {
        return m_inner.has(p.tensor);
    }
    return m_inner.has(checkpointName(name));
}

Result<numerics::Tensor> LayoutWeights::read(const std::string& name) const
{
    Packed p;
    if (!packed(name, p)) {
        auto t = m_inner.read(checkpointName(name));
        if (t && t->rank() == 5 && name.ends_with(".patch_embed.proj.weight")) {
            // Conv3d with kernel = stride = (temporal, patch, patch): a linear over the
            // flattened (channel, frame, y, x) patch.
            const std::int64_t out = t->dim(0);
            return t->contiguous().view({ out, t->numel() / out });
        }
        return t;
    }
    auto fused = m_inner.read(p.tensor);
    if (!fused) {
        return fused.error();
    }
    const auto& moe = *m_spec.moe;
    const std::int64_t e = moe.numExperts;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t i = moe.expertIntermediate;
    // Gemma-4 (Gemma4TextExperts) and the BF16 Qwen3.5-MoE releases (Qwen3_5MoeExperts) store
    // each expert as a Linear does, [out, in]: gate_up_proj [E, 2I, H] (gate the first I rows)
    // and down_proj [E, H, I]; the others store [in, out].
    const bool outIn
        = m_spec.family == model::Family::Gemma4 || m_spec.family == model::Family::Qwen35Moe;
    numerics::Shape expected
        = p.part == 2 ? numerics::Shape { e, i, h } : numerics::Shape { e, h, 2 * i };
    if (outIn) {
        expected = p.part == 2 ? numerics::Shape { e, h, i } : numerics::Shape { e, 2 * i, h };
    }
    if (p.bias) {
        expected = p.part == 2 ? numerics::Shape { e, h } : numerics::Shape { e, 2 * i };
    }
    if (fused->shape() != expected) {
        return Error::badInput(fmt::format("{}: fused expert tensor '{}' has shape {}, the config "
                                           "needs {}",
            m_inner.describe(), p.tensor, numerics::shapeString(fused->shape()),
            numerics::shapeString(expected)));
    }
    if (p.expert < 0 || p.expert >= e) {
        return Error::badInput(fmt::format("{}: expert {} of '{}' is out of range (0..{})",
            m_inner.describe(), p.expert, p.tensor, e - 1));
    }
    // gpt-oss interleaves gate (even) and up (odd) along 2I; the others put gate first.
    const bool interleaved = m_spec.family == model::Family::GptOss;
    numerics::Tensor slice = fused->select(0, p.expert).contiguous(); // [H, 2I], [I, H], [2I], [H]
    if (outIn) {
        return p.part == 2 ? slice : slice.narrow(0, p.part == 0 ? 0 : i, i).contiguous();
    }
    if (p.part != 2) {
        const int last = slice.rank() - 1;
        if (interleaved) {
            numerics::Shape pairs = slice.shape();
            pairs.back() = i;
            pairs.push_back(2);
            slice = slice.view(pairs).select(last + 1, p.part);
        } else {
            slice = slice.narrow(last, p.part == 0 ? 0 : i, i);
        }
    }
    if (p.bias) {
        return slice.contiguous();
    }
    return slice.transpose(0, 1).contiguous(); // HF linear layout [out, in]
}

} // namespace day0::exec::detail
