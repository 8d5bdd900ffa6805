// The serving check (actions/serving_check.h): day0 serve in-process, or another endpoint, under
// a short staged load with bench serve --check's comparison against the reference engine.
#include "actions/serving_check.h"

#include "actions/staged_bench.h"
#include "serve/bench_check.h"

#include <fmt/format.h>

namespace day0::actions {

Result<ServingCheckOutcome> checkServing(
    const ServingCheckOptions& options, Progress& progress, std::stop_token stop)
{
    if (options.concurrency.empty() || options.requestsPerLevel < 1) {
        return Error::badInput("serving check: no load level or no request per level");
    }
    StagedBenchRequest request;
    for (const int c : options.concurrency) {
        if (c < 1) {
            return Error::badInput(fmt::format("serving check: concurrency {} is below 1", c));
        }
        BenchStage stage;
        stage.concurrency = c;
        stage.inputTokens = options.inputTokens;
        stage.outputTokens = options.outputTokens;
        stage.numPrompts = options.requestsPerLevel;
        request.stages.push_back(stage);
    }
    request.url = options.url;
    request.checkpoint = options.checkpoint.string();
    request.precision = options.precision;
    request.workload.seed = options.seed;
    request.workload.timeoutSeconds = options.timeoutSeconds;
    request.workload.warmups = 1;
    request.check = true;
    request.logprobTolerance = options.logprobTolerance;
    auto bench = runStagedBench(request, progress, stop);
    if (!bench) {
        return bench.error().withContext(
            options.url.empty() ? "serving check: day0 serve" : "serving check");
    }
    ServingCheckOutcome out;
    out.url = bench->url;
    out.inProcess = options.url.empty();
    out.decodePath = bench->decodePath;
    std::string failedList;
    std::string divergedList;
    int sent = 0;
    for (const auto& level : bench->levels) {
        const auto& result = level.result;
        for (const auto& q : result.requests) {
            if (!q.ok) {
                failedList += fmt::format(
                    "; {} request {}: {}: {}", level.label, q.index, q.errorKind, q.errorMessage);
            }
        }
        const auto& check = *level.check;
        if (!check.divergences.empty()) {
            divergedList += fmt::format("; {}: {} of {} diverge, first: {}", level.label,
                check.divergences.size(), check.checked,
                serve::describeDivergence(check.divergences.front()));
        }
        sent += int(result.requests.size());
        out.failedRequests += result.failed;
        out.divergedRequests += int(check.divergences.size());
    }
    out.levels = std::move(bench->levels);
    out.record = std::move(bench->record);
    if (out.failedRequests > 0) {
        out.failure
            = fmt::format("{} of {} requests failed{}", out.failedRequests, sent, failedList);
    }
    if (out.divergedRequests > 0) {
        out.failure += fmt::format("{}greedy tokens diverge from the reference engine's{}",
            out.failure.empty() ? "" : "; ", divergedList);
    }
    return out;
}

} // namespace day0::actions
