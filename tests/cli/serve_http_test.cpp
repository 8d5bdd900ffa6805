// day0 serve and day0 bench serve (issue #23): a server on a shrunk model on loopback (port 0),
// bounded in time; its greedy tokens equal day0 run's, streamed or not; bad requests get an
// OpenAI-style 4xx and the server keeps serving; a full queue answers 429; a client leaving
// mid-stream frees its slot; SIGTERM drains; the bench reports 0 errors against it and names
// the failed requests when the server is killed under it.
#include "serve_harness.h"

#include <fmt/format.h>

#include <atomic>
#include <sstream>

using namespace day0::test;

TEST(ServeCli, GreedyTokensEqualRunStreamedOrNot)
{
    const fs::path dir = scratchDir("serve_greedy");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const auto expected = runGreedy(kTiny, "1,2,3,4,5", 7);
    ASSERT_EQ(expected.size(), 7U);

    auto plain = post(server, "/v1/completions",
        R"({"model":"tiny-llama","prompt":[1,2,3,4,5],"max_tokens":7,"temperature":0,"ignore_eos":true})");
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const auto j = json::parse(plain->body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<std::int64_t>>(), expected);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(j["usage"]["completion_tokens"], 7);

    auto streamed = post(server, "/v1/completions",
        R"({"model":"tiny-llama","prompt":[1,2,3,4,5],"max_tokens":7,"stream":true,"logprobs":3,
            "temperature":0,"ignore_eos":true,"stream_options":{"include_usage":true}})");
    ASSERT_TRUE(streamed);
    ASSERT_EQ(streamed->status, 200) << streamed->body;
    EXPECT_NE(
        streamed->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    const auto events = sseEvents(streamed->body);
    ASSERT_GE(events.size(), 3U) << streamed->body;
    EXPECT_EQ(events.back(), "[DONE]");
    std::vector<std::int64_t> tokens;
    json usage;
    std::string finish;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const auto e = json::parse(events[i]);
        if (e.contains("usage")) {
            usage = e["usage"];
            EXPECT_TRUE(e["choices"].empty());
            continue;
        }
        const auto& c = e["choices"][0];
        if (!c["finish_reason"].is_null()) {
            finish = c["finish_reason"].get<std::string>();
        }
        // The end may come in a chunk of its own, without a token (and so without logprobs).
        const auto ids = c.value("token_ids", json::array());
        if (ids.empty()) {
            continue;
        }
        for (const auto& t : ids) {
            tokens.push_back(t.get<std::int64_t>());
        }
        // The chosen (greedy) token is the likeliest: its log-probability tops the top 3.
        const auto& lp = c["logprobs"];
        ASSERT_EQ(lp["token_logprobs"].size(), 1U);
        const double chosen = lp["token_logprobs"][0].get<double>();
        EXPECT_LE(chosen, 0.0);
        ASSERT_EQ(lp["top_logprobs"][0].size(), 3U);
        for (const auto& [text, value] : lp["top_logprobs"][0].items()) {
            EXPECT_LE(value.get<double>(), chosen + 1e-12) << text;
        }
    }
    EXPECT_EQ(tokens, expected);
    EXPECT_EQ(finish, "length");
    ASSERT_TRUE(usage.is_object()) << streamed->body;
    EXPECT_EQ(usage["completion_tokens"], 7);
    EXPECT_EQ(usage["total_tokens"], 12);

    // Requests running together leave each one's tokens as day0 run's.
    const auto other = runGreedy(kTiny, "9,8,7", 5);
    std::vector<std::thread> clients;
    std::vector<std::vector<std::int64_t>> got(6);
    for (int i = 0; i < 6; ++i) {
        clients.emplace_back([&, i] {
            const bool first = i % 2 == 0;
            auto r = post(server, "/v1/completions",
                fmt::format(
                    R"({{"model":"tiny-llama","prompt":[{}],"max_tokens":{},"temperature":0,"ignore_eos":true}})",
                    first ? "1,2,3,4,5" : "9,8,7", first ? 7 : 5));
            if (r && r->status == 200) {
                got[std::size_t(i)] = json::parse(r->body)["choices"][0]["token_ids"]
                                          .get<std::vector<std::int64_t>>();
            }
        });
    }
    for (auto& t : clients) {
        t.join();
    }
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(got[std::size_t(i)], i % 2 == 0 ? expected : other) << "request " << i;
    }
    const auto m = metricsOf(server);
    EXPECT_EQ(m.value("day0_generation_tokens_total", 0.0), 7 + 7 + 3 * 7 + 3 * 5);
    EXPECT_EQ(m.value("day0_time_to_first_token_seconds_count", 0.0), 8);
}

TEST(ServeCli, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing)
{
    const fs::path dir = scratchDir("serve_bad");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    struct Case {
        std::string body;
        int status;
        std::string param; ///< "" for null
    };
    const std::vector<Case> cases = {
        { "{not json", 400, "" },
        { "[1,2]", 400, "" },
        { R"({"model":"gpt-4","prompt":[1]})", 404, "model" },
        { R"({"prompt":[1]})", 400, "model" },
        { R"({"model":"tiny-llama"})", 400, "prompt" },
        { R"({"model":"tiny-llama","prompt":42})", 400, "prompt" },
        { R"({"model":"tiny-llama","prompt":[1,"x"]})", 400, "prompt" },
        { R"({"model":"tiny-llama","prompt":[1,256]})", 400, "prompt" },
        { R"({"model":"tiny-llama","prompt":[]})", 400, "prompt" },
        { R"({"model":"tiny-llama","prompt":"hello"})", 400, "prompt" }, // no tokenizer
        { R"({"model":"tiny-llama","prompt":[1],"max_tokens":-1})", 400, "max_tokens" },
        { R"({"model":"tiny-llama","prompt":[1],"max_tokens":0})", 400, "max_tokens" },
        { R"({"model":"tiny-llama","prompt":[1],"max_tokens":1000000000})", 400, "max_tokens" },
        { R"({"model":"tiny-llama","prompt":[1],"max_tokens":"8"})", 400, "max_tokens" },
        { R"({"model":"tiny-llama","prompt":[1],"max_tokens":2.5})", 400, "max_tokens" },
        { R"({"model":"tiny-llama","prompt":[1],"stream":"yes"})", 400, "stream" },
        { R"({"model":"tiny-llama","prompt":[1],"temperature":2.5})", 400, "temperature" },
        { R"({"model":"tiny-llama","prompt":[1],"top_p":0})", 400, "top_p" },
        { R"({"model":"tiny-llama","prompt":[1],"top_k":-2})", 400, "top_k" },
        { R"({"model":"tiny-llama","prompt":[1],"seed":"x"})", 400, "seed" },
        { R"({"model":"tiny-llama","prompt":[1],"stop":"x"})", 400, "stop" }, // no tokenizer
        { R"({"model":"tiny-llama","prompt":[1],"stop_token_ids":[256]})", 400, "stop_token_ids" },
        { R"({"model":"tiny-llama","prompt":[1],"n":0})", 400, "n" },
        { R"({"model":"tiny-llama","prompt":[1],"logprobs":99})", 400, "logprobs" },
        { R"({"model":"tiny-llama","prompt":[1],"frobnicate":true})", 400, "frobnicate" },
        { R"({"model":"tiny-llama","prompt":[1],"stream_options":{"include_usage":true}})", 400,
            "stream_options" },
    };
    std::string longPrompt = "[";
    for (int i = 0; i < 600; ++i) {
        longPrompt += (i ? "," : "") + std::to_string(i % 200);
    }
    longPrompt += "]";
    auto all = cases;
    all.push_back({ R"({"model":"tiny-llama","prompt":)" + longPrompt + "}", 400, "prompt" });
    for (const auto& c : all) {
        auto r = post(server, "/v1/completions", c.body);
        ASSERT_TRUE(r) << c.body;
        EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
        const auto j = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
        const auto& e = j["error"];
        EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
        EXPECT_TRUE(e["type"].is_string());
        EXPECT_TRUE(e.contains("code"));
        if (c.param.empty()) {
            EXPECT_TRUE(e["param"].is_null()) << r->body;
        } else {
            EXPECT_EQ(e["param"], c.param) << r->body;
        }
    }
    auto chat = post(server, "/v1/chat/completions",
        R"({"model":"tiny-llama","messages":[{"role":"user","content":"hi"}]})");
    ASSERT_TRUE(chat);
    EXPECT_EQ(chat->status, 400);
    EXPECT_NE(chat->body.find("no chat template"), std::string::npos) << chat->body;
    auto missing = server.client().Get("/v1/nothing");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_TRUE(json::parse(missing->body).contains("error"));
    // Still serving, and right.
    auto ok = post(server, "/v1/completions",
        R"({"model":"tiny-llama","prompt":[1,2,3,4,5],"max_tokens":7,"temperature":0,"ignore_eos":true})");
    ASSERT_TRUE(ok);
    ASSERT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(json::parse(ok->body)["choices"][0]["token_ids"].get<std::vector<std::int64_t>>(),
        runGreedy(kTiny, "1,2,3,4,5", 7));
    auto health = server.client().Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    auto models = server.client().Get("/v1/models");
    ASSERT_TRUE(models);
    const auto list = json::parse(models->body);
    EXPECT_EQ(list["data"][0]["id"], "tiny-llama");
    EXPECT_EQ(list["data"][0]["vocab_size"], 256);
    EXPECT_EQ(list["data"][0]["max_model_len"], 512);
}

TEST(ServeCli, BenchReportsNoErrorsAgainstDay0Serve)
{
    const fs::path dir = scratchDir("serve_bench");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const auto r = runDay0({ "bench", "serve", server.url, "--num-prompts", "12", "--input-len",
        "6", "--output-len", "5", "--max-concurrency", "4", "--request-rate", "200", "--seed", "3",
        "--percentiles", "50,99", "--json", "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["completed"], 12);
    EXPECT_EQ(j["failed"], 0);
    EXPECT_EQ(j["total_input_tokens"], 12 * 6);
    EXPECT_EQ(j["total_output_tokens"], 12 * 5);
    EXPECT_GT(j["mean_ttft_ms"].get<double>(), 0.0);
    EXPECT_GT(j["mean_tpot_ms"].get<double>(), 0.0);
    EXPECT_GE(j["p99_ttft_ms"].get<double>(), j["p50_ttft_ms"].get<double>());
    EXPECT_GE(j["mean_e2el_ms"].get<double>(), j["mean_ttft_ms"].get<double>());
    EXPECT_GT(j["request_throughput"].get<double>(), 0.0);
    EXPECT_NEAR(j["output_throughput"].get<double>(),
        j["total_output_tokens"].get<double>() / j["duration"].get<double>(), 1e-6);
    // The warm-up is excluded: the server saw one request more than the bench measured.
    const auto m = metricsOf(server);
    EXPECT_EQ(m.value("day0_requests_finished_total{reason=\"length\"}", 0.0), 13);
}

TEST(ServeCli, WithNoQueueARequestAtAFreeSlotIsServed)
{
    // --max-queue counts requests waiting beyond the running slots, so 0 still serves one at a
    // time (it answered 429 to every request before).
    const fs::path dir = scratchDir("serve_no_queue");
    Server server(slowModel(), dir, { "--max-running", "1", "--max-queue", "0" });
    ASSERT_GT(server.port, 0);
    for (int i = 0; i < 2; ++i) {
        auto r = post(server, "/v1/completions",
            R"({"model":"m","prompt":[1,2],"max_tokens":2,"temperature":0,"ignore_eos":true})");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200) << r->body;
    }
}

TEST(ServeCli, FullQueueGets429AndAVanishedStreamFreesItsSlot)
{
    const fs::path dir = scratchDir("serve_queue");
    Server server(slowModel(), dir, { "--max-running", "1", "--max-queue", "1" });
    ASSERT_GT(server.port, 0);
    // A: a long stream that holds the only running slot until its client goes away.
    std::atomic<bool> leave { false };
    std::atomic<int> received { 0 };
    std::thread a([&] {
        auto c = server.client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body
            = R"({"model":"m","prompt":[1,2,3],"max_tokens":500,"stream":true,"ignore_eos":true})";
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
            ++received;
            return !leave.load(); // false: the client drops the connection
        };
        c.send(req);
    });
    ASSERT_TRUE(waitFor([&] { return received > 0; }, std::chrono::seconds(120)));
    // B waits in the queue behind A; C finds the queue full.
    std::atomic<int> bStatus { 0 };
    std::string bBody;
    std::thread b([&] {
        auto r = post(server, "/v1/completions",
            R"({"model":"m","prompt":[4,5],"max_tokens":2,"ignore_eos":true})");
        if (r) {
            bBody = r->body;
            bStatus = r->status;
        }
    });
    ASSERT_TRUE(waitFor([&] { return metricsOf(server).value("day0_requests_waiting", 0.0) == 1; },
        std::chrono::seconds(60)));
    auto c = post(server, "/v1/completions", R"({"model":"m","prompt":[6],"max_tokens":2})");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->status, 429) << c->body;
    const auto e = json::parse(c->body)["error"];
    EXPECT_EQ(e["code"], "queue_full");
    EXPECT_EQ(e["type"], "rate_limit_exceeded");
    // A's client leaves: its sequence is cancelled at the next token and B gets the slot long
    // before A's 500 tokens would have been generated.
    leave = true;
    a.join();
    b.join();
    EXPECT_EQ(bStatus, 200) << bBody;
    // The loop frees a finished sequence's slot right after its last step.
    EXPECT_TRUE(waitFor([&] { return metricsOf(server).value("day0_requests_running", -1.0) == 0; },
        std::chrono::seconds(10)));
    const auto m = metricsOf(server);
    EXPECT_EQ(m.value("day0_requests_finished_total{reason=\"cancelled\"}", 0.0), 1);
    EXPECT_EQ(m.value("day0_requests_rejected_queue_full_total", 0.0), 1);
    EXPECT_LT(m.value("day0_generation_tokens_total", 1e9), 400)
        << "A ran on after its client left";
    EXPECT_EQ(m.value("day0_requests_running", -1.0), 0);
}

TEST(ServeCli, SigtermDrainsAdmittedRequestsAndExitsZero)
{
    const fs::path dir = scratchDir("serve_drain");
    Server server(slowModel(), dir);
    ASSERT_GT(server.port, 0);
    std::atomic<int> received { 0 };
    std::string body;
    int status = 0;
    std::thread a([&] {
        auto c = server.client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body
            = R"({"model":"m","prompt":[1,2,3],"max_tokens":12,"stream":true,"ignore_eos":true})";
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
            body.append(data, n);
            ++received;
            return true;
        };
        auto r = c.send(req);
        status = r ? r->status : -1;
    });
    ASSERT_TRUE(waitFor([&] { return received > 0; }, std::chrono::seconds(120)));
    server.process->signal(SIGTERM);
    // While draining, new requests are refused with 503 (or find the socket closed).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto late = post(server, "/v1/completions", R"({"model":"m","prompt":[1],"max_tokens":1})");
    if (late) {
        EXPECT_EQ(late->status, 503) << late->body;
    }
    a.join();
    EXPECT_EQ(status, 200);
    const auto events = sseEvents(body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]") << body;
    int tokens = 0;
    for (const auto& ev : events) {
        if (ev != "[DONE]") {
            const auto j = json::parse(ev);
            tokens += int(j["choices"].empty()
                    ? 0
                    : j["choices"][0].value("token_ids", json::array()).size());
        }
    }
    EXPECT_EQ(tokens, 12) << "the admitted request was cut off";
    EXPECT_EQ(server.process->wait(std::chrono::seconds(60)), 0) << server.process->err();
    EXPECT_NE(server.process->err().find("draining"), std::string::npos);
}

TEST(ServeCli, BenchFailsNamingTheRequestsWhenTheServerIsKilled)
{
    const fs::path dir = scratchDir("serve_kill");
    Server server(slowModel(), dir);
    ASSERT_GT(server.port, 0);
    Process bench(
        { "bench", "serve", server.url, "--num-prompts", "6", "--input-len", "4", "--output-len",
            "300", "--max-concurrency", "2", "--warmup", "0", "-q", "--no-record" },
        dir, "bench");
    ASSERT_TRUE(
        waitFor([&] { return metricsOf(server).value("day0_generation_tokens_total", 0.0) > 0; },
            std::chrono::seconds(120)));
    server.process->signal(SIGKILL);
    const int code = bench.wait(std::chrono::seconds(120));
    EXPECT_EQ(code, 1) << bench.out() << bench.err();
    const std::string err = bench.err();
    EXPECT_NE(err.find("6 of 6 requests failed"), std::string::npos) << err;
    // In flight when the server died: the connection lost; sent after: refused.
    EXPECT_NE(err.find("request 0: connection_lost"), std::string::npos) << err;
    EXPECT_NE(err.find("request 5: connection_refused"), std::string::npos) << err;
    EXPECT_NE(bench.out().find("connection_lost:"), std::string::npos) << bench.out();
    EXPECT_NE(bench.out().find("connection_refused:"), std::string::npos) << bench.out();
}

TEST(ServeCli, TextPromptsGoThroughTheTokenizerAsInDay0Run)
{
    const std::string model = tinyWithTokenizer("serve_text");
    const fs::path dir = scratchDir("serve_text_run");
    const auto ran = runDay0({ "run", model, "--prompt", "Hello, wörld", "--tokens", "6", "--json",
        "-q", "--no-record" });
    ASSERT_EQ(ran.exitCode, 0) << ran.err;
    const auto promptIds = ran.json()["prompt_ids"].get<std::vector<std::int64_t>>();
    const auto expected = ran.json()["target"]["generated"].get<std::vector<std::int64_t>>();
    EXPECT_EQ(promptIds.size(), std::string("Hello, wörld").size()); // one id per byte
    Server server(model, dir);
    ASSERT_GT(server.port, 0);
    auto plain = post(server, "/v1/completions",
        R"({"model":"tiny-text","prompt":"Hello, wörld","max_tokens":6,"temperature":0,"ignore_eos":true})");
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const auto j = json::parse(plain->body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<std::int64_t>>(), expected);
    EXPECT_EQ(j["usage"]["prompt_tokens"], promptIds.size());
    // The text is the generated bytes (invalid UTF-8 replaced), streamed or not alike.
    auto streamed = post(server, "/v1/completions",
        R"({"model":"tiny-text","prompt":"Hello, wörld","max_tokens":6,"temperature":0,"ignore_eos":true,"stream":true})");
    ASSERT_TRUE(streamed);
    std::string text;
    for (const auto& e : sseEvents(streamed->body)) {
        if (e != "[DONE]") {
            text += json::parse(e)["choices"][0]["text"].get<std::string>();
        }
    }
    EXPECT_EQ(text, j["choices"][0]["text"].get<std::string>());
    auto chat = post(server, "/v1/chat/completions",
        R"({"model":"tiny-text","messages":[{"role":"user","content":"hi"}]})");
    ASSERT_TRUE(chat);
    EXPECT_EQ(chat->status, 400);
    EXPECT_NE(chat->body.find("no chat template"), std::string::npos) << chat->body;
}

TEST(ServeCli, BenchStagesRunEachLoadLevelInOrder)
{
    const fs::path dir = scratchDir("serve_stages");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const auto r = runDay0({ "bench", "serve", server.url, "--stages",
        "concurrency=1,concurrency=4,rate=100", "--num-prompts", "4", "--input-len", "3",
        "--output-len", "2", "--json", "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto stages = r.json()["stages"];
    ASSERT_EQ(stages.size(), 3U);
    EXPECT_EQ(stages[0]["max_concurrency"], 1);
    EXPECT_EQ(stages[1]["max_concurrency"], 4);
    EXPECT_EQ(stages[2]["request_rate"], 100.0);
    for (const auto& s : stages) {
        EXPECT_EQ(s["completed"], 4);
        EXPECT_EQ(s["failed"], 0);
    }
    EXPECT_EQ(stages[0]["warmups"], 1);
    EXPECT_EQ(stages[1]["warmups"], 0);
    // One warm-up, then 4 requests per level.
    EXPECT_EQ(metricsOf(server).value("day0_requests_finished_total{reason=\"length\"}", 0.0), 13);
    const auto bad = runDay0({ "bench", "serve", server.url, "--stages", "concurrency=0", "-q" });
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("--stages: 'concurrency=0'"), std::string::npos) << bad.err;
}
