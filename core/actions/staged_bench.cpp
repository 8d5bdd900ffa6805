// A staged serving bench (actions/staged_bench.h): the Serving panel's action.
#include "actions/staged_bench.h"

#include "exec/precision.h"
#include "serve/bench_check.h"
#include "serve/openai_server.h"
#include "serve/scheduler.h"
#include "serve/serve_bench.h"
#include "serve/served_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

namespace day0::actions {

std::string BenchStage::label() const
{
    std::string load;
    if (concurrency > 0) {
        load = fmt::format("concurrency={}", concurrency);
    }
    if (!std::isinf(rate)) {
        load += fmt::format("{}rate={:g}", load.empty() ? "" : " ", rate);
    }
    if (load.empty()) {
        load = "unlimited";
    }
    return fmt::format("{} {}→{} tok", load, inputTokens, outputTokens);
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

struct LocalServer::Impl {
    serve::LoadedModel loaded; ///< the tokenizer and chat template the server points into
    std::optional<serve::Scheduler> scheduler;
    std::optional<serve::OpenAiServer> server;
    std::thread http;
    std::string url;
};

LocalServer::LocalServer(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

LocalServer::~LocalServer()
{
    if (m_impl->server) {
        m_impl->server->refuseNew();
        if (m_impl->scheduler) {
            m_impl->scheduler->drain(std::chrono::seconds(30));
        }
        m_impl->server->stop();
    }
    if (m_impl->http.joinable()) {
        m_impl->http.join();
    }
}

const std::string& LocalServer::url() const { return m_impl->url; }

std::string LocalServer::decodePath() const { return m_impl->scheduler->decodePath(); }

Result<std::unique_ptr<LocalServer>> LocalServer::start(const std::string& checkpoint,
    const std::string& precision, int maxRequests, Progress& progress, std::stop_token stop)
{
    auto plan = exec::parsePrecisionPlan(precision);
    if (!plan) {
        return plan.error().withContext("precision");
    }
    progress.setStage("loading " + checkpoint);
    auto loaded = serve::loadServedModel(checkpoint, plan->isF64(), progress, stop);
    if (!loaded) {
        return loaded.error();
    }
    auto impl = std::make_unique<Impl>();
    impl->loaded = std::move(*loaded);
    serve::SchedulerOptions so;
    so.maxRunning = std::clamp(maxRequests, 1, 64);
    so.maxQueued = std::max(maxRequests, 1);
    so.plan = *plan;
    so.eosIds = impl->loaded.eosIds;
    impl->scheduler.emplace(std::move(*impl->loaded.engine), so);
    serve::ServedModel model;
    model.name = impl->loaded.name;
    model.vocabSize = impl->scheduler->spec().vocabSize;
    model.contextLimit = impl->scheduler->contextLimit();
    model.tokenizer = impl->loaded.tokenizer.get();
    model.chatTemplate = impl->loaded.chat ? &*impl->loaded.chat : nullptr;
    serve::ServerOptions o;
    o.port = 0; // a free loopback port
    o.chatRefusal = impl->loaded.chatRefusal;
    o.threads = std::size_t(so.maxRunning + so.maxQueued + 8);
    impl->server.emplace(*impl->scheduler, model, o);
    auto port = impl->server->bind();
    if (!port) {
        return port.error();
    }
    impl->url = fmt::format("http://{}:{}", o.host, *port);
    auto* server = &*impl->server;
    impl->http = std::thread([server] { server->serve(); });
    return std::unique_ptr<LocalServer>(new LocalServer(std::move(impl)));
}

Result<StagedBenchOutcome> runStagedBench(const StagedBenchRequest& request, Progress& progress,
    std::stop_token stop, const std::function<void(const BenchLevelOutcome&)>& onLevel)
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
    }
    serve::BenchOptions base;
    base.url = out.url;
    base.seed = request.seed;
    base.percentiles = request.percentiles;
    base.slos = request.slos;
    base.timeoutSeconds = request.timeoutSeconds;
    if (reference) {
        base.vocab = reference->vocabSize(); // prompts the reference can read
        base.logprobs = 0; // the chosen tokens' log-probabilities, compared where sent
    }
    for (std::size_t i = 0; i < request.stages.size(); ++i) {
        const auto& stage = request.stages[i];
        serve::BenchOptions level = base;
        level.maxConcurrency = stage.concurrency;
        level.arrivals.rate = stage.rate;
        level.lengths.inputTokens = stage.inputTokens;
        level.lengths.outputTokens = stage.outputTokens;
        level.numPrompts = stage.numPrompts;
        level.warmups = i == 0 ? request.warmups : 0; // the server is warm after the first
        progress.setDone(0);
        progress.setTotal(0);
        auto result = serve::runServeBench(level, progress, stop);
        if (!result) {
            return result.error().withContext(fmt::format("level {} ({})", i + 1, stage.label()));
        }
        BenchLevelOutcome outcome { stage.label(), std::move(*result), std::nullopt, std::nullopt };
        if (reference) {
            progress.setStage("checking against the reference");
            auto check = serve::checkLevel(
                *reference, outcome.result, request.logprobTolerance, progress, stop);
            if (!check) {
                return check.error();
            }
            outcome.check = std::move(*check);
        }
        if (onLevel) {
            onLevel(outcome);
        }
        out.levels.push_back(std::move(outcome));
    }
    out.record = benchRunRecord(out.levels, request.check ? request.checkpoint : std::string(), {});
    if (!request.checkpoint.empty()) {
        out.record.setProperty("checkpoint", request.checkpoint);
    }
    out.record.setProperty("served", request.url.empty() ? "in-process" : "external");
    return out;
}

} // namespace day0::actions
