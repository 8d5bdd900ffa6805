#include "serve/serve_bench.h"

#include "serve/openai_protocol.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

namespace day0::serve {

namespace {

using BenchClock = std::chrono::steady_clock;

double secondsBetween(BenchClock::time_point a, BenchClock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

std::unique_ptr<httplib::Client> makeClient(const std::string& url, double timeoutSeconds)
{
    auto client = std::make_unique<httplib::Client>(url);
    const auto seconds = std::time_t(std::max(1.0, std::ceil(timeoutSeconds)));
    client->set_connection_timeout(10, 0);
    client->set_read_timeout(seconds, 0);
    client->set_write_timeout(seconds, 0);
    // cpp-httplib writes a request's headers and body apart: with Nagle's algorithm on, the body
    // waits for the server's (delayed) ACK of the headers, which adds to every TTFT.
    client->set_tcp_nodelay(true);
    return client;
}

} // namespace

Result<void> discoverEndpoint(BenchOptions& o)
{
    auto client = makeClient(o.url, o.timeoutSeconds);
    auto res = client->Get("/v1/models");
    if (!res) {
        return Error::badInput(fmt::format(
            "{}/v1/models: cannot connect ({})", o.url, httplib::to_string(res.error())));
    }
    if (res->status != 200) {
        return Error::badInput(fmt::format("{}/v1/models: HTTP {}", o.url, res->status));
    }
    const auto json = nlohmann::json::parse(res->body, nullptr, false);
    if (json.is_discarded() || !json.contains("data") || !json["data"].is_array()) {
        return Error::badInput(fmt::format("{}/v1/models: not an OpenAI model list", o.url));
    }
    const nlohmann::json* card = nullptr;
    for (const auto& m : json["data"]) {
        if (o.model.empty() || m.value("id", std::string()) == o.model) {
            card = &m;
            break;
        }
    }
    if (card == nullptr) {
        return Error::badInput(
            fmt::format("{}/v1/models does not list model '{}'", o.url, o.model));
    }
    o.model = card->value("id", std::string());
    if (o.vocab <= 0) {
        if (!card->contains("vocab_size") || !(*card)["vocab_size"].is_number_integer()) {
            return Error::badInput(fmt::format("{}/v1/models gives no vocab_size for '{}'; give "
                                               "--vocab to draw prompt token ids",
                o.url, o.model));
        }
        o.vocab = (*card)["vocab_size"].get<std::int64_t>();
    }
    return success();
}

namespace {

/// The kind of a transport failure: httplib 0.11 reports a read timeout as a read error, so a
/// read that ended after the whole --timeout without a byte is told apart by the clock.
std::string transportKind(httplib::Error error, double idleSeconds, double timeoutSeconds)
{
    switch (error) {
    case httplib::Error::Connection:
        return "connection_refused";
    case httplib::Error::ConnectionTimeout:
        return "timeout";
    case httplib::Error::Read:
        return idleSeconds >= 0.95 * timeoutSeconds ? "timeout" : "connection_lost";
    default:
        return "connection_lost";
    }
}

} // namespace

void sendCompletion(const BenchOptions& o, RequestRecord& r)
{
    r.promptTokens = std::int64_t(r.prompt.size());
    nlohmann::json body = { { "model", o.model }, { "prompt", r.prompt },
        { "max_tokens", r.maxTokens }, { "temperature", 0 }, { "ignore_eos", true },
        { "stream", true }, { "stream_options", { { "include_usage", true } } } };
    if (o.logprobs >= 0) {
        body["logprobs"] = o.logprobs;
    }
    auto client = makeClient(o.url, o.timeoutSeconds);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    int status = 0;
    req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        return true;
    };
    std::string raw; // the whole body, for an error's message
    std::string pending; // SSE bytes not yet split into events
    bool done = false;
    bool sawToken = false;
    BenchClock::time_point last;
    std::int64_t chunks = 0;
    std::optional<std::int64_t> usage;
    const auto start = BenchClock::now();
    r.sendClock = std::chrono::duration<double>(start.time_since_epoch()).count();
    // Every way out below (completed, an error status, a transport error) stamps the end.
    struct EndStamp {
        RequestRecord& record;
        BenchClock::time_point start;
        ~EndStamp() { record.ended = secondsBetween(start, BenchClock::now()); }
    } endStamp { r, start };
    auto lastByte = start;
    const auto malformed = [&](std::string message) {
        if (r.errorKind.empty()) {
            r.errorKind = "malformed_stream";
            r.errorMessage = std::move(message);
        }
    };
    const auto onEvent = [&](std::string_view data, BenchClock::time_point at) {
        if (data == "[DONE]") {
            done = true;
            return;
        }
        const auto json = nlohmann::json::parse(data, nullptr, false);
        if (json.is_discarded() || !json.is_object()) {
            malformed(fmt::format("an event is not a JSON object: {}", data.substr(0, 200)));
            return;
        }
        if (json.contains("error")) {
            r.errorKind = "stream_error";
            r.errorMessage = json["error"].is_object()
                ? json["error"].value("message", json["error"].dump())
                : json["error"].dump();
            return;
        }
        if (json.contains("usage") && json["usage"].is_object()
            && json["usage"].contains("completion_tokens")
            && json["usage"]["completion_tokens"].is_number_integer()) {
            usage = json["usage"]["completion_tokens"].get<std::int64_t>();
        }
        if (!json.contains("choices") || !json["choices"].is_array() || json["choices"].empty()) {
            return;
        }
        const auto& c = json["choices"][0];
        const bool hasText
            = c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty();
        const bool hasIds
            = c.contains("token_ids") && c["token_ids"].is_array() && !c["token_ids"].empty();
        if (!hasText && !hasIds) {
            return; // a finish or usage chunk carries no token
        }
        if (hasIds) {
            for (const auto& id : c["token_ids"]) {
                if (!id.is_number_integer()) {
                    malformed(fmt::format("token_ids holds {}", id.dump()));
                    return;
                }
                r.tokenIds.push_back(id.get<std::int64_t>());
            }
        }
        if (c.contains("logprobs") && c["logprobs"].is_object()
            && c["logprobs"].contains("token_logprobs")
            && c["logprobs"]["token_logprobs"].is_array()) {
            for (const auto& lp : c["logprobs"]["token_logprobs"]) {
                r.tokenLogprobs.push_back(lp.is_number() ? lp.get<double>() : std::nan(""));
            }
        }
        if (!sawToken) {
            r.ttft = secondsBetween(start, at);
            sawToken = true;
        } else {
            r.itl.push_back(secondsBetween(last, at));
        }
        last = at;
        ++chunks;
    };
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        const auto at = BenchClock::now();
        lastByte = at;
        raw.append(data, n);
        if (status != 200) {
            return true;
        }
        pending.append(data, n);
        std::size_t end = 0;
        while ((end = pending.find("\n\n")) != std::string::npos) {
            std::size_t lineStart = 0;
            while (lineStart < end) {
                auto lineEnd = pending.find('\n', lineStart);
                if (lineEnd == std::string::npos || lineEnd > end) {
                    lineEnd = end;
                }
                const std::string_view line(pending.data() + lineStart, lineEnd - lineStart);
                if (line.starts_with("data:")) {
                    auto payload = line.substr(5);
                    if (!payload.empty() && payload.front() == ' ') {
                        payload.remove_prefix(1);
                    }
                    onEvent(payload, at);
                }
                lineStart = lineEnd + 1;
            }
            pending.erase(0, end + 2);
        }
        return true;
    };
    auto res = client->send(req);
    if (!res) {
        const double idle = secondsBetween(lastByte, BenchClock::now());
        r.errorKind = transportKind(res.error(), idle, o.timeoutSeconds);
        r.errorMessage = r.errorKind == "timeout"
            ? fmt::format("no byte for {:g} s (--timeout; cpp-httplib: {})", o.timeoutSeconds,
                httplib::to_string(res.error()))
            : httplib::to_string(res.error());
        return;
    }
    if (res->status != 200) {
        r.errorKind = fmt::format("http_{}", res->status);
        const auto json = nlohmann::json::parse(raw, nullptr, false);
        r.errorMessage = !json.is_discarded() && json.is_object() && json.contains("error")
                && json["error"].is_object()
            ? json["error"].value("message", std::string())
            : raw.substr(0, 200);
        return;
    }
    if (!r.errorKind.empty()) {
        return;
    }
    if (!done) {
        malformed("the stream ended without data: [DONE]");
        return;
    }
    if (!sawToken) {
        malformed("the stream carried no token");
        return;
    }
    r.e2el = secondsBetween(start, last);
    r.outputTokens = usage.value_or(chunks);
    r.ok = true;
}

namespace {

/// The warm-up prompts come from their own stream, so every level of one seed sends the same
/// measured prompts whatever its warm-up count.
constexpr std::uint64_t kWarmupStream = 0x9e3779b97f4a7c15ULL;

std::vector<std::int64_t> drawPrompt(std::int64_t length, std::int64_t vocab, std::mt19937_64& rng)
{
    std::uniform_int_distribution<std::int64_t> token(0, vocab - 1);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(length));
    for (auto& id : ids) {
        id = token(rng);
    }
    return ids;
}

} // namespace

const std::vector<std::pair<std::string, std::string>>& errorKinds()
{
    static const std::vector<std::pair<std::string, std::string>> kinds = {
        { "http_<status>", "the endpoint answered with that HTTP status (429: queue full)" },
        { "timeout", "no byte for --timeout seconds (or the connection was not accepted in 10 s)" },
        { "connection_refused", "no connection could be opened (refused or unreachable)" },
        { "connection_lost", "the connection closed or reset before the response ended" },
        { "malformed_stream",
            "an event was not JSON, the stream ended without data: [DONE], or carried no token" },
        { "stream_error", "the stream carried an error event" },
    };
    return kinds;
}

void computeMetrics(BenchResult& r)
{
    const auto& o = r.options;
    r.completed = r.failed = r.good = 0;
    r.totalInput = r.totalOutput = 0;
    r.errorsByKind.clear();
    std::vector<double> ttft;
    std::vector<double> tpot;
    std::vector<double> itl;
    std::vector<double> e2el;
    std::vector<double> perUser;
    for (const auto& q : r.requests) {
        if (!q.ok) {
            ++r.failed;
            ++r.errorsByKind[q.errorKind];
            continue;
        }
        ++r.completed;
        r.totalInput += q.promptTokens;
        r.totalOutput += q.outputTokens;
        ttft.push_back(q.ttft);
        e2el.push_back(q.e2el);
        itl.insert(itl.end(), q.itl.begin(), q.itl.end());
        const double t = requestTpot(q.ttft, q.e2el, q.outputTokens);
        if (q.outputTokens > 1) {
            tpot.push_back(t);
            if (t > 0) {
                perUser.push_back(1.0 / t);
            }
        }
        if (o.slos.any() && o.slos.met(q.ttft, t, q.e2el)) {
            ++r.good;
        }
    }
    if (r.durationSeconds > 0) {
        r.requestThroughput = r.completed / r.durationSeconds;
        r.outputThroughput = double(r.totalOutput) / r.durationSeconds;
        r.totalTokenThroughput = double(r.totalInput + r.totalOutput) / r.durationSeconds;
        r.goodput = r.good / r.durationSeconds;
    }
    r.metrics["ttft"] = summarize(ttft, o.percentiles);
    r.metrics["tpot"] = summarize(tpot, o.percentiles);
    r.metrics["itl"] = summarize(itl, o.percentiles);
    r.metrics["e2el"] = summarize(e2el, o.percentiles);
    r.perUser = summarize(perUser, o.percentiles, 1.0);
}

Result<BenchResult> runServeBench(
    const BenchOptions& options, Progress& progress, std::stop_token stop)
{
    BenchOptions o = options;
    if (o.numPrompts < 1 || o.lengths.inputTokens < 1 || o.lengths.outputTokens < 1) {
        return Error::badInput("--num-prompts, --input-len and --output-len must be at least 1");
    }
    if (o.lengths.inputRange < 0 || o.lengths.inputRange >= 1 || o.lengths.outputRange < 0
        || o.lengths.outputRange >= 1) {
        return Error::badInput("--input-range and --output-range must be in [0, 1)");
    }
    DAY0_TRY(checkArrivals(o.arrivals));
    DAY0_TRY(discoverEndpoint(o));
    std::mt19937_64 warmRng(o.seed ^ kWarmupStream);
    progress.setStage("warm-up");
    for (int w = 0; w < o.warmups; ++w) {
        RequestRecord r;
        r.prompt = drawPrompt(o.lengths.inputTokens, o.vocab, warmRng);
        r.maxTokens = o.lengths.outputTokens;
        sendCompletion(o, r);
        if (!r.ok) {
            return Error::checkFailed(fmt::format(
                "{}: the warm-up request failed ({}: {})", o.url, r.errorKind, r.errorMessage));
        }
    }
    // All prompts, lengths and send times are drawn before the first send, so a seed fixes the
    // load.
    std::mt19937_64 rng(o.seed);
    const auto lengths = requestLengths(o.lengths, o.numPrompts, rng);
    BenchResult result;
    result.requests.resize(std::size_t(o.numPrompts));
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        auto& r = result.requests[i];
        r.index = int(i);
        r.prompt = drawPrompt(lengths[i].first, o.vocab, rng);
        r.maxTokens = lengths[i].second;
    }
    const auto times = arrivalTimes(o.arrivals, o.numPrompts, rng);
    progress.setStage("requests");
    progress.setTotal(o.numPrompts);
    std::mutex mutex;
    std::condition_variable slotFree;
    int inFlight = 0;
    std::vector<std::thread> threads;
    const auto t0 = BenchClock::now();
    for (int i = 0; i < o.numPrompts && !stop.stop_requested(); ++i) {
        std::this_thread::sleep_until(t0
            + std::chrono::duration_cast<BenchClock::duration>(
                std::chrono::duration<double>(times[std::size_t(i)])));
        {
            std::unique_lock lock(mutex);
            slotFree.wait(
                lock, [&] { return o.maxConcurrency <= 0 || inFlight < o.maxConcurrency; });
            ++inFlight;
        }
        result.requests[std::size_t(i)].sentAt = secondsBetween(t0, BenchClock::now());
        threads.emplace_back([&, i] {
            auto& r = result.requests[std::size_t(i)];
            sendCompletion(o, r);
            progress.advance();
            {
                const std::lock_guard lock(mutex);
                --inFlight;
            }
            slotFree.notify_all();
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    result.durationSeconds = secondsBetween(t0, BenchClock::now());
    result.options = o;
    // Requests never sent (cancelled) are not in the result.
    result.requests.resize(threads.size());
    computeMetrics(result);
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    return result;
}

nlohmann::json benchJson(const BenchResult& r)
{
    const auto& o = r.options;
    const auto& a = o.arrivals;
    const auto rateJson = [](double rate) {
        return std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate);
    };
    nlohmann::json j = { { "url", o.url }, { "model", o.model },
        { "input_len", o.lengths.inputTokens }, { "output_len", o.lengths.outputTokens },
        { "input_range", o.lengths.inputRange }, { "output_range", o.lengths.outputRange },
        { "lengths_from_file", o.lengths.fromFile.size() }, { "num_prompts", o.numPrompts },
        { "request_rate", rateJson(a.rate) }, { "burstiness", a.burstiness },
        { "ramp_up", rampUpName(a.ramp) },
        { "max_concurrency", o.maxConcurrency > 0 ? nlohmann::json(o.maxConcurrency) : nullptr },
        { "seed", o.seed }, { "warmups", o.warmups }, { "duration", r.durationSeconds },
        { "completed", r.completed }, { "failed", r.failed },
        { "total_input_tokens", r.totalInput }, { "total_output_tokens", r.totalOutput },
        { "request_throughput", r.requestThroughput }, { "output_throughput", r.outputThroughput },
        { "total_token_throughput", r.totalTokenThroughput }, { "errors", r.errorsByKind } };
    if (a.ramp != RampUp::None) {
        j["ramp_start"] = a.rampStart;
        j["ramp_end"] = a.rampEnd;
    }
    if (o.slos.any()) {
        j["goodput_slos"] = o.slos.describe();
        j["good_requests"] = r.good;
        j["request_goodput"] = r.goodput;
    }
    for (const auto& [name, s] : r.metrics) {
        j["mean_" + name + "_ms"] = s.mean;
        j["median_" + name + "_ms"] = s.median;
        j["std_" + name + "_ms"] = s.stddev;
        for (const auto& [p, v] : s.percentiles) {
            j[fmt::format("p{:g}_{}_ms", p, name)] = v;
        }
    }
    j["mean_tokens_per_s_per_user"] = r.perUser.mean;
    j["median_tokens_per_s_per_user"] = r.perUser.median;
    for (const auto& [p, v] : r.perUser.percentiles) {
        j[fmt::format("p{:g}_tokens_per_s_per_user", p)] = v;
    }
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& q : r.requests) {
        if (!q.ok) {
            failed.push_back(
                { { "index", q.index }, { "kind", q.errorKind }, { "message", q.errorMessage } });
        }
    }
    j["failed_requests"] = failed;
    nlohmann::json sends = nlohmann::json::array();
    for (const auto& q : r.requests) {
        sends.push_back({ { "index", q.index }, { "sent_at", q.sentAt },
            { "input_len", q.promptTokens }, { "max_tokens", q.maxTokens }, { "ok", q.ok },
            { "ttft", q.ttft }, { "e2el", q.e2el }, { "output_len", q.outputTokens } });
    }
    j["requests"] = sends;
    return j;
}

} // namespace day0::serve
