// day0 serve's request fields beyond greedy decoding (issue #23), over HTTP on loopback: seeded
// sampling that reproduces whatever runs beside it, stop strings and stop token ids, streamed or
// not; Prometheus /metrics scraped and parsed.
#include "serve_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

using namespace day0::test;

namespace {

struct Completion {
    int status = 0;
    std::vector<std::int64_t> tokens;
    std::string text;
    std::string finish;
    json stopReason;
    json usage;
    std::string body;
};

/// POSTs a /v1/completions body and gathers its choice, streamed (SSE, with the usage chunk) or
/// not.
Completion complete(const Server& s, json request)
{
    Completion c;
    if (request.value("stream", false)) {
        request["stream_options"] = { { "include_usage", true } };
    }
    auto r = post(s, "/v1/completions", request.dump());
    if (!r) {
        return c;
    }
    c.status = r->status;
    c.body = r->body;
    if (r->status != 200) {
        return c;
    }
    if (!request.value("stream", false)) {
        const auto j = json::parse(r->body);
        const auto& choice = j["choices"][0];
        c.tokens = choice["token_ids"].get<std::vector<std::int64_t>>();
        c.text = choice["text"].get<std::string>();
        c.finish = choice["finish_reason"].get<std::string>();
        c.stopReason = choice["stop_reason"];
        c.usage = j["usage"];
        return c;
    }
    for (const auto& e : sseEvents(r->body)) {
        if (e == "[DONE]") {
            continue;
        }
        const auto j = json::parse(e);
        if (j.contains("usage")) {
            c.usage = j["usage"];
        }
        if (j["choices"].empty()) {
            continue;
        }
        const auto& choice = j["choices"][0];
        for (const auto& t : choice.value("token_ids", json::array())) {
            c.tokens.push_back(t.get<std::int64_t>());
        }
        c.text += choice["text"].get<std::string>();
        if (!choice["finish_reason"].is_null()) {
            c.finish = choice["finish_reason"].get<std::string>();
            c.stopReason = choice["stop_reason"];
        }
    }
    return c;
}

json request(const std::string& model, const json& prompt, int maxTokens, json extra = {})
{
    json r = { { "model", model }, { "prompt", prompt }, { "max_tokens", maxTokens },
        { "ignore_eos", true } };
    for (const auto& [k, v] : extra.items()) {
        r[k] = v;
    }
    return r;
}

} // namespace

TEST(ServeApi, ASeedReproducesWhateverRunsBesideIt)
{
    const fs::path dir = scratchDir("serve_seed");
    Server server(kTiny, dir);
    ASSERT_GT(server.port, 0);
    const json prompt = { 1, 2, 3, 4, 5 };
    const auto alone = complete(server, request("tiny-llama", prompt, 24, { { "seed", 7 } }));
    ASSERT_EQ(alone.status, 200) << alone.body;
    ASSERT_EQ(alone.tokens.size(), 24U);
    // The default temperature is 1 (OpenAI's): these are draws, not the greedy tokens.
    const auto greedy = runGreedy(kTiny, "1,2,3,4,5", 24);
    EXPECT_NE(alone.tokens, greedy);
    // The same seed, streamed and among other requests, gives the same tokens; another seed does
    // not.
    std::vector<Completion> got(6);
    std::vector<std::thread> clients;
    for (int i = 0; i < 6; ++i) {
        clients.emplace_back([&, i] {
            json extra = { { "seed", i % 3 == 0 ? 7 : 100 + i }, { "stream", i % 2 == 1 } };
            got[std::size_t(i)] = complete(server, request("tiny-llama", prompt, 24, extra));
        });
    }
    for (auto& t : clients) {
        t.join();
    }
    EXPECT_EQ(got[0].tokens, alone.tokens);
    EXPECT_EQ(got[3].tokens, alone.tokens) << "streamed, seed 7";
    EXPECT_NE(got[1].tokens, alone.tokens);
    EXPECT_NE(got[1].tokens, got[2].tokens);
    // temperature 0 and top_k 1 are greedy, as day0 run.
    EXPECT_EQ(complete(server, request("tiny-llama", prompt, 24, { { "temperature", 0 } })).tokens,
        greedy);
    EXPECT_EQ(complete(server, request("tiny-llama", prompt, 24, { { "top_k", 1 }, { "seed", 3 } }))
                  .tokens,
        greedy);
    // A tight top_p keeps only the likeliest token where it holds that mass: still draws, but
    // fewer distinct tokens than at top_p 1 over the same seeds.
    std::set<std::int64_t> wide;
    std::set<std::int64_t> narrow;
    for (int seed = 0; seed < 4; ++seed) {
        for (const auto t :
            complete(server, request("tiny-llama", prompt, 16, { { "seed", seed } })).tokens) {
            wide.insert(t);
        }
        for (const auto t : complete(
                 server, request("tiny-llama", prompt, 16, { { "seed", seed }, { "top_p", 0.05 } }))
                                .tokens) {
            narrow.insert(t);
        }
    }
    EXPECT_LT(narrow.size(), wide.size());
}

TEST(ServeApi, StopStringsAndStopTokensEndWithReasonStop)
{
    const std::string model = tinyWithTokenizer("serve_stop");
    const fs::path dir = scratchDir("serve_stop_run");
    Server server(model, dir);
    ASSERT_GT(server.port, 0);
    const json prompt = "Once upon";
    const auto full = complete(server, request("tiny-text", prompt, 40, { { "temperature", 0 } }));
    ASSERT_EQ(full.status, 200) << full.body;
    ASSERT_EQ(full.tokens.size(), 40U);
    // A stop string of two ASCII tokens (one byte each here), so it spans a token boundary.
    std::size_t at = 0;
    while (at + 1 < full.tokens.size()
        && !(full.tokens[at] >= 0x20 && full.tokens[at] < 0x7F && full.tokens[at + 1] >= 0x20
            && full.tokens[at + 1] < 0x7F)) {
        ++at;
    }
    ASSERT_LT(at + 1, full.tokens.size()) << "no two ASCII tokens in a row: " << full.body;
    const std::string stop { char(full.tokens[at]), char(full.tokens[at + 1]) };
    // The first occurrence in the bytes (an earlier one may sit elsewhere).
    std::string bytes;
    for (const auto t : full.tokens) {
        bytes += char(t);
    }
    const std::size_t first = bytes.find(stop);
    ASSERT_LE(first, at);
    for (const bool stream : { false, true }) {
        const auto r = complete(server,
            request("tiny-text", prompt, 40,
                { { "temperature", 0 }, { "stop", { "\x7fnever", stop } }, { "stream", stream } }));
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.finish, "stop") << "stream " << stream;
        EXPECT_EQ(r.stopReason, stop);
        // Generation ends at the token that completes the stop string; the text is cut before it
        // (compared where it is ASCII: other bytes of this random model are not valid UTF-8).
        EXPECT_EQ(r.tokens.size(), first + 2) << "stream " << stream;
        EXPECT_EQ(r.usage["completion_tokens"], first + 2);
        const std::string before = bytes.substr(0, first);
        if (std::all_of(before.begin(), before.end(), [](char c) { return c > 0; })) {
            EXPECT_EQ(r.text, before) << "stream " << stream;
        }
        EXPECT_EQ(r.text.find(stop), std::string::npos);
    }
    // A stop token id ends the sequence there, even with ignore_eos; its text is not output.
    const std::int64_t stopId = full.tokens[5];
    std::size_t firstId = 0;
    while (full.tokens[firstId] != stopId) {
        ++firstId;
    }
    const auto byId = complete(server,
        request(
            "tiny-text", prompt, 40, { { "temperature", 0 }, { "stop_token_ids", { stopId } } }));
    ASSERT_EQ(byId.status, 200) << byId.body;
    EXPECT_EQ(byId.finish, "stop");
    EXPECT_EQ(byId.stopReason, stopId);
    EXPECT_EQ(byId.tokens.size(), firstId + 1);
    EXPECT_EQ(byId.tokens.back(), stopId);
    // Without a stop, the same request ends by length.
    EXPECT_EQ(full.finish, "length");
    EXPECT_TRUE(full.stopReason.is_null());
    // Bad stop fields get a 400 naming them.
    for (const auto& bad : { json { { "stop", { "a", "b", "c", "d", "e" } } },
             json { { "stop", "" } }, json { { "stop", 5 } }, json { { "stop_token_ids", 3 } } }) {
        const auto r = complete(server, request("tiny-text", prompt, 4, bad));
        EXPECT_EQ(r.status, 400) << bad.dump();
        EXPECT_EQ(json::parse(r.body)["error"]["param"], bad.begin().key()) << r.body;
    }
}

namespace {

/// A ChatML-like template (one token per byte on this model, so the prompt is its bytes).
const std::string kChatTemplate
    = "{% for m in messages %}<|{{ m.role }}|>{{ m.content|trim }}\n"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

std::string idsOfBytes(const std::string& text)
{
    std::string ids;
    for (const char c : text) {
        ids += (ids.empty() ? "" : ",") + std::to_string(int(static_cast<unsigned char>(c)));
    }
    return ids;
}

} // namespace

TEST(ServeApi, ChatCompletionsRenderTheChatTemplate)
{
    const std::string model = tinyWithTokenizer("serve_chat", kChatTemplate);
    const fs::path dir = scratchDir("serve_chat_run");
    Server server(model, dir);
    ASSERT_GT(server.port, 0);
    const std::string prompt = "<|system|>Be brief.\n<|user|>Hi there\n<|assistant|>";
    const auto expected = runGreedy(model, idsOfBytes(prompt), 6);
    const json messages = json::parse(
        R"([{"role":"system","content":"Be brief."},{"role":"user","content":"  Hi there "}])");
    auto plain = post(server, "/v1/chat/completions",
        json { { "model", "tiny-text" }, { "messages", messages }, { "max_tokens", 6 },
            { "temperature", 0 }, { "ignore_eos", true }, { "logprobs", true },
            { "top_logprobs", 2 } }
            .dump());
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const auto j = json::parse(plain->body);
    EXPECT_EQ(j["object"], "chat.completion");
    const auto& choice = j["choices"][0];
    EXPECT_EQ(choice["message"]["role"], "assistant");
    EXPECT_EQ(choice["token_ids"].get<std::vector<std::int64_t>>(), expected);
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
    EXPECT_EQ(j["usage"]["completion_tokens"], 6);
    ASSERT_EQ(choice["logprobs"]["content"].size(), 6U);
    for (const auto& c : choice["logprobs"]["content"]) {
        ASSERT_EQ(c["top_logprobs"].size(), 2U);
        EXPECT_LE(c["top_logprobs"][1]["logprob"].get<double>(),
            c["top_logprobs"][0]["logprob"].get<double>());
        EXPECT_DOUBLE_EQ(c["logprob"].get<double>(), c["top_logprobs"][0]["logprob"].get<double>());
    }
    // Streamed: a role delta first, the content in deltas, the usage chunk, [DONE].
    auto streamed = post(server, "/v1/chat/completions",
        json { { "model", "tiny-text" }, { "messages", messages }, { "max_tokens", 6 },
            { "temperature", 0 }, { "ignore_eos", true }, { "stream", true },
            { "stream_options", { { "include_usage", true } } } }
            .dump());
    ASSERT_TRUE(streamed);
    ASSERT_EQ(streamed->status, 200) << streamed->body;
    const auto events = sseEvents(streamed->body);
    ASSERT_GE(events.size(), 4U);
    EXPECT_EQ(events.back(), "[DONE]");
    const auto first = json::parse(events.front());
    EXPECT_EQ(first["object"], "chat.completion.chunk");
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    std::string content;
    std::vector<std::int64_t> tokens;
    json usage;
    for (std::size_t i = 1; i + 1 < events.size(); ++i) {
        const auto e = json::parse(events[i]);
        if (e.contains("usage")) {
            usage = e["usage"];
            continue;
        }
        content += e["choices"][0]["delta"].value("content", "");
        for (const auto& t : e["choices"][0].value("token_ids", json::array())) {
            tokens.push_back(t.get<std::int64_t>());
        }
    }
    EXPECT_EQ(tokens, expected);
    EXPECT_EQ(content, choice["message"]["content"].get<std::string>());
    EXPECT_EQ(usage["prompt_tokens"], prompt.size());
    EXPECT_EQ(usage["completion_tokens"], 6);
    // Fields chat does not honour are refused by name; bad messages name 'messages'.
    for (const auto& [body, param] : std::vector<std::pair<json, std::string>> {
             { { { "model", "tiny-text" }, { "messages", messages }, { "tools", json::array() } },
                 "tools" },
             { { { "model", "tiny-text" }, { "messages", json::array() } }, "messages" },
             { { { "model", "tiny-text" } }, "messages" },
             { { { "model", "tiny-text" },
                   { "messages",
                       json::parse(R"([{"role":"user","content":[{"type":"image_url"}]}])") } },
                 "messages" },
             { { { "model", "tiny-text" }, { "messages", messages }, { "top_logprobs", 2 } },
                 "top_logprobs" },
             { { { "model", "tiny-text" }, { "messages", messages },
                   { "response_format", { { "type", "json_object" } } } },
                 "response_format" } }) {
        auto r = post(server, "/v1/chat/completions", body.dump());
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
        EXPECT_EQ(json::parse(r->body)["error"]["param"], param) << r->body;
    }
}

TEST(ServeApi, AChatTemplateOutsideTheSubsetIsRefusedByNameAndCompletionsStillServe)
{
    const std::string model = tinyWithTokenizer("serve_chat_call",
        "{% call turn(m) %}{{ m.content }}{% endcall %}"
        "{% for m in messages %}{{ turn(m) }}{% endfor %}");
    const fs::path dir = scratchDir("serve_chat_call_run");
    Server server(model, dir);
    ASSERT_GT(server.port, 0);
    auto chat = post(server, "/v1/chat/completions",
        R"({"model":"tiny-text","messages":[{"role":"user","content":"hi"}]})");
    ASSERT_TRUE(chat);
    EXPECT_EQ(chat->status, 400);
    EXPECT_NE(chat->body.find("{% call %}"), std::string::npos) << chat->body;
    EXPECT_NE(server.process->err().find("{% call %}"), std::string::npos) << server.process->err();
    auto plain = post(server, "/v1/completions",
        R"({"model":"tiny-text","prompt":"hi","max_tokens":2,"temperature":0})");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->status, 200) << plain->body;
}

namespace {

const fs::path kClientDir = fs::path(DAY0_TEST_DATA_DIR) / ".." / "cli" / "openai_client";

/// Why the openai Node.js client test cannot run here, or empty when it can.
std::string nodeClientMissing()
{
    if (std::system("node --version > /dev/null 2>&1") != 0) {
        return "node is not installed (Debian: nodejs)";
    }
    if (!fs::exists(kClientDir / "node_modules" / "openai" / "package.json")) {
        return "the openai npm package is not installed: run `npm ci` in tests/cli/openai_client "
               "(packaging/setup.sh test does)";
    }
    return {};
}

} // namespace

TEST(ServeApi, TheOfficialOpenAiNodeClientParsesEveryResponse)
{
    if (const auto missing = nodeClientMissing(); !missing.empty()) {
        GTEST_SKIP() << missing;
    }
    const std::string model = tinyWithTokenizer("serve_node", kChatTemplate);
    const fs::path dir = scratchDir("serve_node_run");
    Server server(model, dir);
    ASSERT_GT(server.port, 0);
    const int n = 7;
    const auto completionTokens = runGreedy(model, "1,2,3,4,5", n);
    const json messages = json::parse(
        R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"}])");
    const std::string chatPrompt = "<|system|>Be brief.\n<|user|>Hi there\n<|assistant|>";
    const auto chatTokens = runGreedy(model, idsOfBytes(chatPrompt), n);
    Process client({ (kClientDir / "client.mjs").string(), server.url + "/v1", "tiny-text",
                       "[1,2,3,4,5]", messages.dump(), std::to_string(n) },
        dir, "node", "node");
    ASSERT_EQ(client.wait(std::chrono::seconds(180)), 0) << client.out() << client.err();
    const auto r = json::parse(client.out());
    EXPECT_EQ(r["models"], json::array({ "tiny-text" }));
    for (const char* call : { "completion", "completionStream" }) {
        const auto& c = r[call];
        EXPECT_EQ(c["tokens"].get<std::vector<std::int64_t>>(), completionTokens) << call;
        EXPECT_EQ(c["finish"], "length") << call;
        ASSERT_TRUE(c["usage"].is_object()) << call << ": no usage chunk";
        EXPECT_EQ(c["usage"]["prompt_tokens"], 5) << call;
        EXPECT_EQ(c["usage"]["completion_tokens"], n) << call;
    }
    EXPECT_EQ(r["completion"]["text"], r["completionStream"]["text"]);
    for (const char* call : { "chat", "chatStream" }) {
        const auto& c = r[call];
        EXPECT_EQ(c["tokens"].get<std::vector<std::int64_t>>(), chatTokens) << call;
        EXPECT_EQ(c["finish"], "length") << call;
        ASSERT_TRUE(c["usage"].is_object()) << call << ": no usage chunk";
        EXPECT_EQ(c["usage"]["prompt_tokens"], chatPrompt.size()) << call;
        EXPECT_EQ(c["usage"]["completion_tokens"], n) << call;
    }
    EXPECT_EQ(r["chatStream"]["role"], "assistant");
    EXPECT_EQ(r["chat"]["text"], r["chatStream"]["text"]);
    EXPECT_GE(r["chatStream"]["chunks"].get<int>(), n + 2); // role, n tokens, usage
    // n = 2 seeded choices, streamed through the client: choice i is what a single request
    // seeded 5 + i gives.
    const auto& choices = r["choicesStream"];
    for (int i = 0; i < 2; ++i) {
        const json single
            = { { "model", "tiny-text" }, { "prompt", { 1, 2, 3, 4, 5 } }, { "max_tokens", n },
                  { "temperature", 0.9 }, { "ignore_eos", true }, { "seed", 5 + i } };
        auto one = post(server, "/v1/completions", single.dump());
        ASSERT_TRUE(one && one->status == 200);
        EXPECT_EQ(choices["tokens"][i], json::parse(one->body)["choices"][0]["token_ids"]) << i;
        EXPECT_EQ(choices["finish"][i], "length");
    }
    EXPECT_NE(choices["tokens"][0], choices["tokens"][1]);
    ASSERT_TRUE(choices["usage"].is_object());
    EXPECT_EQ(choices["usage"]["completion_tokens"], 2 * n);
}

namespace {

/// /metrics parsed strictly as Prometheus text (0.0.4): every sample belongs to a family with
/// HELP and TYPE lines before it; histogram buckets never decrease and +Inf equals _count.
std::map<std::string, double> scrape(const Server& s)
{
    auto res = s.client().Get("/metrics");
    EXPECT_TRUE(res && res->status == 200);
    if (!res) {
        return {};
    }
    EXPECT_NE(res->get_header_value("Content-Type").find("text/plain"), std::string::npos);
    std::map<std::string, double> samples;
    std::map<std::string, std::string> types;
    std::set<std::string> helped;
    std::istringstream in(res->body);
    std::string line;
    const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
    while (std::getline(in, line)) {
        std::smatch m;
        if (line.rfind("# HELP ", 0) == 0) {
            helped.insert(line.substr(7, line.find(' ', 7) - 7));
        } else if (line.rfind("# TYPE ", 0) == 0) {
            const auto name = line.substr(7, line.find(' ', 7) - 7);
            types[name] = line.substr(line.find(' ', 7) + 1);
        } else if (std::regex_match(line, m, sample)) {
            std::string family = m[1];
            for (const char* suffix : { "_bucket", "_sum", "_count" }) {
                if (!types.contains(family) && family.ends_with(suffix)) {
                    family.resize(family.size() - std::string(suffix).size());
                }
            }
            EXPECT_TRUE(types.contains(family) && helped.contains(family)) << line;
            samples[m[1].str() + m[2].str()] = std::stod(m[3]);
        } else {
            ADD_FAILURE() << "not Prometheus text: '" << line << "'";
        }
    }
    for (const auto& [family, type] : types) {
        if (type != "histogram") {
            continue;
        }
        double previous = 0;
        for (const auto& [key, value] : samples) {
            if (key.rfind(family + "_bucket{le=", 0) == 0
                && key.find("+Inf") == std::string::npos) {
                EXPECT_GE(value, 0);
            }
        }
        for (const double le :
            { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0 }) {
            const double v = samples[fmt::format("{}_bucket{{le=\"{}\"}}", family, le)];
            EXPECT_GE(v, previous) << family << " le=" << le;
            previous = v;
        }
        EXPECT_EQ(samples[family + "_bucket{le=\"+Inf\"}"], samples[family + "_count"]) << family;
        EXPECT_GE(samples[family + "_bucket{le=\"+Inf\"}"], previous) << family;
    }
    return samples;
}

} // namespace

TEST(ServeApi, MetricsReportKvUseTokenRatesAndLatencies)
{
    const fs::path dir = scratchDir("serve_metrics");
    Server server(slowModel(), dir, { "--kv-tokens", "1000" });
    ASSERT_GT(server.port, 0);
    // KV bytes per token of this llama (full attention, no window) in fp32: K and V per layer.
    std::ifstream in(fs::path(slowModel()) / "config.json");
    const auto config = json::parse(in);
    const auto heads = config["num_attention_heads"].get<double>();
    const double headDim = config.value("head_dim", config["hidden_size"].get<double>() / heads);
    const double perToken = 2.0 * config["num_hidden_layers"].get<double>()
        * config["num_key_value_heads"].get<double>() * headDim * 4.0;
    std::atomic<int> received { 0 };
    std::atomic<bool> leave { false };
    std::thread a([&] {
        auto c = server.client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = R"({"model":"m","prompt":[1,2,3],"max_tokens":400,"stream":true,
                       "temperature":0,"ignore_eos":true})";
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
            ++received;
            return !leave.load();
        };
        c.send(req);
    });
    ASSERT_TRUE(waitFor([&] { return received > 5; }, std::chrono::seconds(120)));
    auto m = scrape(server);
    EXPECT_EQ(m["day0_requests_running"], 1);
    EXPECT_EQ(m["day0_requests_waiting"], 0);
    EXPECT_EQ(m["day0_kv_tokens_reserved"], 403);
    EXPECT_EQ(m["day0_kv_tokens_budget"], 1000);
    EXPECT_DOUBLE_EQ(m["day0_kv_cache_usage_ratio"], 0.403);
    const double used = m["day0_kv_tokens_used"];
    EXPECT_GE(used, 3 + 5 - 1);
    EXPECT_LE(used, 403);
    EXPECT_DOUBLE_EQ(m["day0_kv_cache_bytes_used"], used * perToken);
    EXPECT_DOUBLE_EQ(m["day0_kv_cache_bytes_reserved"], 403 * perToken);
    EXPECT_GT(m["day0_generation_tokens_per_second"], 0);
    EXPECT_DOUBLE_EQ(m["day0_prompt_tokens_per_second"], 3.0 / 10.0);
    EXPECT_EQ(m["day0_time_to_first_token_seconds_count"], 1);
    EXPECT_GE(m["day0_inter_token_latency_seconds_count"], 4);
    EXPECT_GT(m["day0_inter_token_latency_seconds_sum"], 0);
    leave = true;
    a.join();
    ASSERT_TRUE(waitFor([&] { return metricsOf(server).value("day0_requests_running", -1.0) == 0; },
        std::chrono::seconds(30)));
    m = scrape(server);
    EXPECT_EQ(m["day0_kv_tokens_used"], 0);
    EXPECT_EQ(m["day0_kv_tokens_reserved"], 0);
    EXPECT_NEAR(m["day0_kv_cache_bytes_used"], 0, 1e-6);
    EXPECT_NEAR(m["day0_kv_cache_bytes_reserved"], 0, 1e-6);
    EXPECT_EQ(m["day0_requests_finished_total{reason=\"cancelled\"}"], 1);
    EXPECT_EQ(m["day0_generation_tokens_total"], m["day0_inter_token_latency_seconds_count"] + 1);
}
