// The load client of `day0 bench serve` (core/serve/serve_bench.h), two figures (#23):
// 1. Its sustained SSE event rate against a minimal local endpoint (a cpp-httplib server in this
//    process streaming completion events as fast as it can write them), against the rate the
//    server wrote them at (the baseline, same run), and how far the client's timestamps of the
//    events lag the server's writes, at full speed and paced at 10,000 events/s. Goal: >= 10,000
//    events/s with timestamps within 1 ms.
// 2. One request's TTFT through `day0 serve` (the bench client's TTFT, HTTP and scheduler
//    included) against `day0 run`'s prefill of the same prompt on the same checkpoint (the time
//    to its first token), both measured here. Goal: <= 1.1x.
// Ratios are printed; nothing is asserted on time.
#include "bench_support.h"
#include "exec/precision.h"
#include "serve/bench_check.h"
#include "serve/serve_bench.h"
#include "serve/served_model.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// ---- 1. SSE event rate ----------------------------------------------------------------------

/// A /v1/completions endpoint that streams `max_tokens` events, one write per event, as fast
/// as it can or paced at `pace` events/s, and keeps each event's write time.
class SseServer {
public:
    SseServer()
    {
        m_server.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(
                R"({"object":"list","data":[{"id":"sse","vocab_size":1000}]})", "application/json");
        });
        m_server.Post(
            "/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
                const auto body = json::parse(req.body);
                const auto n = body.value("max_tokens", std::int64_t(1));
                res.set_chunked_content_provider(
                    "text/event-stream", [this, n](std::size_t, httplib::DataSink& sink) {
                        std::vector<double> writes;
                        writes.reserve(std::size_t(n));
                        const double start = now();
                        for (std::int64_t i = 0; i < n; ++i) {
                            if (m_pace > 0) {
                                while (now() < start + double(i) / m_pace) { }
                            }
                            const std::string event = fmt::format(
                                "data: {{\"object\":\"text_completion\",\"choices\":[{{\"index\":0,"
                                "\"text\":\" "
                                "t\",\"token_ids\":[{}],\"finish_reason\":null}}]}}\n\n",
                                i % 1000);
                            writes.push_back(now());
                            if (!sink.write(event.data(), event.size())) {
                                return false;
                            }
                        }
                        const std::string tail
                            = fmt::format("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":1,"
                                          "\"completion_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                                n);
                        sink.write(tail.data(), tail.size());
                        sink.done();
                        {
                            const std::lock_guard lock(m_mutex);
                            m_writes = std::move(writes);
                            ++m_streams;
                        }
                        m_ended.notify_all();
                        return true;
                    });
            });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
    }
    ~SseServer()
    {
        m_server.stop();
        m_thread.join();
    }
    [[nodiscard]] std::string url() const { return fmt::format("http://127.0.0.1:{}", m_port); }
    void pace(double eventsPerSecond) { m_pace = eventsPerSecond; }
    /// Streams ended so far.
    int streams()
    {
        const std::lock_guard lock(m_mutex);
        return m_streams;
    }
    /// The write times of the stream that ends the `count`-th, once it has.
    std::vector<double> writes(int count)
    {
        std::unique_lock lock(m_mutex);
        m_ended.wait(lock, [&] { return m_streams >= count; });
        return m_writes;
    }

private:
    httplib::Server m_server;
    int m_port = 0;
    std::thread m_thread;
    std::atomic<double> m_pace { 0.0 };
    std::mutex m_mutex;
    std::condition_variable m_ended;
    int m_streams = 0;
    std::vector<double> m_writes;
};

SseServer& sseServer()
{
    static SseServer server;
    return server;
}

std::int64_t events() { return quick() ? 2000 : 50000; }

/// What one streamed request showed: the client's rate and its lag behind the server's writes.
struct StreamFigures {
    double clientRate = 0.0; ///< events / (last arrival − first arrival)
    double serverRate = 0.0; ///< events / (last write − first write)
    double lagP50 = 0.0; ///< arrival − write, seconds
    double lagP99 = 0.0;
    double lagMax = 0.0;
    double within1ms = 0.0; ///< share of events whose arrival is within 1 ms of their write
};
std::map<std::string, StreamFigures> g_streams;

StreamFigures streamOnce(double pace)
{
    auto& server = sseServer();
    server.pace(pace);
    day0::serve::BenchOptions o;
    o.url = server.url();
    if (auto ok = day0::serve::discoverEndpoint(o); !ok) {
        day0::bench::fail("serve_client_bench", ok.error().message);
    }
    const int before = server.streams();
    day0::serve::RequestRecord r;
    r.prompt = { 1, 2, 3 };
    r.maxTokens = events();
    day0::serve::sendCompletion(o, r);
    if (!r.ok || std::int64_t(r.itl.size()) + 1 != events()) {
        day0::bench::fail("serve_client_bench",
            fmt::format("the stream failed ({}: {}) or lost events ({} of {})", r.errorKind,
                r.errorMessage, r.itl.size() + 1, events()));
    }
    const auto writes = server.writes(before + 1);
    std::vector<double> lags;
    double at = r.sendClock + r.ttft;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        if (i > 0) {
            at += r.itl[i - 1];
        }
        lags.push_back(at - writes[i]);
    }
    StreamFigures f;
    f.clientRate = double(events() - 1) / (r.e2el - r.ttft);
    f.serverRate = double(events() - 1) / (writes.back() - writes.front());
    std::sort(lags.begin(), lags.end());
    f.lagP50 = day0::serve::percentile(lags, 50);
    f.lagP99 = day0::serve::percentile(lags, 99);
    f.lagMax = lags.back();
    f.within1ms
        = double(std::count_if(lags.begin(), lags.end(), [](double l) { return l <= 1e-3; }))
        / double(lags.size());
    return f;
}

void BM_SseStream(benchmark::State& state)
{
    const double pace = double(state.range(0));
    StreamFigures f;
    for (auto _ : state) {
        f = streamOnce(pace);
        state.SetIterationTime(double(events()) / f.clientRate);
    }
    g_streams[pace > 0 ? "paced" : "full"] = f;
    state.counters["events/s"] = f.clientRate;
}
BENCHMARK(BM_SseStream)
    ->Arg(0)
    ->Arg(10000)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---- 2. TTFT through day0 serve against day0 run --------------------------------------------

std::string readFile(const std::filesystem::path& p)
{
    std::ifstream in(p);
    return { std::istreambuf_iterator<char>(in), {} };
}

/// Runs day0 with `args`, stdout into `out`; returns its exit code.
int runDay0(const std::vector<std::string>& args, const std::filesystem::path& out)
{
    std::string cmd = std::string(DAY0_CLI_PATH);
    for (const auto& a : args) {
        cmd += " '" + a + "'";
    }
    cmd += " > '" + out.string() + "' 2>&1";
    return std::system(cmd.c_str());
}

/// The checkpoint both run on: llama-3.1-8b shrunk to 4 layers of width 512 (tens of ms per
/// prefill on a CPU, so the figures are the engine's, not the process's), tiny-llama in quick
/// mode.
const std::string& checkpoint()
{
    static const std::string path = [] {
        if (quick()) {
            return std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";
        }
        const auto dir = day0::bench::scratchDir("serve_client_bench") / "m";
        if (runDay0({ "shrink", "llama-3.1-8b", "--layers", "4", "--hidden", "512", "--vocab",
                        "4096", "--out", dir.string(), "-q", "--no-record" },
                dir.parent_path() / "shrink.log")
            != 0) {
            day0::bench::fail("serve_client_bench", readFile(dir.parent_path() / "shrink.log"));
        }
        return dir.string();
    }();
    return path;
}

std::vector<std::int64_t> prompt()
{
    std::vector<std::int64_t> ids;
    for (int i = 0; i < (quick() ? 16 : 128); ++i) {
        ids.push_back(1 + (i * 37) % 200);
    }
    return ids;
}

/// `day0 serve CHECKPOINT --port 0` for the process's life.
class Day0Server {
public:
    Day0Server()
    {
        const auto dir = day0::bench::scratchDir("serve_client_bench");
        m_out = dir / "serve.out";
        std::vector<std::string> argv { DAY0_CLI_PATH, "serve", checkpoint(), "--port", "0", "-q",
            "--no-record" };
        std::vector<char*> cargv;
        for (auto& a : argv) {
            cargv.push_back(a.data());
        }
        cargv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(
            &actions, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&m_pid, DAY0_CLI_PATH, &actions, nullptr, cargv.data(), environ) != 0) {
            day0::bench::fail("serve_client_bench", "cannot start day0 serve");
        }
        posix_spawn_file_actions_destroy(&actions);
        const std::regex printed(R"(http://127\.0\.0\.1:\d+)");
        for (int i = 0; i < 1200 && m_url.empty(); ++i) {
            std::smatch m;
            const std::string text = readFile(m_out);
            if (std::regex_search(text, m, printed)) {
                m_url = m[0];
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (m_url.empty()) {
            day0::bench::fail("serve_client_bench", "day0 serve printed no URL");
        }
    }
    ~Day0Server()
    {
        ::kill(m_pid, SIGTERM);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
    }
    [[nodiscard]] const std::string& url() const { return m_url; }

private:
    std::filesystem::path m_out;
    pid_t m_pid = -1;
    std::string m_url;
};

Day0Server& day0Server()
{
    static Day0Server server;
    return server;
}

std::vector<double> g_serveTtft;
std::vector<double> g_runTtft;

void BM_ServeTtft(benchmark::State& state)
{
    day0::serve::BenchOptions o;
    o.url = day0Server().url();
    if (auto ok = day0::serve::discoverEndpoint(o); !ok) {
        day0::bench::fail("serve_client_bench", ok.error().message);
    }
    day0::serve::RequestRecord warm;
    warm.prompt = prompt();
    warm.maxTokens = 2;
    day0::serve::sendCompletion(o, warm); // first-request costs (allocations) off the figure
    for (auto _ : state) {
        day0::serve::RequestRecord r;
        r.prompt = prompt();
        r.maxTokens = 1;
        day0::serve::sendCompletion(o, r);
        if (!r.ok) {
            day0::bench::fail("serve_client_bench", r.errorKind + ": " + r.errorMessage);
        }
        g_serveTtft.push_back(r.ttft);
        state.SetIterationTime(r.ttft);
    }
}
BENCHMARK(BM_ServeTtft)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

void BM_RunTtft(benchmark::State& state)
{
    std::string ids;
    for (const auto id : prompt()) {
        ids += (ids.empty() ? "" : ",") + std::to_string(id);
    }
    const auto out = day0::bench::scratchDir("serve_client_bench") / "run.json";
    for (auto _ : state) {
        if (runDay0({ "run", checkpoint(), "--ids", ids, "--tokens", "1", "--json", "-q",
                        "--no-record" },
                out)
            != 0) {
            day0::bench::fail("serve_client_bench", readFile(out));
        }
        const auto j = json::parse(readFile(out));
        const double prefill = j["target"]["prefill_seconds"].get<double>();
        g_runTtft.push_back(prefill);
        state.SetIterationTime(prefill);
    }
}
BENCHMARK(BM_RunTtft)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

std::vector<double> g_engineTtft;

/// The warm baseline: the same prefill and first greedy pick `day0 run` computes
/// (exec::SequenceDecoder over the checkpoint loaded once, fp32), in this process, after a
/// warm-up, as the server is warm.
void BM_EngineTtft(benchmark::State& state)
{
    day0::Progress progress;
    auto loaded = day0::serve::loadServedModel(checkpoint(), false, progress, {});
    if (!loaded) {
        day0::bench::fail("serve_client_bench", loaded.error().message);
    }
    const auto plan = *day0::exec::parsePrecisionPlan("fp32");
    const auto once = [&] {
        const auto start = Clock::now();
        auto tokens = day0::serve::greedyDecode(*loaded->engine, plan, prompt(), 1, {});
        if (!tokens) {
            day0::bench::fail("serve_client_bench", tokens.error().message);
        }
        return std::chrono::duration<double>(Clock::now() - start).count();
    };
    once();
    for (auto _ : state) {
        const double t = once();
        g_engineTtft.push_back(t);
        state.SetIterationTime(t);
    }
}
BENCHMARK(BM_EngineTtft)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : day0::serve::percentile(v, 50);
}

void printSummary(const day0::bench::BenchTimes&)
{
    for (const auto& [name, f] : g_streams) {
        fmt::print("SSE stream ({} events, {}): client {:.0f} events/s = {:.2f}x the server's "
                   "write rate ({:.0f}/s), {:.2f}x the goal of 10,000/s; client timestamps lag "
                   "the writes p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms; {:.1f}% within 1 ms\n",
            events(), name == "paced" ? "server paced at 10,000/s" : "server at full speed",
            f.clientRate, f.clientRate / f.serverRate, f.serverRate, f.clientRate / 1e4,
            1e3 * f.lagP50, 1e3 * f.lagP99, 1e3 * f.lagMax, 100 * f.within1ms);
    }
    if (!g_serveTtft.empty() && !g_runTtft.empty() && !g_engineTtft.empty()) {
        const double serve = median(g_serveTtft);
        const double run = median(g_runTtft);
        const double engine = median(g_engineTtft);
        fmt::print("TTFT of one {}-token prompt (medians of 5): through day0 serve {:.3f} ms; "
                   "day0 run's prefill_seconds {:.3f} ms (a fresh process each: cold caches); "
                   "the same prefill warm in this process {:.3f} ms. day0 serve / day0 run = "
                   "{:.3f}x, day0 serve / warm prefill = {:.3f}x (goal <= 1.1x)\n",
            prompt().size(), 1e3 * serve, 1e3 * run, 1e3 * engine, serve / run, serve / engine);
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
