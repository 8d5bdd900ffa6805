#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace day0::serve {

/// How one request draws its tokens (OpenAI's temperature, top_p and seed; vLLM's top_k).
struct SamplingParams {
    double temperature = 1.0; ///< 0: greedy (the largest logit, ties to the lower id)
    double topP = 1.0; ///< in (0, 1]; 1: off
    std::int64_t topK = 0; ///< 0 (or vLLM's -1): off; k: the k likeliest only
    std::optional<std::uint64_t> seed; ///< none: the generator is seeded from std::random_device
    /// OpenAI's penalties, in [-2, 2]: before anything else, the logit of a token generated c > 0
    /// times so far in this choice (the prompt not counted) loses
    /// c · frequencyPenalty + presencePenalty.
    double presencePenalty = 0.0;
    double frequencyPenalty = 0.0;
    /// OpenAI's logit_bias: added to the logit of each token id (in [-100, 100]), after the
    /// penalties.
    std::map<std::int64_t, double> logitBias;
    [[nodiscard]] bool greedy() const { return temperature == 0.0; }
    /// Whether the logits are changed before sampling (penalties or a bias).
    [[nodiscard]] bool adjustsLogits() const
    {
        return presencePenalty != 0.0 || frequencyPenalty != 0.0 || !logitBias.empty();
    }
};

/// The distribution a Sampler draws from: the candidate ids in increasing id order and their
/// probabilities, which sum to 1.
struct Candidates {
    std::vector<std::int64_t> ids;
    std::vector<double> probs;
};

/// The tokens a request may draw and their probabilities, in this order:
///   1. logits l (the model's last row, in double);
///   2. temperature: z = l / T (T > 0; T = 0 is greedy and never gets here);
///   3. top-k: in the order of z descending, ties by the lower id, the first k are kept;
///   4. top-p: p = softmax(z) over what top-k kept; the shortest prefix of that order whose
///      cumulative p reaches top_p (at least one token) is kept;
///   5. softmax again over the kept tokens (p renormalised to sum 1).
/// O(V) without top-p; top-p sorts only the prefix it keeps (in steps of 4x from 64).
Candidates candidateDistribution(std::span<const double> logits, const SamplingParams& params);

/// A uniform double in [0, 1) from the top 53 bits of one mt19937_64 output: (x >> 11) · 2^-53.
/// Written out rather than std::uniform_real_distribution, whose algorithm the standard leaves to
/// the library, so that a seed gives the same draws with every standard library.
double uniform53(std::mt19937_64& generator);

/// One request's sampler: the penalties and logit bias (SamplingParams), then
/// candidateDistribution, then one draw per token from a per-request std::mt19937_64 (seeded with
/// `seed`, or from std::random_device without one) by inverse CDF over the candidates in id order:
/// u = uniform53(generator), the first candidate whose cumulative probability exceeds u. Greedy
/// (temperature 0) picks exec::greedyToken and draws nothing. The generator belongs to the
/// request, so a seeded request gives the same tokens whatever else the server runs beside it.
/// Thread-compatible.
class Sampler {
public:
    explicit Sampler(SamplingParams params);
    /// The next token for `logits` [vocab].
    std::int64_t sample(std::span<const double> logits);
    [[nodiscard]] const SamplingParams& params() const { return m_params; }

private:
    /// The token for already adjusted `logits`: greedy, or one draw.
    std::int64_t draw(std::span<const double> logits);
    SamplingParams m_params;
    std::mt19937_64 m_generator;
    std::unordered_map<std::int64_t, std::int64_t> m_counts; ///< tokens drawn so far (penalties)
    std::vector<double> m_adjusted; ///< the logits after penalties and bias
};

} // namespace day0::serve
