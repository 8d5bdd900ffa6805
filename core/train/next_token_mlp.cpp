#include "train/next_token_mlp.h"

#include "numerics/float_formats.h"
#include "train/synthetic_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
    const int V = m_shape.vocab;
    const int D = m_shape.embed;
    const int H = m_shape.hidden;
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
            if (seq[t] < 0 || seq[t] >= V) {
                return Error::badInput(fmt::format(
                    "batch sequence {} position {}: token id {} outside the vocabulary of {}", s, t,
                    seq[t], V));
            }
        }
        predicted += std::max<std::int64_t>(0, std::int64_t(seq.size()) - 2);
    }
    if (predicted == 0) {
        return Error::badInput("batch has no position to predict (sequences need 3+ tokens)");
    }
    const auto E = layout.slice(flat, 0);
    const auto W1 = layout.slice(flat, 1);
    const auto b1 = layout.slice(flat, 2);
    const auto W2 = layout.slice(flat, 3);
    const auto b2 = layout.slice(flat, 4);
    // Gradients accumulate over the batch in double and are rounded once at the end.
    std::vector<double> acc(grad.size(), 0.0);
    const FlatLayout& l = layout;
    auto gE = l.slice(std::span<double>(acc), 0);
    auto gW1 = l.slice(std::span<double>(acc), 1);
    auto gb1 = l.slice(std::span<double>(acc), 2);
    auto gW2 = l.slice(std::span<double>(acc), 3);
    auto gb2 = l.slice(std::span<double>(acc), 4);
    auto r = [compute](double v) { return roundTo(v, compute); };
    const double invN = 1.0 / double(predicted);

    const auto nx = static_cast<std::size_t>(2 * D);
    const auto nh = static_cast<std::size_t>(H);
    const auto nv = static_cast<std::size_t>(V);
    std::vector<double> x(nx), h(nh), z(nv), dz(nv), dh(nh), dx(nx);
    double lossSum = 0.0;
    for (const auto& seq : batch.sequences) {
        for (std::size_t t = 2; t < seq.size(); ++t) {
            const std::size_t a = std::size_t(seq[t - 2]);
            const std::size_t b = std::size_t(seq[t - 1]);
            for (int i = 0; i < D; ++i) {
                x[std::size_t(i)] = E[a * std::size_t(D) + std::size_t(i)];
                x[std::size_t(D + i)] = E[b * std::size_t(D) + std::size_t(i)];
            }
            for (int j = 0; j < H; ++j) {
                double s = b1[std::size_t(j)];
                for (int i = 0; i < 2 * D; ++i) {
                    s += W1[std::size_t(j * 2 * D + i)] * x[std::size_t(i)];
                }
                h[std::size_t(j)] = r(std::tanh(r(s)));
            }
            double zmax = -INFINITY;
            for (int k = 0; k < V; ++k) {
                double s = b2[std::size_t(k)];
                for (int j = 0; j < H; ++j) {
                    s += W2[std::size_t(k * H + j)] * h[std::size_t(j)];
                }
                z[std::size_t(k)] = r(s);
                zmax = std::max(zmax, z[std::size_t(k)]);
            }
            double sumExp = 0.0;
            for (int k = 0; k < V; ++k) {
                sumExp += std::exp(z[std::size_t(k)] - zmax);
            }
            const std::size_t target = std::size_t(seq[t]);
            const double logZ = zmax + std::log(sumExp);
            lossSum += logZ - z[target];
            // d loss / d z = (softmax - onehot) / N.
            for (int k = 0; k < V; ++k) {
                const double p = r(std::exp(z[std::size_t(k)] - logZ));
                dz[std::size_t(k)] = r((p - (std::size_t(k) == target ? 1.0 : 0.0)) * invN);
                gb2[std::size_t(k)] += dz[std::size_t(k)];
                for (int j = 0; j < H; ++j) {
                    gW2[std::size_t(k * H + j)] += dz[std::size_t(k)] * h[std::size_t(j)];
                }
            }
            for (int j = 0; j < H; ++j) {
                double s = 0.0;
                for (int k = 0; k < V; ++k) {
                    s += W2[std::size_t(k * H + j)] * dz[std::size_t(k)];
                }
                const double hj = h[std::size_t(j)];
                dh[std::size_t(j)] = r(r(s) * (1.0 - hj * hj));
                gb1[std::size_t(j)] += dh[std::size_t(j)];
                for (int i = 0; i < 2 * D; ++i) {
                    gW1[std::size_t(j * 2 * D + i)] += dh[std::size_t(j)] * x[std::size_t(i)];
                }
            }
            for (int i = 0; i < 2 * D; ++i) {
                double s = 0.0;
                for (int j = 0; j < H; ++j) {
                    s += W1[std::size_t(j * 2 * D + i)] * dh[std::size_t(j)];
                }
                dx[std::size_t(i)] = r(s);
            }
            for (int i = 0; i < D; ++i) {
                gE[a * std::size_t(D) + std::size_t(i)] += dx[std::size_t(i)];
                gE[b * std::size_t(D) + std::size_t(i)] += dx[std::size_t(D + i)];
            }
        }
    }
    for (std::size_t i = 0; i < grad.size(); ++i) {
        grad[i] = r(acc[i]);
    }
    return lossSum * invN;
}

} // namespace day0::train
