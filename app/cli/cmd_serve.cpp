// day0 serve <checkpoint>: an OpenAI-compatible HTTP server over the CPU reference engine, a
// plan's sharded ranks or a backend plugin (actions/local_server.h): completions and chat
// completions (the checkpoint's chat template), greedy or sampled, streamed or not, scheduled
// step by step; SIGTERM drains.
#include "actions/local_server.h"
#include "command.h"
#include "exec/precision.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "serve/scheduler.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace day0::cli {

namespace {

struct ServeArgs {
    ServeArgs()
    {
        options.port = 8000;
        options.drainSeconds = 60.0;
    }
    actions::LocalServerOptions options;
    bool noBatch = false;
    bool noBatchPrefill = false;
};

int runServe(const ServeArgs& a, const GlobalOptions& global)
{
    const auto& o = a.options;
    if (auto refused = refusePartial("serve", o.checkpoint, global)) {
        return *refused;
    }
    const auto stop = interruptToken(); // installs the SIGINT/SIGTERM handlers before the load
    if (auto plan = exec::parsePrecisionPlan(o.precision); !plan) {
        return reportError(plan.error().withContext("--precision"));
    }
    auto options = o;
    options.batchDecode = !a.noBatch;
    options.batchPrefill = !a.noBatchPrefill;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "load", !global.quiet);
    auto started = actions::LocalServer::start(options, progress, stop);
    bar.reset();
    if (!started) {
        return reportError(started.error());
    }
    auto& server = **started;
    if (global.json) {
        fmt::print("{}\n",
            nlohmann::json { { "url", server.url() }, { "port", server.port() },
                { "model", server.modelName() }, { "max_model_len", server.contextLimit() },
                { "decode", server.decodePath() },
                { "plan",
                    server.plan().empty() ? nlohmann::json() : nlohmann::json(server.plan()) },
                { "backend", server.backend() }, { "weight_bytes", server.weightBytes() } }
                .dump());
    } else {
        std::string where;
        if (!server.plan().empty()) {
            where = fmt::format("plan {} on in-process ranks, ", server.plan());
        }
        if (server.backend() != "cpu") {
            where += fmt::format("backend {}, ", server.backend());
        }
        fmt::print("day0 serve: '{}' on {} ({}precision {}, {} running at most, {} queued, "
                   "{} tokens per request, decode steps {}; SIGTERM drains and exits)\n",
            server.modelName(), server.url(), where, o.precision, o.maxRunning, o.maxQueued,
            server.contextLimit(), server.decodePath());
    }
    std::fflush(stdout);
    if (server.chatTemplateUnusable()) {
        printWarning("/v1/chat/completions is refused: " + server.chatRefusal());
    }
    while (!stop.stop_requested() && !server.ended()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (server.ended()) {
        printWarning(fmt::format("the HTTP server on {} stopped by itself", server.url()));
        return 1;
    }
    // SIGTERM / Ctrl-C: refuse new requests, let the admitted ones finish, then close.
    const auto metrics = server.metrics();
    fmt::print(
        stderr, "day0 serve: draining ({} waiting, {} running)\n", metrics.queued, metrics.running);
    const auto timeout = std::chrono::milliseconds(std::int64_t(o.drainSeconds * 1000));
    int code = 0;
    if (!server.drain(timeout)) {
        printWarning(fmt::format("requests still running after --drain-timeout {} s; they "
                                 "are cut off",
            o.drainSeconds));
        code = 1;
    }
    // Handlers still writing their last events finish before the server stops.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    started->reset();
    return code;
}

const bool registered = registerCommand({ "serve",
    "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, SSE streaming, "
    "/metrics) over the CPU reference engine: greedy or seeded sampling, stop strings, the "
    "checkpoint's chat template, step-level scheduling",
    55, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<ServeArgs>();
        app.add_option("checkpoint", a->options.checkpoint,
               "checkpoint folder (config.json + *.safetensors)")
            ->required();
        app.add_option(
            "--host", a->options.host, "address to listen on (default 127.0.0.1: loopback)");
        app.add_option(
               "--port", a->options.port, "port (default 8000; 0 picks a free one and prints it)")
            ->check(CLI::Range(0, 65535));
        app.add_option("--served-model-name", a->options.servedName,
            "the model id clients send (default: the checkpoint's folder name)");
        app.add_option("--precision", a->options.precision,
            "fp64, fp32 (default) or an emulated precision, as day0 run --precision");
        app.add_option("--max-running", a->options.maxRunning,
               "sequences advanced together, one step each per iteration (default 8)")
            ->check(CLI::Range(1, 4096));
        app.add_option("--max-queue", a->options.maxQueued,
               "requests waiting beyond those; more get HTTP 429 (default 64)")
            ->check(CLI::Range(0, 100000));
        app.add_option("--kv-tokens", a->options.kvTokens,
               "KV-cache tokens the running requests may reserve together, prompt + max_tokens "
               "each (default: --max-running x the model's context)")
            ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
        app.add_option("--delta-chunk", a->options.deltaChunk,
               "Gated DeltaNet prefill chunk, as day0 run --delta-chunk (default 64)")
            ->check(CLI::Range(1, 1048576));
        app.add_option("--plan", a->options.plan,
            "serve on the plan's sharded ranks in this process, e.g. tp=2 or tp=2,pp=2,ep=2 (the "
            "forward and layout rules of day0 run --plan; fp32; one replica; decode steps and "
            "prefills batched over the ranks as on one rank, except for recurrent and sparse "
            "mixers)");
        app.add_option("--backend", a->options.backend,
            "compute on a backend plugin, as day0 run --backend (e.g. cuda; default cpu: the "
            "reference); fp32 or lower; with --plan, each rank on an instance of its own");
        app.add_option("--device", a->options.device, "the backend's device index (default 0)")
            ->check(CLI::Range(0, 1024));
        app.add_flag("--no-batch", a->noBatch,
            "run the running sequences' decode steps and prefills one after another rather than "
            "as one batched forward (batched where the model allows it: dense softmax-attention "
            "models, Qwen3-MoE, Mixtral, DeepSeek-V3, Qwen3-Next, Nemotron-H)");
        app.add_flag("--no-batch-prefill", a->noBatchPrefill,
            "prefill the prompts admitted at the same step one per forward rather than together "
            "(decode steps stay batched)");
        app.add_option("--drain-timeout", a->options.drainSeconds,
               "seconds SIGTERM waits for admitted requests before closing (default 60)")
            ->check(CLI::Range(0.0, 86400.0));
        return [a, &global] { return runServe(*a, global); };
    } });

} // namespace

} // namespace day0::cli
