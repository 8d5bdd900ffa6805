#include "serve/sampling.h"

#include "exec/sequence_decoder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace day0::serve {

Candidates candidateDistribution(std::span<const double> logits, const SamplingParams& params)
{
    const auto vocab = std::int64_t(logits.size());
    const double inv = 1.0 / params.temperature;
    std::vector<std::int64_t> order(std::size_t(vocab), 0);
    std::iota(order.begin(), order.end(), std::int64_t(0));
    // Dividing by T > 0 keeps the order, so the order of the logits is the order of z.
    const auto before = [&](std::int64_t a, std::int64_t b) {
        const double la = logits[std::size_t(a)];
        const double lb = logits[std::size_t(b)];
        return la > lb || (la == lb && a < b);
    };
    std::size_t kept = order.size();
    if (params.topK > 0 && params.topK < vocab) {
        kept = std::size_t(params.topK);
        std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(kept), order.end(), before);
    } else {
        std::sort(order.begin(), order.end(), before);
    }
    order.resize(kept);
    const double top = logits[std::size_t(order.front())] * inv;
    std::vector<double> probs(kept);
    double sum = 0.0;
    for (std::size_t i = 0; i < kept; ++i) {
        probs[i] = std::exp(logits[std::size_t(order[i])] * inv - top);
        sum += probs[i];
    }
    for (auto& p : probs) {
        p /= sum;
    }
    if (params.topP < 1.0) {
        double cumulative = 0.0;
        std::size_t n = 0;
        while (n < kept) {
            cumulative += probs[n++];
            if (cumulative >= params.topP) {
                break;
            }
        }
        order.resize(n);
        probs.resize(n);
        const double mass = std::accumulate(probs.begin(), probs.end(), 0.0);
        for (auto& p : probs) {
            p /= mass;
        }
    }
    return { std::move(order), std::move(probs) };
}

double uniform53(std::mt19937_64& generator) { return double(generator() >> 11) * 0x1.0p-53; }

namespace {

std::uint64_t seedOf(const SamplingParams& params)
{
    if (params.seed) {
        return *params.seed;
    }
    std::random_device device;
    return (std::uint64_t(device()) << 32) ^ std::uint64_t(device());
}

} // namespace

Sampler::Sampler(SamplingParams params)
    : m_params(params)
    , m_generator(seedOf(params))
{
}

std::int64_t Sampler::sample(std::span<const double> logits)
{
    if (m_params.greedy()) {
        return exec::greedyToken(logits);
    }
    const Candidates c = candidateDistribution(logits, m_params);
    const double u = uniform53(m_generator);
    double cumulative = 0.0;
    for (std::size_t i = 0; i < c.ids.size(); ++i) {
        cumulative += c.probs[i];
        if (u < cumulative) {
            return c.ids[i];
        }
    }
    return c.ids.back(); // u within rounding of 1
}

} // namespace day0::serve
