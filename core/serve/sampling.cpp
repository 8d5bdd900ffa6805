#include "serve/sampling.h"

#include "exec/sequence_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace day0::serve {

Candidates candidateDistribution(std::span<const double> logits, const SamplingParams& params)
{
    const auto vocab = std::int64_t(logits.size());
    const double inv = 1.0 / params.temperature;
    // Dividing by T > 0 keeps the order, so the order of the logits is the order of z.
    const auto before = [&](std::int64_t a, std::int64_t b) {
        const double la = logits[std::size_t(a)];
        const double lb = logits[std::size_t(b)];
        return la > lb || (la == lb && a < b);
    };
    std::vector<std::int64_t> kept;
    if (params.topK > 0 && params.topK < vocab) {
        // The k first in that order (a strict total order: ties go to the lower id), in O(V).
        std::vector<std::int64_t> order(std::size_t(vocab), 0);
        std::iota(order.begin(), order.end(), std::int64_t(0));
        std::nth_element(
            order.begin(), order.begin() + std::ptrdiff_t(params.topK - 1), order.end(), before);
        kept.assign(order.begin(), order.begin() + std::ptrdiff_t(params.topK));
        std::sort(kept.begin(), kept.end());
    } else {
        kept.resize(std::size_t(vocab));
        std::iota(kept.begin(), kept.end(), std::int64_t(0));
    }
    double top = -std::numeric_limits<double>::infinity();
    for (const auto id : kept) {
        top = std::max(top, logits[std::size_t(id)] * inv);
    }
    std::vector<double> probs(kept.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        probs[i] = std::exp(logits[std::size_t(kept[i])] * inv - top);
        sum += probs[i];
    }
    for (auto& p : probs) {
        p /= sum;
    }
    if (params.topP < 1.0) {
        // The shortest prefix of the order whose mass reaches top_p: sort only as far as it
        // reaches (64 first, then 4x more), since the mass is usually in a few tokens.
        std::vector<std::size_t> byProb(kept.size());
        std::iota(byProb.begin(), byProb.end(), std::size_t(0));
        const auto likelier
            = [&](std::size_t a, std::size_t b) { return before(kept[a], kept[b]); };
        std::size_t sorted = 0;
        std::size_t cut = kept.size();
        double cumulative = 0.0;
        for (std::size_t n = std::min<std::size_t>(64, kept.size()); cut == kept.size();
             n = std::min(n * 4, kept.size())) {
            std::partial_sort(byProb.begin() + std::ptrdiff_t(sorted),
                byProb.begin() + std::ptrdiff_t(n), byProb.end(), likelier);
            for (; sorted < n; ++sorted) {
                cumulative += probs[byProb[sorted]];
                if (cumulative >= params.topP) {
                    cut = sorted + 1;
                    break;
                }
            }
            if (n == kept.size()) {
                break;
            }
        }
        byProb.resize(cut);
        std::sort(byProb.begin(), byProb.end()); // back to id order
        std::vector<std::int64_t> ids;
        std::vector<double> mass;
        double total = 0.0;
        for (const auto i : byProb) {
            ids.push_back(kept[i]);
            mass.push_back(probs[i]);
            total += probs[i];
        }
        for (auto& p : mass) {
            p /= total;
        }
        return { std::move(ids), std::move(mass) };
    }
    return { std::move(kept), std::move(probs) };
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
    if (m_params.adjustsLogits()) {
        m_adjusted.assign(logits.begin(), logits.end());
        for (const auto& [id, count] : m_counts) {
            m_adjusted[std::size_t(id)]
                -= double(count) * m_params.frequencyPenalty + m_params.presencePenalty;
        }
        for (const auto& [id, bias] : m_params.logitBias) {
            if (id >= 0 && std::size_t(id) < m_adjusted.size()) {
                m_adjusted[std::size_t(id)] += bias;
            }
        }
        logits = m_adjusted;
    }
    const std::int64_t token = draw(logits);
    if (m_params.presencePenalty != 0.0 || m_params.frequencyPenalty != 0.0) {
        ++m_counts[token];
    }
    return token;
}

std::int64_t Sampler::draw(std::span<const double> logits)
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
