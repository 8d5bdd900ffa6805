// The optional serving step of `day0 validate`: day0 serve under a short staged load, its greedy
// tokens checked against the reference engine's (actions/serving_check.h).
#include "actions/serving_check.h"
#include "pipeline/validation_state.h"

#include <fmt/format.h>

namespace day0::pipeline::detail {

Step servingStep(ValidationState& s)
{
    return { kServingStepId, "Serving under load", { "smoke" },
        [&s](StepContext& ctx) -> Result<StepReport> {
            StepReport& report = *ctx.partial;
            if (s.options.stream) {
                report.skipped = true;
                // A streamed layer is released once it has run; a server cannot release one:
                // continuous batching runs any layer for some request at any moment.
                report.summary = "not streamed: day0 serve keeps every weight resident for as "
                                 "long as it serves (its batches run every layer for some request "
                                 "at any moment, so no layer can be released after it runs), and "
                                 "its answers are checked against a reference engine that holds "
                                 "the whole model (validate without --stream to run it)";
                return report;
            }
            actions::ServingCheckOptions o;
            o.checkpoint = s.runnable;
            o.url = s.options.serveUrl;
            o.concurrency = s.options.serveConcurrency;
            o.requestsPerLevel = s.options.serveRequests;
            o.outputTokens = s.options.tokens;
            o.inputTokens = std::max<std::int64_t>(std::int64_t(s.promptIds.size()), 1);
            o.seed = s.options.seed;
            ctx.log(o.url.empty() ? std::string("starting day0 serve in-process (fp32, loopback)")
                                  : fmt::format("driving {}", o.url));
            auto checked = actions::checkServing(o, ctx.progress, ctx.stop);
            if (!checked) {
                return checked.error();
            }
            for (const auto& level : checked->levels) {
                const auto& r = level.result;
                const std::string prefix = fmt::format("c{}_", r.options.maxConcurrency);
                report.metrics[prefix + "completed"] = r.completed;
                report.metrics[prefix + "failed"] = r.failed;
                report.metrics[prefix + "diverged"] = double(level.check->divergences.size());
                report.metrics[prefix + "output_tokens_per_s"] = r.outputThroughput;
                report.metrics[prefix + "mean_ttft_ms"] = r.metrics.at("ttft").mean;
                report.metrics[prefix + "mean_tpot_ms"] = r.metrics.at("tpot").mean;
                report.details.push_back(fmt::format("{}: {} of {} completed, {} diverge, {:.1f} "
                                                     "output tokens/s, mean TTFT {:.2f} ms",
                    level.label, r.completed, r.requests.size(), level.check->divergences.size(),
                    r.outputThroughput, r.metrics.at("ttft").mean));
            }
            s.servingBench = checked->record;
            report.metrics["failed_requests"] = checked->failedRequests;
            report.metrics["diverged_requests"] = checked->divergedRequests;
            if (!checked->failure.empty()) {
                return Error::checkFailed(
                    fmt::format("serving under load on {}: {}", checked->url, checked->failure));
            }
            std::string levels;
            for (const auto& level : checked->levels) {
                levels += (levels.empty() ? "" : ", ") + level.label;
            }
            report.summary = fmt::format("{} on {}: {} requests per level ({}), every answer's "
                                         "greedy tokens equal the reference engine's",
                checked->inProcess
                    ? fmt::format("day0 serve in-process (decode steps {})", checked->decodePath)
                    : std::string("the endpoint"),
                checked->url, o.requestsPerLevel, levels);
            return report;
        } };
}

} // namespace day0::pipeline::detail
