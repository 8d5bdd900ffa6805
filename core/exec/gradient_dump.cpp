// What the gradient pass (backward.h) reads and writes around it: the next-token targets of a
// sequence, the anchors' activation gradients as the pass records them (and, in inject mode,
// replaces them by the reference's), and the gradient dump, captured by Hugging Face module name
// like a forward dump.
#include "exec/backward.h"
#include "exec/backward_pass.h"
#include "exec/engine.h"

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
    for (const auto& [name, t] : result.parameters) {
        dump.add(name + std::string(kGradSuffix), t, true);
    }
    return dump;
}

} // namespace day0::exec
