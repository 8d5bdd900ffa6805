// day0 serve and day0 bench serve (issue #23): a server on a shrunk model on loopback (port 0),
// bounded in time; its greedy tokens equal day0 run's, streamed or not; bad requests get an
// OpenAI-style 4xx and the server keeps serving; a full queue answers 429; a client leaving
// mid-stream frees its slot; SIGTERM drains; the bench reports 0 errors against it and names
// the failed requests when the server is killed under it.
#include "cli_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;
using day0::test::runDay0;
using day0::test::scratchDir;
using nlohmann::json;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

std::string readFile(const fs::path& p)
{
    std::ifstream in(p);
    return { std::istreambuf_iterator<char>(in), {} };
}

/// A day0 process with stdout and stderr in files; killed (SIGKILL) if still running at the end.
class Process {
public:
    Process(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag)
        : m_out(dir / (tag + ".out"))
        , m_err(dir / (tag + ".err"))
    {
        std::vector<std::string> argv { DAY0_CLI_PATH };
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> cargv;
        for (auto& a : argv) {
            cargv.push_back(a.data());
        }
        cargv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(
            &actions, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(
            &actions, 2, m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (posix_spawn(&m_pid, DAY0_CLI_PATH, &actions, nullptr, cargv.data(), environ) != 0) {
            m_pid = -1;
        }
        posix_spawn_file_actions_destroy(&actions);
    }
    ~Process()
    {
        if (m_pid > 0 && !m_status) {
            ::kill(m_pid, SIGKILL);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
        }
    }
    void signal(int sig) const { ::kill(m_pid, sig); }
    /// Exit code (or 128 + signal), waiting at most `bound`; -1 when it did not end.
    int wait(std::chrono::seconds bound)
    {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (!m_status) {
            if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
                m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return *m_status;
    }
    [[nodiscard]] std::string out() const { return readFile(m_out); }
    [[nodiscard]] std::string err() const { return readFile(m_err); }
    [[nodiscard]] pid_t pid() const { return m_pid; }

private:
    fs::path m_out;
    fs::path m_err;
    pid_t m_pid = -1;
    std::optional<int> m_status;
};

/// `day0 serve CKPT --port 0 ...`, and the port it printed.
struct Server {
    std::unique_ptr<Process> process;
    int port = 0;
    std::string url;

    Server(const std::string& checkpoint, const fs::path& dir, std::vector<std::string> extra = {})
    {
        std::vector<std::string> args { "serve", checkpoint, "--port", "0", "-q", "--no-record" };
        args.insert(args.end(), extra.begin(), extra.end());
        process = std::make_unique<Process>(args, dir, "serve");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        const std::regex printed(R"(http://127\.0\.0\.1:(\d+))");
        while (std::chrono::steady_clock::now() < deadline) {
            std::smatch m;
            const std::string out = process->out();
            if (std::regex_search(out, m, printed)) {
                port = std::stoi(m[1]);
                url = m[0];
                return;
            }
            if (process->wait(std::chrono::seconds(0)) >= 0) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ADD_FAILURE() << "day0 serve printed no URL: " << process->out() << process->err();
    }
    [[nodiscard]] httplib::Client client() const
    {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        return c;
    }
};

httplib::Result post(const Server& s, const std::string& path, const std::string& body)
{
    return s.client().Post(path.c_str(), body, "application/json");
}

/// The events of an SSE body ("data: ..." payloads, in order).
std::vector<std::string> sseEvents(const std::string& body)
{
    std::vector<std::string> out;
    std::size_t start = 0;
    std::size_t end = 0;
    while ((end = body.find("\n\n", start)) != std::string::npos) {
        const std::string event = body.substr(start, end - start);
        if (event.rfind("data: ", 0) == 0) {
            out.push_back(event.substr(6));
        }
        start = end + 2;
    }
    return out;
}

std::vector<std::int64_t> runGreedy(const std::string& checkpoint, const std::string& ids, int n)
{
    const auto r = runDay0({ "run", checkpoint, "--ids", ids, "--tokens", std::to_string(n),
        "--json", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return r.json()["target"]["generated"].get<std::vector<std::int64_t>>();
}

json metricsOf(const Server& s)
{
    auto res = s.client().Get("/metrics");
    json m = json::object();
    if (!res) {
        return m;
    }
    std::istringstream in(res->body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        const auto space = line.rfind(' ');
        m[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return m;
}

} // namespace

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
            "ignore_eos":true,"stream_options":{"include_usage":true}})");
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
        for (const auto& t : c["token_ids"]) {
            tokens.push_back(t.get<std::int64_t>());
        }
        if (!c["finish_reason"].is_null()) {
            finish = c["finish_reason"].get<std::string>();
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
                    R"({{"model":"tiny-llama","prompt":[{}],"max_tokens":{},"ignore_eos":true}})",
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
        { R"({"model":"tiny-llama","prompt":[1],"temperature":0.7})", 400, "temperature" },
        { R"({"model":"tiny-llama","prompt":[1],"n":2})", 400, "n" },
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
        R"({"model":"tiny-llama","prompt":[1,2,3,4,5],"max_tokens":7,"ignore_eos":true})");
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

namespace {

/// A model slow enough (tens of ms per token here) that requests overlap: llama-3.1-8b shrunk to
/// 4 layers of width 512, made once per test run.
const std::string& slowModel()
{
    static const std::string path = [] {
        const std::string dir = scratchDir("serve_slow_model") + "/m";
        const auto r = runDay0({ "shrink", "llama-3.1-8b", "--layers", "4", "--hidden", "512",
            "--vocab", "4096", "--out", dir, "-q", "--no-record" });
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return dir;
    }();
    return path;
}

template <typename Pred> bool waitFor(Pred pred, std::chrono::seconds bound)
{
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

} // namespace

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

namespace {

std::string utf8(std::uint32_t cp)
{
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

/// tiny-llama with a byte-level BPE tokenizer of its 256 ids (one per byte, in GPT-2's
/// byte-to-unicode alphabet, no merges) and, when asked, a chat template.
std::string tinyWithTokenizer(const std::string& name, bool chatTemplate)
{
    const fs::path dir = fs::path(scratchDir(name)) / "tiny-text";
    fs::create_directories(dir);
    for (const auto* f : { "config.json", "model.safetensors" }) {
        fs::copy_file(fs::path(kTiny) / f, dir / f);
    }
    json vocab = json::object();
    int shifted = 0;
    for (std::uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        vocab[utf8(printable ? b : 256 + std::uint32_t(shifted++))] = b;
    }
    const json tok
        = { { "model", { { "type", "BPE" }, { "vocab", vocab }, { "merges", json::array() } } },
              { "pre_tokenizer", { { "type", "ByteLevel" }, { "add_prefix_space", false } } },
              { "decoder", { { "type", "ByteLevel" } } }, { "added_tokens", json::array() } };
    std::ofstream(dir / "tokenizer.json") << tok.dump();
    if (chatTemplate) {
        std::ofstream(dir / "tokenizer_config.json")
            << R"({"chat_template":"{% for m in messages %}{{ m.content }}{% endfor %}"})";
    }
    return dir.string();
}

} // namespace

TEST(ServeCli, TextPromptsGoThroughTheTokenizerAsInDay0Run)
{
    const std::string model = tinyWithTokenizer("serve_text", true);
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
        R"({"model":"tiny-text","prompt":"Hello, wörld","max_tokens":6,"ignore_eos":true})");
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const auto j = json::parse(plain->body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<std::int64_t>>(), expected);
    EXPECT_EQ(j["usage"]["prompt_tokens"], promptIds.size());
    // The text is the generated bytes (invalid UTF-8 replaced), streamed or not alike.
    auto streamed = post(server, "/v1/completions",
        R"({"model":"tiny-text","prompt":"Hello, wörld","max_tokens":6,"ignore_eos":true,"stream":true})");
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
    EXPECT_NE(chat->body.find("has a chat template"), std::string::npos) << chat->body;
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
