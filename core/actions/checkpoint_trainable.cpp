#include "actions/checkpoint_trainable.h"

#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/forward.h"
#include "exec/layout_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace day0::actions {

namespace {

/// Tensors no gradient reaches by construction (exec::untrainableParameter).
bool untrainable(const std::string& name) { return exec::untrainableParameter(name); }

} // namespace

Result<CheckpointTrainable> CheckpointTrainable::load(const std::filesystem::path& checkpoint)
{
    CheckpointTrainable m;
    auto spec = exec::loadCheckpointModel(checkpoint);
    if (!spec) {
        return spec.error();
    }
    m.m_spec = std::move(*spec);
    if (const auto missing = exec::backwardUnsupported(m.m_spec); !missing.empty()) {
        return Error::unsupported(fmt::format("train {}: the backward pass does not cover {} "
                                              "({})",
            checkpoint.string(), fmt::join(missing, "; "), model::familyName(m.m_spec.family)));
    }
    auto opened = exec::openCheckpointWeights(checkpoint);
    if (!opened) {
        return opened.error();
    }
    // The weights under the engine's canonical names, as the engine reads them: gpt-oss's fused
    // experts one by one (exec/layout_weights.h).
    const exec::detail::LayoutWeights mapped(**opened, m.m_spec);
    const exec::WeightSource& weights = exec::detail::needsLayoutMapping(m.m_spec)
        ? static_cast<const exec::WeightSource&>(mapped)
        : **opened;
    for (const auto& req : exec::detail::requiredWeights(m.m_spec)) {
        if (!weights.has(req.name)) {
            if (req.optional) {
                continue;
            }
            return Error::badInput(
                fmt::format("{}: weight '{}' is missing", weights.describe(), req.name));
        }
        // As the engine reads it (and `day0 run --grad` trains it): block-scaled FP8 times its
        // `_scale_inv` blocks. The raw FP8 codes of DeepSeek-V3's and Kimi-K2's releases are
        // the weights up to 448 × the block's scale: a model trained on them is not the
        // checkpoint's (its attention saturates).
        bool exactFp8 = false;
        auto t = exec::detail::loadForwardWeight(weights, req, m.m_spec, DType::F64, exactFp8);
        if (!t) {
            return t.error();
        }
        if (untrainable(req.name)) {
            m.m_fixed.emplace(req.name, t->contiguous());
            continue;
        }
        const auto values = t->toDoubles();
        m.m_initial.insert(m.m_initial.end(), values.begin(), values.end());
        m.m_parameters.push_back({ req.name, req.shape });
    }
    return m;
}

std::vector<train::ParameterSpec> CheckpointTrainable::parameters() const { return m_parameters; }

std::vector<double> CheckpointTrainable::initialValues(std::uint64_t /*seed*/) const
{
    return m_initial;
}

Result<double> CheckpointTrainable::lossAndGradients(std::span<const double> flat,
    const train::Batch& batch, DType compute, std::span<double> grad) const
{
    train::StepFootprint unused;
    return lossGradientsAndFootprint(flat, batch, compute, grad, unused);
}

Result<double> CheckpointTrainable::lossGradientsAndFootprint(std::span<const double> flat,
    const train::Batch& batch, DType compute, std::span<double> grad,
    train::StepFootprint& footprint) const
{
    return detail::batchLossAndGradients(
        m_spec, m_parameters, m_fixed, flat, batch, compute, grad, {}, &footprint);
}

namespace detail {

Result<double> batchLossAndGradients(const model::ModelSpec& spec,
    const std::vector<train::ParameterSpec>& parameters,
    const std::map<std::string, numerics::Tensor>& fixed, std::span<const double> flat,
    const train::Batch& batch, DType compute, std::span<double> grad, const TpShare& tp,
    train::StepFootprint* footprint)
{
    if (compute != DType::F64 && compute != DType::F32 && compute != DType::BF16
        && compute != DType::F16) {
        return Error::unsupported(fmt::format("{}: the backward pass computes in fp64, fp32 or "
                                              "emulated bf16/fp16; {} compute is not modelled",
            spec.name, dtypeName(compute)));
    }
    const auto layout = train::FlatLayout::of(parameters);
    if (std::int64_t(flat.size()) != layout.total || std::int64_t(grad.size()) != layout.total) {
        return Error::internal(fmt::format("{}: {} weights and {} gradients for {} parameters",
            spec.name, flat.size(), grad.size(), layout.total));
    }
    const bool fp64 = compute == DType::F64;
    std::map<std::string, numerics::Tensor> weights = fixed;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
        const auto& p = parameters[i];
        const numerics::Shape shape(p.shape.begin(), p.shape.end());
        const auto values = layout.slice(flat, i);
        if (fp64) {
            weights.emplace(p.name, numerics::Tensor::fromDoubles(shape, values));
        } else {
            // The trainer already rounded the weights to fp32 (or to bf16/fp16, the copy a
            // mixed-precision run computes on): the conversion is exact.
            const std::vector<float> f(values.begin(), values.end());
            weights.emplace(p.name, numerics::Tensor::fromFloats(shape, f));
        }
    }
    exec::GradientOptions options;
    options.fp64 = fp64;
    options.tpSum = tp.sum;
    options.tpMax = tp.max;
    options.vocabStart = tp.vocabStart;
    options.vocabTotal = tp.vocabTotal;
    if (compute == DType::BF16 || compute == DType::F16) {
        options.emulated
            = compute == DType::BF16 ? exec::PrecisionMode::BF16 : exec::PrecisionMode::F16;
    }
    // Per-sequence means weighted by their positions give the batch's mean over positions.
    std::vector<double> acc(grad.size(), 0.0);
    if (footprint != nullptr) {
        *footprint = {};
    }
    double lossSum = 0.0;
    std::int64_t counted = 0;
    for (std::size_t s = 0; s < batch.sequences.size(); ++s) {
        const auto& seq = batch.sequences[s];
        const std::vector<std::int64_t> ids(seq.begin(), seq.end());
        const auto targets = exec::nextTokenTargets(ids);
        auto r = exec::lossAndGradients(spec, weights, ids, targets, options, {});
        if (!r) {
            return r.error().withContext(fmt::format("batch sequence {}", s));
        }
        if (footprint != nullptr) {
            footprint->keptActivations = std::max(footprint->keptActivations, r->keptBytes);
        }
        if (r->counted == 0) {
            continue;
        }
        const auto w = double(r->counted);
        lossSum += r->loss * w;
        counted += r->counted;
        for (std::size_t i = 0; i < parameters.size(); ++i) {
            const auto it = r->parameters.find(parameters[i].name);
            if (it == r->parameters.end()) {
                return Error::internal(fmt::format(
                    "{}: the backward gave no gradient for '{}'", spec.name, parameters[i].name));
            }
            const auto g = it->second.toDoubles();
            auto out = layout.slice(std::span<double>(acc), i);
            for (std::size_t k = 0; k < out.size(); ++k) {
                out[k] += g[k] * w;
            }
        }
    }
    if (counted == 0) {
        return Error::badInput("batch has no position to predict (sequences need 2+ tokens)");
    }
    // The batch's gradient in fp32 below fp64: a mixed-precision run's fp32 main gradients.
    const double inv = 1.0 / double(counted);
    for (std::size_t i = 0; i < grad.size(); ++i) {
        grad[i] = fp64 ? acc[i] * inv : double(float(acc[i] * inv));
    }
    return lossSum * inv;
}

} // namespace detail

} // namespace day0::actions
