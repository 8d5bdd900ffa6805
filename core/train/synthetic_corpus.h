#pragma once

#include "train/trainable_model.h"

#include <cstdint>
#include <string>

namespace day0::train {

/// A deterministic synthetic language: an order-2 Markov chain over `vocab` token ids in which
/// every context (previous two tokens) has three possible successors with probabilities
/// 0.7 / 0.2 / 0.1, drawn from `seed`. It has structure to learn (a next-token model can go
/// from ln(vocab) nats down to the chain's entropy, ~0.80 nats) and needs no files. The same on
/// every platform: an integer generator (splitmix64), no std distributions. Thread-safe.
class SyntheticCorpus final : public TrainingData {
public:
    SyntheticCorpus(int vocab, std::uint64_t seed);

    [[nodiscard]] int vocab() const { return m_vocab; }

    /// The chain's entropy rate in nats per token: the lowest loss any model can reach.
    [[nodiscard]] static double entropyNats();

    /// Sequence `index` of training step `step`, `length` tokens: a pure function of
    /// (seed, step, index), so every data-parallel split of a step's batch sees the same data
    /// and a resumed run sees what an uninterrupted one saw.
    [[nodiscard]] std::vector<std::int32_t> sequence(
        std::int64_t step, std::int64_t index, int length) const;

    /// Sequences [first, first + count) of step `step`'s global batch.
    [[nodiscard]] Batch batch(
        std::int64_t step, std::int64_t first, int count, int length) const override;
    [[nodiscard]] std::string describe() const override;

private:
    int m_vocab;
    std::uint64_t m_seed;
    std::vector<std::int32_t> m_successors; ///< 3 per context (a·vocab + b)
};

/// splitmix64: the next 64-bit value of the generator whose state is `state`.
std::uint64_t splitMix64(std::uint64_t& state);

} // namespace day0::train
