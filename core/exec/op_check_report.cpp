// What day0 opcheck checks besides the operators themselves: which weights its linear rows use,
// and the report's JSON form.
#include "exec/forward.h"
#include "exec/op_check.h"
#include "numerics/tolerance.h"

#include <set>

namespace day0::exec {

namespace detail {

namespace {

bool firstOfKind(const model::ModelSpec& spec, int layer)
{
    if (spec.family != model::Family::NemotronH) {
        return false;
    }
    const auto& mine = spec.layers[std::size_t(layer)];
    for (int l = 0; l < layer; ++l) {
        const auto& other = spec.layers[std::size_t(l)];
        if (other.mixer == mine.mixer && other.ffn == mine.ffn) {
            return false;
        }
    }
    return true;
}

} // namespace

std::vector<std::pair<std::string, WeightRequirement>> opCheckLinearWeights(
    const model::ModelSpec& spec)
{
    int firstMoe = -1;
    for (int l = 0; l < int(spec.layers.size()); ++l) {
        if (spec.layers[std::size_t(l)].moe()) {
            firstMoe = l;
            break;
        }
    }
    // Qwen3-Next / Qwen3.5: the first full-attention layer's projections too (layer 0 is a
    // Gated DeltaNet layer).
    int firstAttention = -1;
    for (int l = 0; isQwenNext(spec) && l < int(spec.layers.size()); ++l) {
        if (spec.layers[std::size_t(l)].mixer == model::MixerKind::Attention) {
            firstAttention = l;
            break;
        }
    }
    std::vector<std::pair<std::string, WeightRequirement>> out;
    std::set<std::string> seen;
    auto required = requiredWeights(spec);
    if (spec.family == model::Family::Gemma4 && spec.vision) {
        const auto vision = gemma4VisionWeights(spec); // loaded by Engine::create
        required.insert(required.end(), vision.begin(), vision.end());
    }
    for (const auto& req : required) {
        if (req.shape.size() != 2 || !req.name.ends_with(".weight")
            || req.name == "model.embed_tokens.weight" || req.name == "embed.weight"
            || req.name.ends_with(".embeddings.weight")) {
            continue;
        }
        std::string module = req.name.substr(0, req.name.size() - 7);
        const int layer = numerics::layerOfAnchor(module);
        if (!spec.layout.visionPrefix.empty() && module.starts_with(spec.layout.visionPrefix)) {
            // the tower's first block, the merger and the first deepstack merger; the position
            // table is interpolated, not multiplied
            const bool otherDeepstack = module.find("deepstack_merger_list.") != std::string::npos
                && module.find("deepstack_merger_list.0.") == std::string::npos;
            if (layer > 0 || otherDeepstack || module.ends_with(".pos_embed")) {
                continue;
            }
            module = "visual" + module.substr(spec.layout.visionPrefix.size());
        } else if (layer >= 0) {
            // The first layer of each kind (Nemotron-H: Mamba-2, attention, MLP, MoE; the hybrids'
            // first full-attention layer).
            if (layer != 0 && layer != firstMoe && layer != firstAttention
                && !firstOfKind(spec, layer)) {
                continue;
            }
            // "model.layers.3.", DeepSeek-V4's native "layers.3.", Nemotron-H's
            // "backbone.layers.3.".
            const auto layers = module.find("layers.");
            module = module.substr(module.find('.', layers + 7) + 1);
            // Gemma-4's experts and router sit in the layer itself ("experts.3.up_proj",
            // "router.proj").
            const bool expert
                = module.find(".experts.") != std::string::npos || module.starts_with("experts.");
            if (expert && module.find("experts.0.") == std::string::npos) {
                continue;
            }
            if (module.ends_with(".gate") || module.ends_with(".router")
                || module.starts_with("router.") || module.ends_with("shared_expert_gate")) {
                continue; // routers have their own row
            }
        }
        if (seen.insert(module).second) {
            out.emplace_back(module, req);
        }
    }
    return out;
}

} // namespace detail

nlohmann::json coverageToJson(const std::vector<CoverageRow>& rows)
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
        out.push_back({ { "op", std::string(backendOpName(r.op)) }, { "use", r.use },
            { "native", r.native }, { "implementation", r.implementation } });
    }
    return out;
}

nlohmann::json opCheckToJson(const OpCheckReport& report)
{
    const auto num
        = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : report.rows) {
        nlohmann::json row = { { "op", r.op }, { "shape", r.shape },
            { "kind", std::string(numerics::opKindName(r.kind)) },
            { "precision", std::string(precisionName(r.mode)) },
            { "implementation", r.implementation }, { "rel_l2", num(r.metrics.relL2) },
            { "max_abs", num(r.metrics.maxAbs) }, { "max_rel", num(r.metrics.maxRel) },
            { "cosine", num(r.metrics.cosine) }, { "snr_db", num(r.metrics.snrDb) },
            { "floor_ratio", num(r.verdict.floorRatio) },
            { "verdict", std::string(numerics::verdictStatusName(r.verdict.status)) },
            { "rule", r.verdict.rule }, { "reason", r.verdict.reason } };
        if (r.expertAgreement) {
            row["expert_agreement"] = *r.expertAgreement;
        }
        rows.push_back(std::move(row));
    }
    return { { "model", report.model }, { "precision", report.precision },
        { "table", report.table },
        { "backends",
            { { { "name", report.backend }, { "device", report.device },
                { "missing", report.missing },
                { "coverage", coverageToJson(report.coverage) } } } },
        { "counts",
            { { "pass", report.passCount }, { "warn", report.warnCount },
                { "fail", report.failCount } } },
        { "ops", std::move(rows) } };
}

} // namespace day0::exec
