#include "train/trainable_model.h"

#include <fmt/format.h>

namespace day0::train {

std::int64_t ParameterSpec::numel() const
{
    std::int64_t n = 1;
    for (const auto d : shape) {
        n *= d;
    }
    return n;
}

FlatLayout FlatLayout::of(std::vector<ParameterSpec> parameters)
{
    FlatLayout l;
    l.parameters = std::move(parameters);
    for (const auto& p : l.parameters) {
        l.offsets.push_back(l.total);
        l.total += p.numel();
    }
    return l;
}

std::span<double> FlatLayout::slice(std::span<double> flat, std::size_t i) const
{
    return flat.subspan(std::size_t(offsets[i]), std::size_t(parameters[i].numel()));
}

std::span<const double> FlatLayout::slice(std::span<const double> flat, std::size_t i) const
{
    return flat.subspan(std::size_t(offsets[i]), std::size_t(parameters[i].numel()));
}

Result<double> TrainableModel::lossGradientsAndFootprint(std::span<const double> flat,
    const Batch& batch, DType compute, std::span<double> grad, StepFootprint& footprint) const
{
    footprint = {};
    return lossAndGradients(flat, batch, compute, grad);
}

Result<std::unique_ptr<TensorParallelShard>> TrainableModel::tensorParallel(
    int tp, int /*rank*/, comm::Communicator& /*group*/) const
{
    return Error::unsupported(fmt::format("tp={}: this model has no tensor-parallel split (the "
                                          "checkpoints of the LLM backward have one)",
        tp));
}

} // namespace day0::train
