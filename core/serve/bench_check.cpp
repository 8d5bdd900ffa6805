#include "serve/bench_check.h"

#include "exec/sequence_decoder.h"
#include "serve/served_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::serve {

Result<GreedyTokens> greedyDecode(const exec::Engine& engine, const exec::PrecisionPlan& plan,
    const std::vector<std::int64_t>& prompt, std::int64_t count, std::stop_token stop)
{
    GreedyTokens out;
    if (prompt.empty() || count < 1) {
        return out;
    }
    // The capacity Engine::run gives the same request: prompt + new tokens − 1.
    auto decoder
        = exec::SequenceDecoder::open(engine, plan, std::int64_t(prompt.size()) + count - 1);
    if (!decoder) {
        return decoder.error();
    }
    auto logits = decoder->feed(prompt, stop);
    for (std::int64_t i = 0;; ++i) {
        if (!logits) {
            return logits.error();
        }
        const auto token = exec::greedyToken(*logits);
        out.tokens.push_back(token);
        out.logprobs.push_back((*logits)[std::size_t(token)] - exec::logSumExp(*logits));
        if (i + 1 == count) {
            break;
        }
        const std::int64_t one[] = { token };
        logits = decoder->feed(one, stop);
    }
    return out;
}

Result<BenchReference> BenchReference::open(const std::filesystem::path& checkpoint,
    const std::string& precision, Progress& progress, std::stop_token stop)
{
    auto plan = exec::parsePrecisionPlan(precision);
    if (!plan) {
        return plan.error().withContext("--check-precision");
    }
    auto loaded = loadServedModel(checkpoint, plan->isF64(), progress, stop);
    if (!loaded) {
        return loaded.error();
    }
    BenchReference out;
    out.m_engine = std::move(loaded->engine);
    out.m_plan = *plan;
    out.m_checkpoint = checkpoint.string();
    return out;
}

BenchReference::BenchReference(BenchReference&&) noexcept = default;
BenchReference& BenchReference::operator=(BenchReference&&) noexcept = default;
BenchReference::~BenchReference() = default;

std::int64_t BenchReference::vocabSize() const { return m_engine->spec().vocabSize; }

Result<const GreedyTokens*> BenchReference::greedy(
    const std::vector<std::int64_t>& prompt, std::int64_t count, std::stop_token stop)
{
    const auto key = std::make_pair(prompt, count);
    if (const auto it = m_cache.find(key); it != m_cache.end()) {
        return &it->second;
    }
    auto tokens = greedyDecode(*m_engine, m_plan, prompt, count, stop);
    if (!tokens) {
        return tokens.error().withContext(m_checkpoint);
    }
    return &m_cache.emplace(key, std::move(*tokens)).first->second;
}

Result<LevelCheck> checkLevel(BenchReference& reference, const BenchResult& level,
    double logprobTolerance, Progress& progress, std::stop_token stop)
{
    LevelCheck check;
    progress.setStage("check");
    progress.setTotal(std::int64_t(level.requests.size()));
    for (const auto& q : level.requests) {
        progress.advance();
        if (!q.ok) {
            continue; // failed requests are reported as errors, not as divergences
        }
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        if (q.tokenIds.empty()) {
            return Error::unsupported(fmt::format(
                "--check: {} sent no choices[0].token_ids (request {}); the check compares "
                "token ids and cannot rely on detokenised text",
                level.options.url, q.index));
        }
        auto ref = reference.greedy(q.prompt, q.maxTokens, stop);
        if (!ref) {
            return ref.error();
        }
        const auto& want = (*ref)->tokens;
        ++check.checked;
        std::optional<Divergence> first;
        const std::size_t common = std::min(want.size(), q.tokenIds.size());
        for (std::size_t i = 0; i < common && !first; ++i) {
            if (q.tokenIds[i] != want[i]) {
                first = Divergence { q.index, std::int64_t(i), "token", want[i], q.tokenIds[i] };
            }
        }
        if (!first && q.tokenIds.size() != want.size()) {
            const std::size_t i = common;
            first = Divergence { q.index, std::int64_t(i), "length", i < want.size() ? want[i] : -1,
                i < q.tokenIds.size() ? q.tokenIds[i] : -1 };
        }
        // Log-probabilities are compared only over the tokens that agree.
        const std::size_t agreed = first ? std::size_t(first->position) : common;
        if (!q.tokenLogprobs.empty()) {
            ++check.logprobsCompared;
            for (std::size_t i = 0; i < std::min(agreed, q.tokenLogprobs.size()); ++i) {
                const double delta = std::abs(q.tokenLogprobs[i] - (*ref)->logprobs[i]);
                if (!(delta <= logprobTolerance)) { // NaN diverges too
                    first = Divergence { q.index, std::int64_t(i), "logprob", want[i],
                        q.tokenIds[i], delta };
                    break;
                }
                check.maxLogprobDelta = std::max(check.maxLogprobDelta, delta);
            }
        }
        if (first) {
            check.divergences.push_back(*first);
        }
    }
    return check;
}

std::string describeDivergence(const Divergence& d)
{
    if (d.kind == "logprob") {
        return fmt::format("request {}: token {} ({}) has log-probability {:.3g} away from the "
                           "reference's",
            d.request, d.position, d.got, d.logprobDelta);
    }
    if (d.kind == "length") {
        return fmt::format("request {}: the endpoint sent {} tokens where the reference has {}",
            d.request, d.got < 0 ? d.position : d.position + 1,
            d.expected < 0 ? d.position : d.position + 1);
    }
    return fmt::format("request {}: token {} is {}, the reference's is {}", d.request, d.position,
        d.got, d.expected);
}

nlohmann::json checkJson(const LevelCheck& check)
{
    nlohmann::json list = nlohmann::json::array();
    for (const auto& d : check.divergences) {
        list.push_back({ { "request", d.request }, { "position", d.position }, { "kind", d.kind },
            { "expected", d.expected }, { "got", d.got }, { "logprob_delta", d.logprobDelta } });
    }
    nlohmann::json j = { { "checked", check.checked }, { "diverged", check.divergences.size() },
        { "logprobs_compared", check.logprobsCompared },
        { "max_logprob_delta", check.maxLogprobDelta }, { "divergences", list } };
    if (!list.empty()) {
        j["first_divergence"] = list.front(); // the first request sent that diverged
    }
    return j;
}

} // namespace day0::serve
