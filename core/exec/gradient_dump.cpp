// What the gradient pass (backward.h) reads and writes around it: the next-token targets of a
// sequence and the gradient dump, captured by Hugging Face module name like a forward dump.
#include "exec/backward.h"
#include "exec/engine.h"

namespace day0::exec {

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
