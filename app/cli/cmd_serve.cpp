// day0 serve <checkpoint>: an OpenAI-compatible HTTP server over the CPU reference engine
// (core/serve): completions and chat completions (the checkpoint's chat template), greedy or
// sampled, streamed or not, scheduled step by step; SIGTERM drains.
#include "command.h"
#include "exec/precision.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "serve/openai_server.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace day0::cli {

namespace {

struct ServeArgs {
    std::string checkpoint;
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string servedName;
    std::string precision = "fp32";
    int maxRunning = 8;
    int maxQueued = 64;
    std::int64_t kvTokens = 0;
    std::int64_t deltaChunk = 64;
    double drainSeconds = 60.0;
    bool noBatch = false;
};

int runServe(const ServeArgs& a, const GlobalOptions& global)
{
    if (auto refused = refusePartial("serve", a.checkpoint, global)) {
        return *refused;
    }
    const auto stop = interruptToken(); // installs the SIGINT/SIGTERM handlers before the load
    auto plan = exec::parsePrecisionPlan(a.precision);
    if (!plan) {
        return reportError(plan.error().withContext("--precision"));
    }
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "load", !global.quiet);
    auto loaded = serve::loadServedModel(a.checkpoint, plan->isF64(), progress, stop);
    bar.reset();
    if (!loaded) {
        return reportError(loaded.error());
    }
    serve::SchedulerOptions so;
    so.maxRunning = a.maxRunning;
    so.maxQueued = a.maxQueued;
    so.kvTokenBudget = a.kvTokens;
    so.plan = *plan;
    so.deltaChunk = a.deltaChunk;
    so.eosIds = loaded->eosIds;
    so.batchDecode = !a.noBatch;
    serve::Scheduler scheduler(std::move(*loaded->engine), so);
    serve::ServedModel model;
    model.name = a.servedName.empty() ? loaded->name : a.servedName;
    model.vocabSize = scheduler.spec().vocabSize;
    model.contextLimit = scheduler.contextLimit();
    model.tokenizer = loaded->tokenizer.get();
    model.chatTemplate = loaded->chat ? &*loaded->chat : nullptr;
    serve::ServerOptions o;
    o.host = a.host;
    o.port = a.port;
    o.chatRefusal = loaded->chatRefusal;
    o.threads = std::size_t(a.maxRunning + a.maxQueued + 8);
    serve::OpenAiServer server(scheduler, model, o);
    auto port = server.bind();
    if (!port) {
        return reportError(port.error());
    }
    const std::string url = fmt::format("http://{}:{}", a.host, *port);
    if (global.json) {
        fmt::print("{}\n",
            nlohmann::json { { "url", url }, { "port", *port }, { "model", model.name },
                { "max_model_len", model.contextLimit }, { "decode", scheduler.decodePath() } }
                .dump());
    } else {
        fmt::print("day0 serve: '{}' on {} (precision {}, {} running at most, {} queued, "
                   "{} tokens per request, decode steps {}; SIGTERM drains and exits)\n",
            model.name, url, a.precision, a.maxRunning, a.maxQueued, model.contextLimit,
            scheduler.decodePath());
    }
    std::fflush(stdout);
    if (loaded->chatTemplateUnusable) {
        printWarning("/v1/chat/completions is refused: " + o.chatRefusal);
    }
    std::atomic<bool> ended { false };
    std::thread http([&] {
        server.serve();
        ended = true;
    });
    while (!stop.stop_requested() && !ended) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int code = 0;
    if (!ended) {
        // SIGTERM / Ctrl-C: refuse new requests, let the admitted ones finish, then close.
        server.refuseNew();
        fmt::print(stderr, "day0 serve: draining ({} waiting, {} running)\n",
            scheduler.metrics().queued, scheduler.metrics().running);
        const auto timeout = std::chrono::milliseconds(std::int64_t(a.drainSeconds * 1000));
        if (!scheduler.drain(timeout)) {
            printWarning(fmt::format("requests still running after --drain-timeout {} s; they "
                                     "are cut off",
                a.drainSeconds));
            code = 1;
        }
        // Handlers still writing their last events finish before stop() returns.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    } else {
        printWarning(fmt::format("the HTTP server on {} stopped by itself", url));
        code = 1;
    }
    server.stop();
    http.join();
    return code;
}

const bool registered = registerCommand({ "serve",
    "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, SSE streaming, "
    "/metrics) over the CPU reference engine: greedy or seeded sampling, stop strings, the "
    "checkpoint's chat template, step-level scheduling",
    55, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<ServeArgs>();
        app.add_option(
               "checkpoint", a->checkpoint, "checkpoint folder (config.json + *.safetensors)")
            ->required();
        app.add_option("--host", a->host, "address to listen on (default 127.0.0.1: loopback)");
        app.add_option("--port", a->port, "port (default 8000; 0 picks a free one and prints it)")
            ->check(CLI::Range(0, 65535));
        app.add_option("--served-model-name", a->servedName,
            "the model id clients send (default: the checkpoint's folder name)");
        app.add_option("--precision", a->precision,
            "fp64, fp32 (default) or an emulated precision, as day0 run --precision");
        app.add_option("--max-running", a->maxRunning,
               "sequences advanced together, one step each per iteration (default 8)")
            ->check(CLI::Range(1, 4096));
        app.add_option("--max-queue", a->maxQueued,
               "requests waiting beyond those; more get HTTP 429 (default 64)")
            ->check(CLI::Range(0, 100000));
        app.add_option("--kv-tokens", a->kvTokens,
               "KV-cache tokens the running requests may reserve together, prompt + max_tokens "
               "each (default: --max-running x the model's context)")
            ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
        app.add_option("--delta-chunk", a->deltaChunk,
               "Gated DeltaNet prefill chunk, as day0 run --delta-chunk (default 64)")
            ->check(CLI::Range(1, 1048576));
        app.add_flag("--no-batch", a->noBatch,
            "run the running sequences' decode steps one after another rather than as one "
            "batched forward (batched where the model allows it: dense softmax-attention models)");
        app.add_option("--drain-timeout", a->drainSeconds,
               "seconds SIGTERM waits for admitted requests before closing (default 60)")
            ->check(CLI::Range(0.0, 86400.0));
        return [a, &global] { return runServe(*a, global); };
    } });

} // namespace

} // namespace day0::cli
