#include "backward_twin.h"

#include "base/progress.h"
#include "base/python_json.h"
#include "base/resources.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "numerics/gradient_anchor.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace day0::test {

using numerics::Tensor;

/// max |ours − theirs| / max |theirs| over one tensor (0 when both are zero; 1 when only ours
/// is, or when ours has values where theirs is all zero).
double maxRel(const Tensor& theirs, const Tensor& ours)
{
    const auto r = theirs.toDoubles();
    const auto t = ours.toDoubles();
    if (r.size() != t.size()) {
        return 1.0;
    }
    double largest = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        largest = std::max(largest, std::fabs(r[i]));
        worst = std::max(worst, std::fabs(t[i] - r[i]));
    }
    if (largest == 0.0) {
        return worst == 0.0 ? 0.0 : 1.0;
    }
    return worst / largest;
}

/// Expert weights (or, in a packed expert tensor [E, ...], expert slices) all zero in `grad`.
std::size_t zeroExpertsIn(const std::string& name, const Tensor& grad)
{
    const auto at = name.find(".experts.");
    if (at == std::string::npos) {
        return 0;
    }
    const auto values = grad.toDoubles();
    const bool packed = name.find('.', at + 9) == std::string::npos; // "...experts.down_proj"
    const std::size_t slices = packed ? std::size_t(grad.shape()[0]) : 1;
    const std::size_t width = values.size() / slices;
    std::size_t zero = 0;
    for (std::size_t e = 0; e < slices; ++e) {
        const auto first = values.begin() + std::ptrdiff_t(e * width);
        zero += std::all_of(first, first + std::ptrdiff_t(width), [](double v) { return v == 0.0; })
            ? 1
            : 0;
    }
    return zero;
}

/// `ours` (fp64 gradients of the checkpoint in `dir / "ckpt"` of `spec` on `ids`) against the
/// float64 twin's, by the checkpoint's names (exec::checkpointGradients).
/// `twinEnv` ("DAY0_TWIN_WITHOUT=feature", the twins' switch) is set before the twin runs: its
/// gradients are then those of the model without that feature, and the logits are not checked.
TwinAgreement againstTwin(const std::filesystem::path& dir, const model::ModelSpec& spec,
    const exec::GradientResult& ours, const std::vector<std::int64_t>& ids, double forwardBound,
    const std::string& twinEnv)
{
    TwinAgreement a;
    const std::string command
        = fmt::format("{} {} {} {} --grad --ids {} --dtype float64 --out {} > {} 2>&1",
            twinEnv.empty() ? "" : "env " + twinEnv, kPython, bridgeScript().string(),
            (dir / "ckpt").string(), fmt::join(ids, ","), (dir / "torch").string(),
            (dir / "torch.log").string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const auto theirs = checkpoint::readDump(dir / "torch");
    EXPECT_TRUE(theirs.ok()) << (theirs.ok() ? "" : theirs.error().message);
    if (!theirs.ok()) {
        return a;
    }
    a.lossDiff = std::fabs(theirs->info.extra.value("loss", 0.0) - ours.loss);
    if (twinEnv.empty()) {
        EXPECT_LE(maxRel(*theirs->tensor("lm_head"), ours.logits), forwardBound);
    }
    // Every parameter: present on both sides, and within the bound.
    const auto parameters = exec::checkpointGradients(spec, ours.parameters);
    a.paramsOurs = parameters.size();
    for (const auto& [name, grad] : parameters) {
        const Tensor* ref = theirs->tensor(name + "#grad");
        EXPECT_NE(ref, nullptr) << name << " has no twin gradient";
        if (ref == nullptr) {
            continue;
        }
        ++a.paramsCompared;
        const double rel = maxRel(*ref, grad);
        if (rel > a.params) {
            a.params = rel;
            a.worstParam = name;
        }
        a.zeroExperts += zeroExpertsIn(name, grad);
    }
    std::size_t theirParams = 0;
    for (const auto& c : theirs->captures()) {
        theirParams += numerics::isParameterGradient(c.name) ? 1 : 0;
    }
    EXPECT_EQ(theirParams, parameters.size());
    for (const auto& [name, grad] : ours.activations) {
        const Tensor* ref = theirs->tensor(name);
        if (ref == nullptr) {
            continue;
        }
        ++a.activationsCompared;
        const double rel = maxRel(*ref, grad);
        if (rel > a.activations) {
            a.activations = rel;
            a.worstActivation = name;
        }
    }
    std::printf("%s: loss %.12f, %zu parameters max rel %.2e (%s), %zu anchor gradients max rel "
                "%.2e (%s), %zu idle expert weights\n",
        dir.filename().c_str(), ours.loss, a.paramsCompared, a.params, a.worstParam.c_str(),
        a.activationsCompared, a.activations, a.worstActivation.c_str(), a.zeroExperts);
    return a;
}

/// backwardUnsupported's lines for `spec`, joined.
ShrunkGradients shrunkGradients(const std::string& config, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, const checkpoint::ShrinkOptions& options)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    ShrunkGradients g;
    const auto spec = shrinkForTwin(config, dir, options);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    if (!spec.ok()) {
        return g;
    }
    g.spec = *spec;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!weights.ok()) {
        return g;
    }
    Progress p;
    auto engine = exec::Engine::create(g.spec, **weights, true, p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) {
        return g;
    }
    g.weights = engine->weightTable().tensors;
    const auto ours = exec::lossAndGradients(*engine, ids, exec::nextTokenTargets(ids), true, {});
    EXPECT_TRUE(ours.ok()) << ours.error().message;
    if (ours.ok()) {
        g.ours = *ours;
    }
    return g;
}

ShrunkGradients shrunkEditedGradients(const std::string& bundled, const std::filesystem::path& dir,
    const std::vector<std::int64_t>& ids, const checkpoint::ShrinkOptions& options,
    const std::function<void(nlohmann::ordered_json&)>& edit)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const std::filesystem::path configDir = dir.string() + "_config";
    std::filesystem::create_directories(configDir);
    {
        std::ifstream in(
            std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / (bundled + ".json"));
        const std::string text(
            (std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // Nemotron 3 Super's time_step_limit holds Infinity, as Python writes it.
        auto parsed = parsePythonJsonOrdered(text, bundled);
        EXPECT_TRUE(parsed.ok()) << parsed.error().message;
        if (!parsed.ok()) {
            return {};
        }
        auto config = parsed->value;
        config.erase("quantization_config");
        edit(config);
        std::ofstream(configDir / "config.json") << dumpPythonJson(config, 2);
    }
    return shrunkGradients((configDir / "config.json").string(), dir, ids, options);
}

std::string refusals(const model::ModelSpec& spec)
{
    return fmt::format("{}", fmt::join(exec::backwardUnsupported(spec), "; "));
}

} // namespace day0::test
