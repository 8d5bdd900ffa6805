#include "train/next_token_mlp.h"

#include "numerics/float_formats.h"
#include "train/synthetic_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace day0::train {

double roundTo(double value, DType dtype)
{
    switch (dtype) {
    case DType::F64:
        return value;
    case DType::F32:
        return double(float(value));
    default:
        return double(numerics::roundToFormat(float(value), dtype));
    }
}

NextTokenMlp::NextTokenMlp(MlpShape shape)
    : m_shape(shape)
{
}

std::vector<ParameterSpec> NextTokenMlp::parameters() const
{
    const std::int64_t v = m_shape.vocab;
    const std::int64_t d = m_shape.embed;
    const std::int64_t h = m_shape.hidden;
    return { { "embed.weight", { v, d } }, { "hidden.weight", { h, 2 * d } },
        { "hidden.bias", { h } }, { "out.weight", { v, h } }, { "out.bias", { v } } };
}

std::vector<double> NextTokenMlp::initialValues(std::uint64_t seed) const
{
    const FlatLayout layout = FlatLayout::of(parameters());
    std::vector<double> flat(std::size_t(layout.total), 0.0);
    std::uint64_t state = seed ^ 0x1217A11ULL;
    auto fill = [&](std::size_t i, double bound) {
        for (double& x : layout.slice(std::span<double>(flat), i)) {
            x = (double(splitMix64(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0) * bound;
        }
    };
    fill(0, 1.0);
    fill(1, 1.0 / std::sqrt(2.0 * m_shape.embed));
    fill(3, 1.0 / std::sqrt(double(m_shape.hidden)));
    return flat;
}

Result<double> NextTokenMlp::lossAndGradients(
    std::span<const double> flat, const Batch& batch, DType compute, std::span<double> grad) const
{
    const auto vocab = std::size_t(m_shape.vocab);
    const auto dim = std::size_t(m_shape.embed);
    const auto hidden = std::size_t(m_shape.hidden);
    const std::size_t inputs = 2 * dim;
    const FlatLayout layout = FlatLayout::of(parameters());
    if (std::int64_t(flat.size()) != layout.total || std::int64_t(grad.size()) != layout.total) {
        return Error::internal(fmt::format("next-token MLP: {} weights and {} gradients for {} "
                                           "parameters",
            flat.size(), grad.size(), layout.total));
    }
    if (compute != DType::F64 && compute != DType::F32 && compute != DType::BF16
        && compute != DType::F16) {
        return Error::unsupported(
            fmt::format("next-token MLP: compute in {} is not modelled (F64, F32, BF16, F16)",
                dtypeName(compute)));
    }
    std::int64_t predicted = 0;
    for (std::size_t s = 0; s < batch.sequences.size(); ++s) {
        const auto& seq = batch.sequences[s];
        for (std::size_t t = 0; t < seq.size(); ++t) {
            if (seq[t] < 0 || seq[t] >= m_shape.vocab) {
                return Error::badInput(fmt::format(
                    "batch sequence {} position {}: token id {} outside the vocabulary of {}", s, t,
                    seq[t], vocab));
            }
        }
        predicted += std::max<std::int64_t>(0, std::int64_t(seq.size()) - 2);
    }
    if (predicted == 0) {
        return Error::badInput("batch has no position to predict (sequences need 3+ tokens)");
    }
    const auto embed = layout.slice(flat, 0);
    const auto w1 = layout.slice(flat, 1);
    const auto b1 = layout.slice(flat, 2);
    const auto w2 = layout.slice(flat, 3);
    const auto b2 = layout.slice(flat, 4);
    // Gradients accumulate over the batch in double and are rounded once at the end.
    std::vector<double> acc(grad.size(), 0.0);
    const auto gEmbed = layout.slice(std::span<double>(acc), 0);
    const auto gW1 = layout.slice(std::span<double>(acc), 1);
    const auto gB1 = layout.slice(std::span<double>(acc), 2);
    const auto gW2 = layout.slice(std::span<double>(acc), 3);
    const auto gB2 = layout.slice(std::span<double>(acc), 4);
    auto r = [compute](double v) { return roundTo(v, compute); };
    const double invN = 1.0 / double(predicted);

    std::vector<double> x(inputs), h(hidden), z(vocab), dz(vocab), dh(hidden), dx(inputs);
    double lossSum = 0.0;
    for (const auto& seq : batch.sequences) {
        for (std::size_t t = 2; t < seq.size(); ++t) {
            const auto a = std::size_t(seq[t - 2]);
            const auto b = std::size_t(seq[t - 1]);
            for (std::size_t i = 0; i < dim; ++i) {
                x[i] = embed[a * dim + i];
                x[dim + i] = embed[b * dim + i];
            }
            for (std::size_t j = 0; j < hidden; ++j) {
                double s = b1[j];
                for (std::size_t i = 0; i < inputs; ++i) {
                    s += w1[j * inputs + i] * x[i];
                }
                h[j] = r(std::tanh(r(s)));
            }
            double zmax = -std::numeric_limits<double>::infinity();
            for (std::size_t k = 0; k < vocab; ++k) {
                double s = b2[k];
                for (std::size_t j = 0; j < hidden; ++j) {
                    s += w2[k * hidden + j] * h[j];
                }
                z[k] = r(s);
                zmax = std::max(zmax, z[k]);
            }
            double sumExp = 0.0;
            for (std::size_t k = 0; k < vocab; ++k) {
                sumExp += std::exp(z[k] - zmax);
            }
            const auto target = std::size_t(seq[t]);
            const double logZ = zmax + std::log(sumExp);
            lossSum += logZ - z[target];
            // d loss / d z = (softmax - onehot) / N.
            for (std::size_t k = 0; k < vocab; ++k) {
                const double p = r(std::exp(z[k] - logZ));
                dz[k] = r((p - (k == target ? 1.0 : 0.0)) * invN);
                gB2[k] += dz[k];
                for (std::size_t j = 0; j < hidden; ++j) {
                    gW2[k * hidden + j] += dz[k] * h[j];
                }
            }
            for (std::size_t j = 0; j < hidden; ++j) {
                double s = 0.0;
                for (std::size_t k = 0; k < vocab; ++k) {
                    s += w2[k * hidden + j] * dz[k];
                }
                dh[j] = r(r(s) * (1.0 - h[j] * h[j]));
                gB1[j] += dh[j];
                for (std::size_t i = 0; i < inputs; ++i) {
                    gW1[j * inputs + i] += dh[j] * x[i];
                }
            }
            for (std::size_t i = 0; i < inputs; ++i) {
                double s = 0.0;
                for (std::size_t j = 0; j < hidden; ++j) {
                    s += w1[j * inputs + i] * dh[j];
                }
                dx[i] = r(s);
            }
            for (std::size_t i = 0; i < dim; ++i) {
                gEmbed[a * dim + i] += dx[i];
                gEmbed[b * dim + i] += dx[dim + i];
            }
        }
    }
    for (std::size_t i = 0; i < grad.size(); ++i) {
        grad[i] = r(acc[i]);
    }
    return lossSum * invN;
}

} // namespace day0::train
