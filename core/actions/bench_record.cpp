// The run record of `day0 bench serve` (actions/bench_record.h).
#include "actions/bench_record.h"

#include <fmt/format.h>

#include <cmath>

namespace day0::actions {

history::RunRecord benchRunRecord(const std::vector<BenchLevelOutcome>& levels,
    const std::string& checkpoint, const std::string& plan)
{
    history::RunRecord r(history::RunKind::Run);
    r.setProperty("tool", "bench");
    if (levels.empty()) {
        return r;
    }
    const auto& o = levels.front().result.options;
    r.info.modelName = o.model;
    r.info.backend = o.url;
    r.info.plan = plan;
    r.setProperty("url", o.url);
    r.setProperty("num_prompts", std::to_string(o.numPrompts));
    r.setProperty("seed", std::to_string(o.seed));
    r.setProperty("lengths",
        !o.lengths.fromFile.empty()
            ? fmt::format("file ({} pairs)", o.lengths.fromFile.size())
            : fmt::format("input {} range {:g}, output {} range {:g}", o.lengths.inputTokens,
                o.lengths.inputRange, o.lengths.outputTokens, o.lengths.outputRange));
    if (o.slos.any()) {
        r.setProperty("goodput_slos", o.slos.describe());
    }
    if (!checkpoint.empty()) {
        r.setProperty("check_checkpoint", checkpoint);
    }
    double seconds = 0.0;
    int failed = 0;
    int sent = 0;
    std::size_t diverged = 0;
    for (std::size_t i = 0; i < levels.size(); ++i) {
        const auto& level = levels[i];
        const auto& res = level.result;
        const auto& a = res.options.arrivals;
        const std::string prefix = fmt::format("bench_l{}_", i + 1);
        r.setProperty(fmt::format("bench_l{}", i + 1),
            fmt::format("{}{}rate {} burstiness {:g}{}, concurrency {}", level.label,
                level.label.empty() ? "" : ": ",
                std::isinf(a.rate) ? std::string("inf") : fmt::format("{:g}", a.rate), a.burstiness,
                a.ramp != serve::RampUp::None ? fmt::format(
                    ", {} ramp {:g}->{:g}", serve::rampUpName(a.ramp), a.rampStart, a.rampEnd)
                                              : std::string(),
                res.options.maxConcurrency > 0 ? std::to_string(res.options.maxConcurrency)
                                               : std::string("unlimited")));
        seconds += res.durationSeconds;
        failed += res.failed;
        sent += int(res.requests.size());
        r.addMetric(prefix + "completed", res.completed);
        r.addMetric(prefix + "failed", res.failed);
        r.addMetric(prefix + "duration", res.durationSeconds, "s");
        r.addMetric(prefix + "request_throughput", res.requestThroughput, "req/s");
        r.addMetric(prefix + "output_throughput", res.outputThroughput, "tok/s");
        r.addMetric(prefix + "total_token_throughput", res.totalTokenThroughput, "tok/s");
        r.addMetric(prefix + "mean_tokens_per_s_per_user", res.perUser.mean, "tok/s");
        if (res.options.slos.any()) {
            r.addMetric(prefix + "request_goodput", res.goodput, "req/s");
        }
        for (const auto& [name, s] : res.metrics) {
            r.addMetric(prefix + "mean_" + name + "_ms", s.mean, "ms");
            r.addMetric(prefix + "median_" + name + "_ms", s.median, "ms");
            for (const auto& [p, v] : s.percentiles) {
                r.addMetric(prefix + fmt::format("p{:g}_{}_ms", p, name), v, "ms");
            }
        }
        for (const auto& [kind, n] : res.errorsByKind) {
            r.addMetric(prefix + "errors_" + kind, n);
        }
        if (level.check) {
            diverged += level.check->divergences.size();
            r.addMetric(prefix + "check_diverged", double(level.check->divergences.size()));
            r.addMetric(prefix + "check_max_logprob_delta", level.check->maxLogprobDelta, "nat");
        }
        if (level.plan) {
            r.addMetric(prefix + "predicted_ttft_ms", 1000 * level.plan->ttft, "ms");
            r.addMetric(prefix + "predicted_tpot_ms", 1000 * level.plan->tpot, "ms");
        }
    }
    r.info.duration = Seconds(seconds);
    r.info.status
        = failed > 0 || diverged > 0 ? history::RunStatus::Failed : history::RunStatus::Ok;
    r.info.message = fmt::format("{} level{}, {} of {} requests failed{}", levels.size(),
        levels.size() == 1 ? "" : "s", failed, sent,
        checkpoint.empty() ? std::string()
                           : fmt::format(", {} diverged from {}", diverged, checkpoint));
    return r;
}

} // namespace day0::actions
