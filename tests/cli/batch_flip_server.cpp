// A deliberately batch-dependent /v1/completions endpoint for `day0 bench serve --check` tests:
// greedy tokens from the reference engine's SequenceDecoder (so they equal `day0 run`'s) while at
// most --flip-above requests are in flight, and the greedy token + 1 (mod vocab) at every step
// taken while more are. Streams SSE with token_ids and the chosen tokens' logprobs, as day0 serve.
// Usage: day0_batch_flip_server CHECKPOINT --flip-above N [--step-ms MS]; prints its URL.
#include "exec/precision.h"
#include "exec/sequence_decoder.h"
#include "serve/served_model.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

using nlohmann::json;

namespace {

std::string error(const std::string& message)
{
    return json {
        { "error",
            { { "message", message }, { "type", "invalid_request_error" }, { "param", nullptr },
                { "code", nullptr } } }
    }.dump();
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 4 || std::string(argv[2]) != "--flip-above") {
        std::fprintf(stderr,
            "usage: %s CHECKPOINT --flip-above N [--step-ms MS] [--text-only] [--bad-event]\n",
            argv[0]);
        return 2;
    }
    const int flipAbove = std::stoi(argv[3]);
    int stepMs = 0;
    bool textOnly = false; // no token_ids: what --check must refuse
    bool badEvent = false; // one event that is not JSON: a malformed stream
    for (int i = 4; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--step-ms" && i + 1 < argc) {
            stepMs = std::stoi(argv[++i]);
        } else if (arg == "--text-only") {
            textOnly = true;
        } else if (arg == "--bad-event") {
            badEvent = true;
        } else {
            std::fprintf(stderr, "unknown argument '%s'\n", arg.c_str());
            return 2;
        }
    }
    day0::Progress progress;
    auto loaded = day0::serve::loadServedModel(argv[1], false, progress, {});
    if (!loaded) {
        std::fprintf(stderr, "%s\n", loaded.error().message.c_str());
        return 2;
    }
    const auto& engine = *loaded->engine;
    const auto plan = *day0::exec::parsePrecisionPlan("fp32");
    const std::int64_t vocab = engine.spec().vocabSize;
    std::mutex engineMutex; // decoders share the engine's weights; one steps at a time
    std::atomic<int> inFlight { 0 };
    httplib::Server server;
    server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
        res.set_content(json { { "object", "list" },
                            { "data", { { { "id", "flip" }, { "vocab_size", vocab } } } } }
                            .dump(),
            "application/json");
    });
    server.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
        ++inFlight;
        const auto body = json::parse(req.body, nullptr, false);
        if (body.is_discarded() || !body.contains("prompt") || !body["prompt"].is_array()) {
            --inFlight;
            res.status = 400;
            res.set_content(error("prompt must be token ids"), "application/json");
            return;
        }
        const auto prompt = body["prompt"].get<std::vector<std::int64_t>>();
        const auto maxTokens = body.value("max_tokens", std::int64_t(16));
        auto decoder = day0::exec::SequenceDecoder::open(
            engine, plan, std::int64_t(prompt.size()) + maxTokens - 1);
        std::string sse;
        std::int64_t last = 0;
        for (std::int64_t i = 0; i < maxTokens && decoder; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));
            std::vector<double> logits;
            {
                const std::lock_guard lock(engineMutex);
                const std::int64_t one[] = { last };
                auto fed = i == 0 ? decoder->feed(prompt, {}) : decoder->feed(one, {});
                if (!fed) {
                    break;
                }
                logits = std::move(*fed);
            }
            std::int64_t token = day0::exec::greedyToken(logits);
            if (inFlight.load() > flipAbove) {
                token = (token + 1) % vocab; // the batch-dependent bug under test
            }
            last = token;
            if (badEvent && i == 1) {
                sse += "data: {not json\n\n";
            }
            json chunk = { { "object", "text_completion" },
                { "choices",
                    { { { "index", 0 }, { "text", " " }, { "token_ids", { token } },
                        { "logprobs",
                            { { "token_logprobs",
                                { logits[std::size_t(token)]
                                    - day0::exec::logSumExp(logits) } } } },
                        { "finish_reason", i + 1 == maxTokens ? json("length") : json() } } } } };
            if (textOnly) {
                chunk["choices"][0].erase("token_ids");
            }
            sse += "data: " + chunk.dump() + "\n\n";
        }
        const json usage = { { "choices", json::array() },
            { "usage",
                { { "prompt_tokens", prompt.size() }, { "completion_tokens", maxTokens },
                    { "total_tokens", std::int64_t(prompt.size()) + maxTokens } } } };
        sse += "data: " + usage.dump() + "\n\ndata: [DONE]\n\n";
        --inFlight;
        res.set_content(sse, "text/event-stream");
    });
    const int port = server.bind_to_any_port("127.0.0.1");
    if (port <= 0) {
        std::fprintf(stderr, "cannot bind a loopback port\n");
        return 3;
    }
    std::printf("http://127.0.0.1:%d\n", port);
    std::fflush(stdout);
    server.listen_after_bind();
    return 0;
}
