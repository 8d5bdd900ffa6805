// The serving check (actions/serving_check.h): day0 serve in-process, or another endpoint, under
// a short staged load with bench serve --check's comparison against the reference engine.
#include "actions/serving_check.h"

#include "actions/staged_bench.h"
#include "serve/bench_check.h"
#include "serve/serve_bench.h"

#include <fmt/format.h>

#include <limits>
#include <memory>
#include <optional>

namespace day0::actions {

Result<ServingCheckOutcome> checkServing(
    const ServingCheckOptions& options, Progress& progress, std::stop_token stop)
{
    if (options.concurrency.empty() || options.requestsPerLevel < 1) {
        return Error::badInput("serving check: no load level or no request per level");
    }
    for (const int c : options.concurrency) {
        if (c < 1) {
            return Error::badInput(fmt::format("serving check: concurrency {} is below 1", c));
        }
    }
    progress.setTotal(std::int64_t(options.concurrency.size()) + 1);
    Progress loading;
    auto reference
        = serve::BenchReference::open(options.checkpoint, options.precision, loading, stop);
    if (!reference) {
        return reference.error().withContext("serving check reference");
    }
    ServingCheckOutcome out;
    std::unique_ptr<LocalServer> local;
    out.url = options.url;
    if (options.url.empty()) {
        int maxRunning = 1;
        for (const int c : options.concurrency) {
            maxRunning = std::max(maxRunning, c);
        }
        auto started = LocalServer::start(
            options.checkpoint.string(), options.precision, maxRunning, loading, stop);
        if (!started) {
            return started.error().withContext("serving check: day0 serve");
        }
        local = std::move(*started);
        out.url = local->url();
        out.inProcess = true;
        out.decodePath = local->decodePath();
    }
    progress.advance(1);
    serve::BenchOptions base;
    base.url = out.url;
    base.lengths.inputTokens = options.inputTokens;
    base.lengths.outputTokens = options.outputTokens;
    base.numPrompts = options.requestsPerLevel;
    base.seed = options.seed;
    base.timeoutSeconds = options.timeoutSeconds;
    base.vocab = reference->vocabSize();
    base.logprobs = 0; // the chosen tokens' log-probabilities, compared where sent
    DAY0_TRY(serve::discoverEndpoint(base));
    std::string failedList;
    std::string divergedList;
    int sent = 0;
    for (std::size_t i = 0; i < options.concurrency.size(); ++i) {
        serve::BenchOptions level = base;
        level.maxConcurrency = options.concurrency[i];
        level.arrivals.rate = std::numeric_limits<double>::infinity();
        level.warmups = i == 0 ? 1 : 0;
        Progress requests;
        auto result = serve::runServeBench(level, requests, stop);
        if (!result) {
            return result.error();
        }
        Progress checking;
        auto check
            = serve::checkLevel(*reference, *result, options.logprobTolerance, checking, stop);
        if (!check) {
            return check.error();
        }
        const std::string label = fmt::format("concurrency={}", options.concurrency[i]);
        for (const auto& q : result->requests) {
            if (!q.ok) {
                failedList += fmt::format(
                    "; {} request {}: {}: {}", label, q.index, q.errorKind, q.errorMessage);
            }
        }
        if (!check->divergences.empty()) {
            divergedList += fmt::format("; {}: {} of {} diverge, first: {}", label,
                check->divergences.size(), check->checked,
                serve::describeDivergence(check->divergences.front()));
        }
        sent += int(result->requests.size());
        out.failedRequests += result->failed;
        out.divergedRequests += int(check->divergences.size());
        out.levels.push_back({ label, std::move(*result), std::move(*check), std::nullopt });
        progress.advance(1);
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
    }
    if (out.failedRequests > 0) {
        out.failure
            = fmt::format("{} of {} requests failed{}", out.failedRequests, sent, failedList);
    }
    if (out.divergedRequests > 0) {
        out.failure += fmt::format("{}greedy tokens diverge from the reference engine's{}",
            out.failure.empty() ? "" : "; ", divergedList);
    }
    out.record = benchRunRecord(out.levels, options.checkpoint.string(), {});
    return out;
}

} // namespace day0::actions
