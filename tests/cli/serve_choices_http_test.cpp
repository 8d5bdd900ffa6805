// day0 serve's n, presence_penalty, frequency_penalty and logit_bias (issue #23), over HTTP on
// loopback: several choices, each its own sequence and seed stream; the penalties checked token
// by token against OpenAI's definition from the model's own log-probabilities; the decode path
// (batched or not) in /metrics.
#include "serve_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <thread>

using namespace day0::test;

namespace {

json completeJson(const Server& s, const json& request)
{
    auto r = post(s, "/v1/completions", request.dump());
    EXPECT_TRUE(r);
    if (!r) {
        return nullptr;
    }
    EXPECT_EQ(r->status, 200) << request.dump() << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
}

std::vector<std::int64_t> tokensOf(const json& choice)
{
    return choice["token_ids"].get<std::vector<std::int64_t>>();
}

std::int64_t idOf(const std::string& text)
{
    // tiny-llama has no tokenizer: tokens are spelled "token_id:N".
    return std::stoll(text.substr(text.find(':') + 1));
}

} // namespace

TEST(ServeChoices, NChoicesAreEachTheirOwnSequenceAndSeedStream)
{
    const fs::path dir = scratchDir("serve_choices_n");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const int n = 6;
    const auto greedy = runGreedy(kTiny, "1,2,3", n);
    // Greedy: three identical choices, indexed 0..2, the usage counting every token.
    const auto g = completeJson(server,
        { { "model", "tiny-llama" }, { "prompt", { 1, 2, 3 } }, { "max_tokens", n },
            { "temperature", 0 }, { "ignore_eos", true }, { "n", 3 } });
    ASSERT_EQ(g["choices"].size(), 3u) << g.dump();
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(g["choices"][i]["index"], i);
        EXPECT_EQ(tokensOf(g["choices"][i]), greedy) << i;
    }
    EXPECT_EQ(g["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(g["usage"]["completion_tokens"], 3 * n);
    // Seeded: choice i draws as a single request seeded seed + i does, streamed or not.
    const json sampled = { { "model", "tiny-llama" }, { "prompt", { 1, 2, 3 } },
        { "max_tokens", n }, { "temperature", 1.0 }, { "ignore_eos", true }, { "seed", 41 } };
    std::vector<std::vector<std::int64_t>> singles;
    for (int i = 0; i < 2; ++i) {
        auto one = sampled;
        one["seed"] = 41 + i;
        singles.push_back(tokensOf(completeJson(server, one)["choices"][0]));
    }
    EXPECT_NE(singles[0], singles[1]);
    auto both = sampled;
    both["n"] = 2;
    const auto whole = completeJson(server, both);
    ASSERT_EQ(whole["choices"].size(), 2u);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(tokensOf(whole["choices"][i]), singles[std::size_t(i)]) << i;
    }
    both["stream"] = true;
    both["stream_options"] = { { "include_usage", true } };
    auto r = post(server, "/v1/completions", both.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::vector<std::vector<std::int64_t>> streamed(2);
    std::vector<std::string> finish(2);
    json usage;
    for (const auto& e : sseEvents(r->body)) {
        if (e == "[DONE]") {
            continue;
        }
        const auto j = json::parse(e);
        if (j.contains("usage") && j["usage"].is_object()) {
            usage = j["usage"];
            continue;
        }
        for (const auto& c : j["choices"]) {
            const auto i = c["index"].get<std::size_t>();
            ASSERT_LT(i, 2u);
            for (const auto& t : c["token_ids"]) {
                streamed[i].push_back(t.get<std::int64_t>());
            }
            if (c["finish_reason"].is_string()) {
                finish[i] = c["finish_reason"].get<std::string>();
            }
        }
    }
    EXPECT_EQ(streamed, singles);
    EXPECT_EQ(finish, (std::vector<std::string> { "length", "length" }));
    EXPECT_EQ(usage["completion_tokens"], 2 * n);
    // Out of range, and best_of other than n, are refused by name.
    for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>> {
             { R"({"model":"tiny-llama","prompt":[1],"n":0})", "n" },
             { R"({"model":"tiny-llama","prompt":[1],"n":17})", "n" },
             { R"({"model":"tiny-llama","prompt":[1],"n":2,"best_of":3})", "best_of" } }) {
        auto bad = post(server, "/v1/completions", body);
        ASSERT_TRUE(bad);
        EXPECT_EQ(bad->status, 400) << body;
        EXPECT_EQ(json::parse(bad->body)["error"]["param"], param) << bad->body;
    }
    auto same = post(server, "/v1/completions",
        R"({"model":"tiny-llama","prompt":[1],"n":2,"best_of":2,"max_tokens":2})");
    ASSERT_TRUE(same);
    EXPECT_EQ(same->status, 200) << same->body;
}

TEST(ServeChoices, PenaltiesFollowOpenAisDefinitionAndLogitBiasMovesTokens)
{
    const fs::path dir = scratchDir("serve_choices_penalties");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const int n = 16;
    const auto greedy = runGreedy(kTiny, "5,6,7", n);
    // The unpenalised greedy answer repeats a token, so the penalties have something to change.
    ASSERT_LT(std::set<std::int64_t>(greedy.begin(), greedy.end()).size(), greedy.size());
    const double presence = 0.7;
    const double frequency = 1.3;
    const auto j = completeJson(server,
        { { "model", "tiny-llama" }, { "prompt", { 5, 6, 7 } }, { "max_tokens", n },
            { "temperature", 0 }, { "ignore_eos", true }, { "logprobs", 20 },
            { "presence_penalty", presence }, { "frequency_penalty", frequency } });
    const auto& choice = j["choices"][0];
    const auto tokens = tokensOf(choice);
    ASSERT_EQ(tokens.size(), std::size_t(n));
    EXPECT_NE(tokens, greedy);
    // Each token is the argmax of logprob − (count · frequency + [count > 0] · presence) over
    // the 20 likeliest (the log-probabilities are the model's, before the penalties; a token
    // outside them has a lower logprob and a penalty >= 0, so it cannot win unless the best
    // adjusted value falls below the 20th logprob, which the test asserts it does not).
    std::map<std::int64_t, int> counts;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
        double best = -std::numeric_limits<double>::infinity();
        double lowest = std::numeric_limits<double>::infinity();
        std::int64_t argmax = -1;
        for (const auto& [text, lp] : choice["logprobs"]["top_logprobs"][t].items()) {
            const auto id = idOf(text);
            const int c = counts[id];
            const double adjusted = lp.get<double>() - (c * frequency + (c > 0 ? presence : 0.0));
            lowest = std::min(lowest, lp.get<double>());
            if (adjusted > best || (adjusted == best && id < argmax)) {
                best = adjusted;
                argmax = id;
            }
        }
        ASSERT_GE(best, lowest) << "step " << t;
        EXPECT_EQ(tokens[t], argmax) << "step " << t;
        ++counts[tokens[t]];
    }
    // logit_bias: +100 on one id makes it every greedy token; -100 on the greedy first token
    // moves the first token off it.
    const auto forced = completeJson(server,
        { { "model", "tiny-llama" }, { "prompt", { 5, 6, 7 } }, { "max_tokens", 4 },
            { "temperature", 0 }, { "ignore_eos", true }, { "logit_bias", { { "9", 100 } } } });
    EXPECT_EQ(tokensOf(forced["choices"][0]), (std::vector<std::int64_t> { 9, 9, 9, 9 }));
    const auto banned = completeJson(server,
        { { "model", "tiny-llama" }, { "prompt", { 5, 6, 7 } }, { "max_tokens", 1 },
            { "temperature", 0 }, { "ignore_eos", true },
            { "logit_bias", { { std::to_string(greedy[0]), -100 } } } });
    EXPECT_NE(tokensOf(banned["choices"][0])[0], greedy[0]);
    for (const auto& [body, param] :
        std::vector<std::pair<std::string, std::string>> {
            { R"({"model":"tiny-llama","prompt":[1],"presence_penalty":2.5})", "presence_penalty" },
            { R"({"model":"tiny-llama","prompt":[1],"frequency_penalty":"1"})",
                "frequency_penalty" },
            { R"({"model":"tiny-llama","prompt":[1],"logit_bias":{"256":1}})", "logit_bias" },
            { R"({"model":"tiny-llama","prompt":[1],"logit_bias":{"x":1}})", "logit_bias" },
            { R"({"model":"tiny-llama","prompt":[1],"logit_bias":{"3":101}})", "logit_bias" },
            { R"({"model":"tiny-llama","prompt":[1],"logit_bias":[1]})", "logit_bias" },
            // What day0 serve does not model is refused by name, never ignored.
            { R"({"model":"tiny-llama","prompt":[1],"tools":[]})", "tools" },
            { R"({"model":"tiny-llama","prompt":[1],"response_format":{"type":"json_object"}})",
                "response_format" },
            { R"({"model":"tiny-llama","prompt":[1],"suffix":"x"})", "suffix" },
            { R"({"model":"tiny-llama","prompt":[1],"echo":true})", "echo" } }) {
        auto bad = post(server, "/v1/completions", body);
        ASSERT_TRUE(bad);
        EXPECT_EQ(bad->status, 400) << body;
        EXPECT_EQ(json::parse(bad->body)["error"]["param"], param) << bad->body;
    }
}

TEST(ServeChoices, TheDecodePathIsInTheMetricsAndNoBatchTurnsBatchingOff)
{
    // tiny-llama is a dense Llama: its decode steps run batched unless --no-batch; /metrics
    // says which, and both give day0 run's greedy tokens to concurrent requests.
    const fs::path dir = scratchDir("serve_decode_path");
    const auto greedy = runGreedy(kTiny, "4,5,6", 10);
    for (const bool batched : { true, false }) {
        const fs::path sub = dir / (batched ? "batched" : "sequential");
        fs::create_directories(sub);
        Server server(kTiny, sub,
            batched ? std::vector<std::string> {} : std::vector<std::string> { "--no-batch" });
        ASSERT_GT(server.port, 0);
        std::vector<std::thread> clients;
        std::vector<json> answers(4);
        for (std::size_t i = 0; i < answers.size(); ++i) {
            clients.emplace_back([&, i] {
                answers[i] = completeJson(server,
                    { { "model", "tiny-llama" }, { "prompt", { 4, 5, 6 } }, { "max_tokens", 10 },
                        { "temperature", 0 }, { "ignore_eos", true } });
            });
        }
        for (auto& c : clients) {
            c.join();
        }
        for (const auto& a : answers) {
            EXPECT_EQ(tokensOf(a["choices"][0]), greedy) << batched;
        }
        const auto m = metricsOf(server);
        EXPECT_EQ(m.value("day0_decode_batched", -1.0), batched ? 1.0 : 0.0) << m.dump();
        if (!batched) {
            EXPECT_EQ(m.value("day0_decode_batches_total", -1.0), 0.0);
        }
    }
}
