#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "exec/engine.h"
#include "exec/precision.h"
#include "serve/serve_bench.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::serve {

/// Greedy tokens of the reference engine and the log-probability of each.
struct GreedyTokens {
    std::vector<std::int64_t> tokens;
    std::vector<double> logprobs; ///< log softmax of the logits at the chosen token
};

/// `count` greedy tokens after `prompt`, decoded over the cache (exec::SequenceDecoder, the
/// forward `day0 run` and `day0 serve` use), with no end-of-sequence stop (as ignore_eos).
Result<GreedyTokens> greedyDecode(const exec::Engine& engine, const exec::PrecisionPlan& plan,
    const std::vector<std::int64_t>& prompt, std::int64_t count, std::stop_token stop);

/// The reference engine `--check` compares an endpoint's tokens with: a checkpoint loaded as
/// `day0 serve` loads it, and the greedy tokens of each prompt, computed once per (prompt,
/// length). Not thread-safe.
class BenchReference {
public:
    /// Loads `checkpoint` in `precision` (a `day0 run --precision` spelling). Cancellable.
    static Result<BenchReference> open(const std::filesystem::path& checkpoint,
        const std::string& precision, Progress& progress, std::stop_token stop);

    BenchReference(BenchReference&&) noexcept;
    BenchReference& operator=(BenchReference&&) noexcept;
    ~BenchReference();

    [[nodiscard]] std::int64_t vocabSize() const;
    [[nodiscard]] const std::string& checkpoint() const { return m_checkpoint; }

    /// The reference's greedy tokens for `prompt`, `count` of them.
    Result<const GreedyTokens*> greedy(
        const std::vector<std::int64_t>& prompt, std::int64_t count, std::stop_token stop);

private:
    BenchReference() = default;
    std::unique_ptr<exec::Engine> m_engine;
    exec::PrecisionPlan m_plan;
    std::string m_checkpoint;
    std::map<std::pair<std::vector<std::int64_t>, std::int64_t>, GreedyTokens> m_cache;
};

/// Where one request's answer first leaves the reference's.
struct Divergence {
    int request = 0; ///< the request's index in its level
    std::int64_t position = 0; ///< output token index (0: the first generated token)
    std::string kind; ///< "token", "logprob", "length"
    std::int64_t expected = -1; ///< the reference's token there (-1: none)
    std::int64_t got = -1; ///< the endpoint's token there (-1: none)
    double logprobDelta = 0.0; ///< |endpoint − reference| log-probability there, where both given
};

/// The check of one load level.
struct LevelCheck {
    int checked = 0; ///< completed requests compared
    int logprobsCompared = 0; ///< of those, requests whose log-probabilities were compared
    double maxLogprobDelta = 0.0; ///< over the compared tokens that agree
    std::vector<Divergence> divergences; ///< the first of each diverging request, by index
};

/// Compares every completed request of `level` with the reference: tokens one by one, then (when
/// the endpoint sent them) the chosen tokens' log-probabilities within `logprobTolerance` nats.
/// A completed request without `token_ids` is an error naming the endpoint (the check needs
/// them). Progress counts requests compared; cancellable.
Result<LevelCheck> checkLevel(BenchReference& reference, const BenchResult& level,
    double logprobTolerance, Progress& progress, std::stop_token stop);

/// {"checked", "diverged", "logprobs_compared", "max_logprob_delta", "divergences": [...]}.
nlohmann::json checkJson(const LevelCheck& check);

/// "request 3: token 5 is 17, the reference's is 42".
std::string describeDivergence(const Divergence& d);

} // namespace day0::serve
