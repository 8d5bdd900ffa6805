#include "exec/sequence_decoder.h"

#include "exec/batch_decode.h"
#include "exec/forward.h"
#include "exec/null_taps.h"
#include "numerics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

namespace day0::exec {

struct SequenceDecoder::State {
    const Engine* engine = nullptr; ///< whose weights it reads (feedBatch needs one engine)
    Backend* backend = nullptr; ///< computes the float operators; null: the CPU reference
    std::int64_t vocab = 0;
    std::variant<std::unique_ptr<detail::Forward<float>>, std::unique_ptr<detail::Forward<double>>>
        forward;
};

SequenceDecoder::SequenceDecoder(std::unique_ptr<State> state, std::int64_t capacity)
    : m_state(std::move(state))
    , m_capacity(capacity)
{
}

SequenceDecoder::SequenceDecoder(SequenceDecoder&&) noexcept = default;
SequenceDecoder& SequenceDecoder::operator=(SequenceDecoder&&) noexcept = default;
SequenceDecoder::~SequenceDecoder() = default;

Result<SequenceDecoder> SequenceDecoder::open(const Engine& engine, const PrecisionPlan& plan,
    std::int64_t capacity, std::int64_t deltaChunk, Backend* backend)
{
    if (backend != nullptr && engine.isF64()) {
        return Error::badInput(fmt::format("the fp64 reference runs on day0-cpu only, not on "
                                           "backend '{}'; run fp32 or a lower precision there",
            backend->name()));
    }
    if (backend != nullptr && engine.spec().family == model::Family::DeepseekV4) {
        // As Engine::run: DeepSeek-V4's block computes on the CPU reference loops.
        return Error::unsupported(fmt::format("backend '{}' on deepseek_v4: its block runs on "
                                              "the CPU reference only",
            backend->name()));
    }
    if (plan.isF64() != engine.isF64()) {
        return Error::internal(fmt::format("a {} sequence needs an engine loaded in {}",
            precisionName(plan.base), plan.isF64() ? "fp64" : "fp32"));
    }
    if (capacity < 1) {
        return Error::badInput(fmt::format("a sequence needs room for a token, got {}", capacity));
    }
    if (deltaChunk < 1) {
        return Error::badInput(fmt::format(
            "the linear-attention chunk must be at least one token, got {}", deltaChunk));
    }
    auto state = std::make_unique<State>();
    state->vocab = engine.spec().vocabSize;
    state->engine = &engine;
    state->backend = backend;
    // Engine::run builds its Forward the same way (engine.cpp): same spec, weights, plan and
    // chunk, so the logits and greedy picks match a `day0 run` of the same prompt.
    const auto make = [&]<typename T>() -> Result<void> {
        auto forward = std::make_unique<detail::Forward<T>>(
            engine.spec(), engine.weightTable(), plan, capacity);
        DAY0_TRY(forward->init());
        forward->setDeltaRuleChunk(deltaChunk);
        if constexpr (std::is_same_v<T, float>) {
            if (backend != nullptr) {
                forward->setBackend(backend);
            }
        }
        state->forward = std::move(forward);
        return success();
    };
    DAY0_TRY(
        engine.isF64() ? make.template operator()<double>() : make.template operator()<float>());
    return SequenceDecoder(std::move(state), capacity);
}

Result<std::vector<double>> SequenceDecoder::feed(
    std::span<const std::int64_t> ids, std::stop_token stop)
{
    if (ids.empty()) {
        return Error::badInput("no tokens to feed");
    }
    if (m_position + std::int64_t(ids.size()) > m_capacity) {
        return Error::badInput(fmt::format("{} more token(s) after {} overflow the sequence's "
                                           "capacity of {}",
            ids.size(), m_position, m_capacity));
    }
    const std::int64_t vocab = m_state->vocab;
    auto logits = std::visit(
        [&]<typename T>(
            std::unique_ptr<detail::Forward<T>>& forward) -> Result<std::vector<double>> {
            detail::NullTaps<T> taps;
            auto out = forward->step(ids, m_position, taps, stop);
            if (!out) {
                return out.error();
            }
            return std::vector<double>(out->end() - vocab, out->end());
        },
        m_state->forward);
    if (logits) {
        m_position += std::int64_t(ids.size());
    }
    return logits;
}

std::string SequenceDecoder::batchRefusal(const Engine& engine)
{
    return detail::batchDecodeRefusal(engine.spec());
}

Result<std::vector<std::vector<double>>> SequenceDecoder::feedBatch(
    std::span<SequenceDecoder* const> seqs, std::span<const std::int64_t> ids, std::stop_token stop)
{
    if (seqs.empty() || ids.size() != seqs.size()) {
        return Error::internal(
            fmt::format("batched feed: {} sequences for {} tokens", seqs.size(), ids.size()));
    }
    std::vector<std::span<const std::int64_t>> tokens;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        tokens.push_back(ids.subspan(i, 1));
    }
    return feedBatch(seqs, tokens, stop);
}

Result<std::vector<std::vector<double>>> SequenceDecoder::feedBatch(
    std::span<SequenceDecoder* const> seqs, std::span<const std::span<const std::int64_t>> tokens,
    std::stop_token stop)
{
    if (seqs.empty() || tokens.size() != seqs.size()) {
        return Error::internal(fmt::format(
            "batched feed: {} sequences for {} token lists", seqs.size(), tokens.size()));
    }
    const State& first = *seqs.front()->m_state;
    if (auto refused = batchRefusal(*first.engine); !refused.empty()) {
        return Error::unsupported("batched decode: " + refused);
    }
    std::vector<std::int64_t> starts;
    std::vector<std::int64_t> counts;
    std::vector<std::int64_t> ids;
    bool single = true; // one token each: a decode step
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        const auto* seq = seqs[i];
        const auto n = std::int64_t(tokens[i].size());
        if (n < 1) {
            return Error::badInput(fmt::format("batched feed: no tokens for sequence {}", i));
        }
        if (seq->m_state->backend != first.backend) {
            return Error::internal("batched feed: the sequences compute on different backends");
        }
        if (seq->m_state->engine != first.engine
            || seq->m_state->forward.index() != first.forward.index()) {
            return Error::internal("batched feed: the sequences run on different engines");
        }
        if (seq->m_position + n > seq->m_capacity) {
            return Error::badInput(fmt::format("{} more token(s) after {} overflow the sequence's "
                                               "capacity of {}",
                n, seq->m_position, seq->m_capacity));
        }
        starts.push_back(seq->m_position);
        counts.push_back(n);
        single = single && n == 1;
        ids.insert(ids.end(), tokens[i].begin(), tokens[i].end());
    }
    const std::int64_t vocab = first.vocab;
    auto rows = std::visit(
        [&]<typename T>(const std::unique_ptr<detail::Forward<T>>& /*lead*/)
            -> Result<std::vector<std::vector<double>>> {
            std::vector<detail::Forward<T>*> forwards;
            for (auto* seq : seqs) {
                forwards.push_back(
                    std::get<std::unique_ptr<detail::Forward<T>>>(seq->m_state->forward).get());
            }
            auto logits = detail::decodeBatch<T>(forwards, ids, starts, stop,
                single ? std::span<const std::int64_t>() : std::span<const std::int64_t>(counts));
            if (!logits) {
                return logits.error();
            }
            std::vector<std::vector<double>> out(seqs.size());
            std::int64_t row = 0;
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                row += counts[i];
                // The sequence's last token's row.
                const auto last = logits->begin() + std::ptrdiff_t((row - 1) * vocab);
                out[i].assign(last, last + vocab);
            }
            return out;
        },
        first.forward);
    if (rows) {
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            seqs[i]->m_position += counts[i];
        }
    }
    return rows;
}

std::int64_t greedyToken(std::span<const double> logits)
{
    return numerics::topKIndices(logits, 1).front();
}

double logSumExp(std::span<const double> logits)
{
    const double top = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const double l : logits) {
        sum += std::exp(l - top);
    }
    return top + std::log(sum);
}

} // namespace day0::exec
