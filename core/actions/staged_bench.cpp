// A staged serving bench (actions/staged_bench.h): the one stage loop of `day0 bench serve`,
// the Serving panel and validate's serving step.
#include "actions/staged_bench.h"

#include "serve/bench_check.h"
#include "serve/bench_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace day0::actions {

namespace {

std::string lengthText(std::int64_t tokens, double range)
{
    return range > 0 ? fmt::format("{}±{:g}%", tokens, 100 * range) : std::to_string(tokens);
}

/// The options of level `stage` of `request`, served at `url`.
serve::BenchOptions levelOptions(
    const StagedBenchRequest& request, const BenchStage& stage, const std::string& url)
{
    serve::BenchOptions level = request.workload;
    level.url = url;
    level.maxConcurrency = stage.concurrency;
    level.arrivals.rate = stage.rate;
    level.lengths.inputTokens = stage.inputTokens;
    level.lengths.outputTokens = stage.outputTokens;
    level.numPrompts = stage.numPrompts;
    return level;
}

/// The planner's prediction for one measured level: its mean lengths, and as batch the
/// concurrency cap or, without one, the mean requests in flight (Little's law: the sum of
/// latencies over the duration).
Result<serve::PlanPrediction> predictLevel(
    const StagedBenchRequest& request, const serve::BenchResult& r)
{
    serve::PlanQuery q;
    q.model = request.planModel.empty() ? request.checkpoint : request.planModel;
    q.plan = request.plan;
    q.cluster = request.cluster;
    if (r.completed > 0) {
        q.inputTokens = double(r.totalInput) / r.completed;
        q.outputTokens = double(r.totalOutput) / r.completed;
    }
    double busy = 0.0;
    for (const auto& req : r.requests) {
        busy += req.ok ? req.e2el : 0.0;
    }
    q.batch = r.options.maxConcurrency > 0
        ? r.options.maxConcurrency
        : std::max(1, int(std::lround(r.durationSeconds > 0 ? busy / r.durationSeconds : 1.0)));
    q.batch = std::min(q.batch, std::max(1, r.options.numPrompts));
    return serve::predictServing(q);
}

Result<void> checkRequest(const StagedBenchRequest& request)
{
    if (request.stages.empty()) {
        return Error::badInput("bench serve: no load level given");
    }
    if (request.url.empty() && request.checkpoint.empty()) {
        return Error::badInput("bench serve: neither an endpoint URL nor a checkpoint to serve");
    }
    if (request.check && request.checkpoint.empty()) {
        return Error::badInput("bench serve --check: no checkpoint to compare with");
    }
    if (request.plan.empty()) {
        return success();
    }
    if (request.planModel.empty() && request.checkpoint.empty()) {
        return Error::badInput(
            "--plan needs the served model: --plan-model MODEL (or --check CHECKPOINT)");
    }
    // A plan, cluster or model the planner refuses is refused before any request is sent.
    const auto& first = request.stages.front();
    serve::PlanQuery q { request.planModel.empty() ? request.checkpoint : request.planModel,
        request.plan, request.cluster, double(first.inputTokens), double(first.outputTokens), 1 };
    if (auto p = serve::predictServing(q); !p) {
        return p.error();
    }
    return success();
}

} // namespace

std::string levelLabel(const serve::BenchOptions& level)
{
    std::string load;
    if (level.maxConcurrency > 0) {
        load = fmt::format("concurrency={}", level.maxConcurrency);
    }
    const auto& a = level.arrivals;
    const auto add = [&load](const std::string& part) { load += (load.empty() ? "" : " ") + part; };
    if (a.ramp != serve::RampUp::None) {
        add(fmt::format(
            "{} ramp {:g}→{:g} req/s", serve::rampUpName(a.ramp), a.rampStart, a.rampEnd));
    } else if (!std::isinf(a.rate)) {
        add(fmt::format("rate={:g}", a.rate));
    }
    if (a.burstiness != 1.0 && (a.ramp != serve::RampUp::None || !std::isinf(a.rate))) {
        add(fmt::format("burstiness={:g}", a.burstiness));
    }
    if (load.empty()) {
        load = "unlimited";
    }
    const auto& l = level.lengths;
    if (!l.fromFile.empty()) {
        return load + " lengths from a file";
    }
    return fmt::format("{} {}→{} tok", load, lengthText(l.inputTokens, l.inputRange),
        lengthText(l.outputTokens, l.outputRange));
}

std::string BenchStage::label() const
{
    StagedBenchRequest plain;
    return levelLabel(levelOptions(plain, *this, {}));
}

std::vector<BenchStage> defaultBenchStages()
{
    std::vector<BenchStage> stages;
    for (const int c : { 1, 2, 4, 8 }) {
        BenchStage s;
        s.concurrency = c;
        s.inputTokens = 32;
        s.outputTokens = 16;
        s.numPrompts = std::max(8, 2 * c);
        stages.push_back(s);
    }
    return stages;
}

Result<StagedBenchOutcome> runStagedBench(const StagedBenchRequest& request, Progress& progress,
    std::stop_token stop, const std::function<void(const BenchLevelOutcome&)>& onLevel)
{
    DAY0_TRY(checkRequest(request));
    std::optional<serve::BenchReference> reference;
    if (request.check) {
        progress.setStage("loading the reference");
        auto opened
            = serve::BenchReference::open(request.checkpoint, request.precision, progress, stop);
        if (!opened) {
            return opened.error().withContext("--check");
        }
        reference.emplace(std::move(*opened));
    }
    std::unique_ptr<LocalServer> local;
    StagedBenchOutcome out;
    out.url = request.url;
    if (request.url.empty()) {
        int most = 1;
        for (const auto& s : request.stages) {
            most = std::max(most, s.numPrompts);
        }
        auto started
            = LocalServer::start(request.checkpoint, request.precision, most, progress, stop);
        if (!started) {
            return started.error();
        }
        local = std::move(*started);
        out.url = local->url();
        out.decodePath = local->decodePath();
    }
    for (std::size_t i = 0; i < request.stages.size(); ++i) {
        serve::BenchOptions level = levelOptions(request, request.stages[i], out.url);
        level.warmups = i == 0 ? request.workload.warmups : 0; // the server is warm after
        if (reference) {
            // Prompts the reference can read: its vocabulary unless the workload narrows it.
            if (level.vocab <= 0 || level.vocab > reference->vocabSize()) {
                level.vocab = reference->vocabSize();
            }
            level.logprobs = 0; // the chosen tokens' log-probabilities, compared where sent
        }
        const std::string label = levelLabel(level);
        progress.setDone(0);
        progress.setTotal(0);
        progress.setStage(fmt::format("level {} of {}: {}", i + 1, request.stages.size(), label));
        auto result = serve::runServeBench(level, progress, stop);
        if (!result) {
            return result.error().withContext(fmt::format("level {} ({})", i + 1, label));
        }
        BenchLevelOutcome outcome { label, std::move(*result), std::nullopt, std::nullopt };
        if (reference) {
            progress.setStage(fmt::format("checking level {} against the reference", i + 1));
            auto check = serve::checkLevel(
                *reference, outcome.result, request.logprobTolerance, progress, stop);
            if (!check) {
                return check.error();
            }
            outcome.check = std::move(*check);
        }
        if (!request.plan.empty()) {
            auto predicted = predictLevel(request, outcome.result);
            if (!predicted) {
                return predicted.error();
            }
            outcome.plan = std::move(*predicted);
        }
        if (onLevel) {
            onLevel(outcome);
        }
        out.levels.push_back(std::move(outcome));
    }
    out.record = benchRunRecord(
        out.levels, request.check ? request.checkpoint : std::string(), request.plan);
    if (!request.checkpoint.empty()) {
        out.record.setProperty("checkpoint", request.checkpoint);
    }
    out.record.setProperty("served", request.url.empty() ? "in-process" : "external");
    return out;
}

} // namespace day0::actions
