#include "train/synthetic_corpus.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::train {

namespace {

constexpr double kProbabilities[3] = { 0.7, 0.2, 0.1 };

/// A uniform double in [0, 1) from the top 53 bits.
double uniform(std::uint64_t& state) { return double(splitMix64(state) >> 11) * 0x1.0p-53; }

} // namespace

std::uint64_t splitMix64(std::uint64_t& state)
{
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

SyntheticCorpus::SyntheticCorpus(int vocab, std::uint64_t seed)
    : m_vocab(vocab)
    , m_seed(seed)
{
    std::uint64_t state = seed ^ 0xC0DE5EEDULL;
    m_successors.resize(std::size_t(vocab) * std::size_t(vocab) * 3);
    for (std::size_t c = 0; c < std::size_t(vocab) * std::size_t(vocab); ++c) {
        // Three distinct successors per context.
        for (int j = 0; j < 3; ++j) {
            std::int32_t t = 0;
            bool distinct = false;
            while (!distinct) {
                t = std::int32_t(splitMix64(state) % std::uint64_t(vocab));
                distinct = true;
                for (int i = 0; i < j; ++i) {
                    distinct = distinct && m_successors[c * 3 + std::size_t(i)] != t;
                }
            }
            m_successors[c * 3 + std::size_t(j)] = t;
        }
    }
}

double SyntheticCorpus::entropyNats()
{
    double h = 0.0;
    for (const double p : kProbabilities) {
        h -= p * std::log(p);
    }
    return h;
}

std::vector<std::int32_t> SyntheticCorpus::sequence(
    std::int64_t step, std::int64_t index, int length) const
{
    std::uint64_t state = m_seed;
    state ^= splitMix64(state) ^ std::uint64_t(step) * 0x9E3779B97F4A7C15ULL;
    state ^= splitMix64(state) ^ std::uint64_t(index) * 0xD1B54A32D192ED03ULL;
    std::vector<std::int32_t> s;
    s.reserve(std::size_t(std::max(length, 0)));
    for (int i = 0; i < length; ++i) {
        if (i < 2) {
            s.push_back(std::int32_t(splitMix64(state) % std::uint64_t(m_vocab)));
            continue;
        }
        const std::size_t context = std::size_t(s[std::size_t(i) - 2]) * std::size_t(m_vocab)
            + std::size_t(s[std::size_t(i) - 1]);
        const double u = uniform(state);
        const int choice = u < kProbabilities[0]        ? 0
            : u < kProbabilities[0] + kProbabilities[1] ? 1
                                                        : 2;
        s.push_back(m_successors[context * 3 + std::size_t(choice)]);
    }
    return s;
}

Batch SyntheticCorpus::batch(std::int64_t step, std::int64_t first, int count, int length) const
{
    Batch b;
    for (int i = 0; i < count; ++i) {
        b.sequences.push_back(sequence(step, first + i, length));
    }
    return b;
}

std::string SyntheticCorpus::describe() const
{
    return fmt::format("synthetic order-2 chain over {} ids, seed {}", m_vocab, m_seed);
}

} // namespace day0::train
