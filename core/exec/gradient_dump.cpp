// What the gradient pass (backward.h) reads and writes around it: the next-token targets of a
// sequence, the anchors' activation gradients as the pass records them (and, in inject mode,
// replaces them by the reference's), and the gradient dump, captured by Hugging Face module name
// like a forward dump.
#include "exec/backward.h"
#include "exec/backward_pass.h"
#include "exec/deepseek_v4.h"
#include "exec/engine.h"
#include "exec/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

namespace day0::exec {

namespace detail {

template <typename T>
void ActivationGrads<T>::record(
    const std::string& anchor, const T* data, const numerics::Shape& shape)
{
    if (!enabled) {
        return;
    }
    const DType dtype = std::is_same_v<T, double> ? DType::F64 : DType::F32;
    numerics::Tensor t = numerics::Tensor::zeros(shape, dtype);
    std::copy_n(data, t.numel(), t.template data<T>());
    list.emplace_back(anchor + std::string(kGradSuffix), std::move(t));
}

template <typename T>
Result<void> ActivationGrads<T>::recordAndInject(
    const std::string& anchor, T* data, const numerics::Shape& shape)
{
    record(anchor, data, shape);
    if (inject == nullptr) {
        return success();
    }
    const std::string name = anchor + std::string(kGradSuffix);
    const numerics::Tensor* ref = inject->tensor(name);
    if (ref == nullptr) {
        return Error::badInput(fmt::format(
            "inject-mode gradients: the reference gradient dump has no tensor '{}'", name));
    }
    if (ref->shape() != shape) {
        return Error::badInput(fmt::format("inject-mode gradients: the reference's '{}' has shape "
                                           "[{}], this pass's is [{}]",
            name, fmt::join(ref->shape(), ", "), fmt::join(shape, ", ")));
    }
    const std::vector<double> values = ref->toDoubles();
    std::transform(values.begin(), values.end(), data, [](double v) { return T(v); });
    return success();
}

template struct ActivationGrads<float>;
template struct ActivationGrads<double>;

} // namespace detail

std::vector<std::int64_t> nextTokenTargets(std::span<const std::int64_t> ids)
{
    std::vector<std::int64_t> targets(ids.size(), -1);
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
        targets[i] = ids[i + 1];
    }
    return targets;
}

namespace {

/// Layer `l`'s per-expert gradients gathered into gpt-oss's fused tensors (checkpointGradients),
/// the per-expert entries taken out of `grads`; nothing when one is missing.
void packExperts(
    const model::ModelSpec& spec, int l, std::map<std::string, numerics::Tensor>& grads)
{
    const auto& moe = *spec.moe;
    const std::int64_t e = moe.numExperts;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t inter = moe.expertIntermediate;
    const std::string base = detail::layerNames(spec, l).ffn + ".experts";
    const char* leaves[] = { "gate_proj.weight", "up_proj.weight", "down_proj.weight",
        "gate_proj.bias", "up_proj.bias", "down_proj.bias" };
    std::vector<std::string> names;
    DType dtype = DType::F64;
    for (std::int64_t x = 0; x < e; ++x) {
        for (const char* leaf : leaves) {
            names.push_back(fmt::format("{}.{}.{}", base, x, leaf));
            const auto it = grads.find(names.back());
            if (it == grads.end()) {
                return;
            }
            dtype = it->second.dtype();
        }
    }
    std::vector<double> gateUp(std::size_t(e * h * 2 * inter));
    std::vector<double> gateUpBias(std::size_t(e * 2 * inter));
    std::vector<double> down(std::size_t(e * inter * h));
    std::vector<double> downBias(std::size_t(e * h));
    for (std::int64_t x = 0; x < e; ++x) {
        const auto part
            = [&](std::size_t i) { return grads.at(names[std::size_t(x) * 6 + i]).toDoubles(); };
        const auto gate = part(0); // [I, H]
        const auto up = part(1);
        const auto dn = part(2); // [H, I]
        const auto gateB = part(3); // [I]
        const auto upB = part(4);
        const auto dnB = part(5); // [H]
        for (std::int64_t j = 0; j < inter; ++j) {
            for (std::int64_t c = 0; c < h; ++c) {
                // [E, H, 2I]: gate at column 2j, up at 2j + 1 (HF's interleaving).
                const std::size_t at = std::size_t((x * h + c) * 2 * inter + 2 * j);
                gateUp[at] = gate[std::size_t(j * h + c)];
                gateUp[at + 1] = up[std::size_t(j * h + c)];
                down[std::size_t((x * inter + j) * h + c)] = dn[std::size_t(c * inter + j)];
            }
            gateUpBias[std::size_t(x * 2 * inter + 2 * j)] = gateB[std::size_t(j)];
            gateUpBias[std::size_t(x * 2 * inter + 2 * j + 1)] = upB[std::size_t(j)];
        }
        std::copy(dnB.begin(), dnB.end(), downBias.begin() + x * h);
    }
    for (const auto& name : names) {
        grads.erase(name);
    }
    const auto put = [&](const std::string& name, numerics::Shape shape,
                         const std::vector<double>& values) {
        grads.emplace(base + "." + name, numerics::Tensor::fromDoubles(shape, values).to(dtype));
    };
    put("gate_up_proj", { e, h, 2 * inter }, gateUp);
    put("gate_up_proj_bias", { e, 2 * inter }, gateUpBias);
    put("down_proj", { e, inter, h }, down);
    put("down_proj_bias", { e, h }, downBias);
}

/// Layer `l`'s per-expert gradients gathered into Gemma-4's fused tensors (Gemma4TextExperts,
/// each expert as a Linear stores it): gate_up_proj [E, 2I, H] (gate the first I rows) and
/// down_proj [E, H, I], the per-expert entries taken out of `grads`; nothing when one is
/// missing.
void packGemma4Experts(
    const model::ModelSpec& spec, int l, std::map<std::string, numerics::Tensor>& grads)
{
    const std::int64_t e = spec.moe->numExperts;
    const std::int64_t h = spec.hiddenSize;
    const std::int64_t inter = spec.moe->expertIntermediate;
    const std::string base = fmt::format("model.layers.{}.experts", l);
    std::vector<std::string> names;
    DType dtype = DType::F64;
    for (std::int64_t x = 0; x < e; ++x) {
        for (const char* leaf : { "gate_proj.weight", "up_proj.weight", "down_proj.weight" }) {
            names.push_back(fmt::format("{}.{}.{}", base, x, leaf));
            const auto it = grads.find(names.back());
            if (it == grads.end()) {
                return;
            }
            dtype = it->second.dtype();
        }
    }
    std::vector<double> gateUp;
    std::vector<double> down;
    gateUp.reserve(std::size_t(e * 2 * inter * h));
    down.reserve(std::size_t(e * h * inter));
    for (std::int64_t x = 0; x < e; ++x) {
        for (int part = 0; part < 2; ++part) { // gate [I, H], then up [I, H]
            const auto v = grads.at(names[std::size_t(x * 3 + part)]).toDoubles();
            gateUp.insert(gateUp.end(), v.begin(), v.end());
        }
        const auto v = grads.at(names[std::size_t(x * 3 + 2)]).toDoubles(); // [H, I]
        down.insert(down.end(), v.begin(), v.end());
    }
    for (const auto& name : names) {
        grads.erase(name);
    }
    grads.emplace(base + ".gate_up_proj",
        numerics::Tensor::fromDoubles({ e, 2 * inter, h }, gateUp).to(dtype));
    grads.emplace(
        base + ".down_proj", numerics::Tensor::fromDoubles({ e, h, inter }, down).to(dtype));
}

} // namespace

std::map<std::string, numerics::Tensor> checkpointGradients(
    const model::ModelSpec& spec, const std::map<std::string, numerics::Tensor>& parameters)
{
    std::map<std::string, numerics::Tensor> out = parameters;
    if (spec.family == model::Family::DeepseekV4) {
        // The pass trains the native names the engine reads; the twin's are HF's.
        out.clear();
        for (const auto& [name, t] : parameters) {
            out.emplace(detail::deepseekV4HfName(name), t);
        }
        return out;
    }
    if (spec.family == model::Family::Gemma4 && spec.moe) {
        for (int l = 0; l < int(spec.numLayers); ++l) {
            if (spec.layers[std::size_t(l)].moe()) {
                packGemma4Experts(spec, l, out);
            }
        }
        return out;
    }
    if (spec.family == model::Family::Llama4 && spec.moe) {
        for (int l = 0; l < int(spec.numLayers); ++l) {
            if (spec.layers[std::size_t(l)].moe()) {
                detail::packLlama4Experts(spec, l, out);
            }
        }
        return out;
    }
    // Of the others only gpt-oss's packed experts (interleaved gate/up, [in, out], biased).
    if (spec.family != model::Family::GptOss || !spec.moe || !spec.moe->packedExperts) {
        return out;
    }
    for (int l = 0; l < int(spec.numLayers); ++l) {
        if (spec.layers[std::size_t(l)].moe()) {
            packExperts(spec, l, out);
        }
    }
    return out;
}

numerics::Dump gradientDump(const model::ModelSpec& spec, const GradientResult& result,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> targets, bool fp64)
{
    numerics::Dump dump;
    dump.info.model = spec.name;
    dump.info.fingerprint = modelFingerprint(spec);
    dump.info.precision = fp64 ? "fp64" : "fp32";
    dump.info.inputIds.assign(ids.begin(), ids.end());
    dump.info.promptLength = std::int64_t(ids.size());
    dump.info.numLayers = spec.numLayers;
    dump.info.extra["gradients"] = true;
    dump.info.extra["loss"] = result.loss;
    dump.info.extra["counted"] = result.counted;
    dump.info.extra["targets"] = std::vector<std::int64_t>(targets.begin(), targets.end());
    dump.add("lm_head", result.logits, true);
    for (const auto& [name, t] : result.activations) {
        dump.add(name, t, true);
    }
    for (const auto& [name, t] : checkpointGradients(spec, result.parameters)) {
        dump.add(name + std::string(kGradSuffix), t, true);
    }
    // The forward's routing, named as a forward dump names it: the comparison of two gradient
    // dumps needs the tokens whose experts flipped to judge the gradients they reach.
    for (const auto& [name, t] : result.routing) {
        const char* op = name.ends_with("#topk") ? "router_selection"
            : name.ends_with("#score")           ? "router_score"
                                                 : "router";
        dump.add(name, t, true, op);
    }
    recordRouterInfo(spec, dump.info);
    return dump;
}

} // namespace day0::exec
