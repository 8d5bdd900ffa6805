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
    return client;
}

/// Reads the model id and vocab size from GET /v1/models.
Result<void> discover(BenchOptions& o)
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

/// One streamed completion; fills `r` (never throws).
void sendOne(const BenchOptions& o, const std::vector<std::int64_t>& prompt, RequestRecord& r)
{
    r.promptTokens = std::int64_t(prompt.size());
    const nlohmann::json body = { { "model", o.model }, { "prompt", prompt },
        { "max_tokens", o.outputTokens }, { "temperature", 0 }, { "ignore_eos", true },
        { "stream", true }, { "stream_options", { { "include_usage", true } } } };
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
    const auto onEvent = [&](std::string_view data, BenchClock::time_point at) {
        if (data == "[DONE]") {
            done = true;
            return;
        }
        const auto json = nlohmann::json::parse(data, nullptr, false);
        if (json.is_discarded()) {
            r.errorKind = "bad_event";
            r.errorMessage = fmt::format("not JSON: {}", data.substr(0, 200));
            return;
        }
        if (json.contains("error")) {
            r.errorKind = "stream_error";
            r.errorMessage = json["error"].value("message", json["error"].dump());
            return;
        }
        if (json.contains("usage") && json["usage"].is_object()) {
            usage = json["usage"].value("completion_tokens", std::int64_t(0));
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
                r.tokenIds.push_back(id.get<std::int64_t>());
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
        raw.append(data, n);
        if (status != 200) {
            return true;
        }
        pending.append(data, n);
        std::size_t end = 0;
        while ((end = pending.find("\n\n")) != std::string::npos) {
            const std::string event = pending.substr(0, end);
            pending.erase(0, end + 2);
            std::size_t lineStart = 0;
            while (lineStart < event.size()) {
                auto lineEnd = event.find('\n', lineStart);
                if (lineEnd == std::string::npos) {
                    lineEnd = event.size();
                }
                const std::string_view line(event.data() + lineStart, lineEnd - lineStart);
                if (line.starts_with("data:")) {
                    auto payload = line.substr(5);
                    if (!payload.empty() && payload.front() == ' ') {
                        payload.remove_prefix(1);
                    }
                    onEvent(payload, at);
                }
                lineStart = lineEnd + 1;
            }
        }
        return true;
    };
    auto res = client->send(req);
    if (!res) {
        r.errorKind = "connection";
        r.errorMessage = httplib::to_string(res.error());
        return;
    }
    if (res->status != 200) {
        r.errorKind = fmt::format("http_{}", res->status);
        const auto json = nlohmann::json::parse(raw, nullptr, false);
        r.errorMessage = !json.is_discarded() && json.contains("error")
            ? json["error"].value("message", std::string())
            : raw.substr(0, 200);
        return;
    }
    if (!r.errorKind.empty()) {
        return;
    }
    if (!done) {
        r.errorKind = "incomplete_stream";
        r.errorMessage = "the stream ended without data: [DONE]";
        return;
    }
    if (!sawToken) {
        r.errorKind = "no_tokens";
        r.errorMessage = "the stream carried no token";
        return;
    }
    r.e2el = secondsBetween(start, last);
    r.outputTokens = usage.value_or(chunks);
    r.ok = true;
}

} // namespace

double percentile(const std::vector<double>& sorted, double p)
{
    if (sorted.empty()) {
        return 0.0;
    }
    const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(sorted.size() - 1);
    const auto lo = std::size_t(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

MetricSummary summarize(std::vector<double> seconds, const std::vector<double>& percentiles)
{
    MetricSummary s;
    s.count = seconds.size();
    for (auto& v : seconds) {
        v *= 1000.0;
    }
    std::sort(seconds.begin(), seconds.end());
    if (!seconds.empty()) {
        double sum = 0.0;
        for (const double v : seconds) {
            sum += v;
        }
        s.mean = sum / double(seconds.size());
        double var = 0.0;
        for (const double v : seconds) {
            var += (v - s.mean) * (v - s.mean);
        }
        s.stddev = std::sqrt(var / double(seconds.size())); // numpy.std: population
        s.median = percentile(seconds, 50.0);
    }
    for (const double p : percentiles) {
        s.percentiles.emplace_back(p, percentile(seconds, p));
    }
    return s;
}

Result<BenchResult> runServeBench(
    const BenchOptions& options, Progress& progress, std::stop_token stop)
{
    BenchOptions o = options;
    if (o.numPrompts < 1 || o.inputTokens < 1 || o.outputTokens < 1) {
        return Error::badInput("--num-prompts, --input-len and --output-len must be at least 1");
    }
    if (!(o.requestRate > 0.0)) {
        return Error::badInput(fmt::format("--request-rate must be > 0, got {}", o.requestRate));
    }
    DAY0_TRY(discover(o));
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<std::int64_t> token(0, o.vocab - 1);
    const auto makePrompt = [&] {
        std::vector<std::int64_t> ids(std::size_t(o.inputTokens));
        for (auto& id : ids) {
            id = token(rng);
        }
        return ids;
    };
    progress.setStage("warm-up");
    for (int w = 0; w < o.warmups; ++w) {
        RequestRecord r;
        sendOne(o, makePrompt(), r);
        if (!r.ok) {
            return Error::checkFailed(fmt::format(
                "{}: the warm-up request failed ({}: {})", o.url, r.errorKind, r.errorMessage));
        }
    }
    // All prompts and arrival gaps are drawn before the first send, so a seed fixes the load.
    std::vector<std::vector<std::int64_t>> prompts;
    std::vector<double> gaps;
    std::exponential_distribution<double> gap(std::isinf(o.requestRate) ? 1.0 : o.requestRate);
    for (int i = 0; i < o.numPrompts; ++i) {
        prompts.push_back(makePrompt());
        gaps.push_back(std::isinf(o.requestRate) ? 0.0 : gap(rng));
    }
    BenchResult result;
    result.requests.resize(std::size_t(o.numPrompts));
    progress.setStage("requests");
    progress.setTotal(o.numPrompts);
    std::mutex mutex;
    std::condition_variable slotFree;
    int inFlight = 0;
    std::vector<std::thread> threads;
    const auto t0 = BenchClock::now();
    auto next = t0;
    for (int i = 0; i < o.numPrompts && !stop.stop_requested(); ++i) {
        next += std::chrono::duration_cast<BenchClock::duration>(
            std::chrono::duration<double>(gaps[std::size_t(i)]));
        std::this_thread::sleep_until(next);
        {
            std::unique_lock lock(mutex);
            slotFree.wait(
                lock, [&] { return o.maxConcurrency <= 0 || inFlight < o.maxConcurrency; });
            ++inFlight;
        }
        threads.emplace_back([&, i] {
            auto& r = result.requests[std::size_t(i)];
            r.index = i;
            sendOne(o, prompts[std::size_t(i)], r);
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
    std::vector<double> ttft;
    std::vector<double> tpot;
    std::vector<double> itl;
    std::vector<double> e2el;
    for (std::size_t i = 0; i < threads.size(); ++i) {
        const auto& r = result.requests[i];
        if (!r.ok) {
            ++result.failed;
            ++result.errorsByKind[r.errorKind];
            continue;
        }
        ++result.completed;
        result.totalInput += r.promptTokens;
        result.totalOutput += r.outputTokens;
        ttft.push_back(r.ttft);
        e2el.push_back(r.e2el);
        itl.insert(itl.end(), r.itl.begin(), r.itl.end());
        if (r.outputTokens > 1) {
            tpot.push_back((r.e2el - r.ttft) / double(r.outputTokens - 1));
        }
    }
    // Requests never sent (cancelled) are not in the result.
    result.requests.resize(threads.size());
    if (result.durationSeconds > 0) {
        result.requestThroughput = result.completed / result.durationSeconds;
        result.outputThroughput = double(result.totalOutput) / result.durationSeconds;
        result.totalTokenThroughput
            = double(result.totalInput + result.totalOutput) / result.durationSeconds;
    }
    result.metrics["ttft"] = summarize(ttft, o.percentiles);
    result.metrics["tpot"] = summarize(tpot, o.percentiles);
    result.metrics["itl"] = summarize(itl, o.percentiles);
    result.metrics["e2el"] = summarize(e2el, o.percentiles);
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    return result;
}

nlohmann::json benchJson(const BenchResult& r)
{
    const auto& o = r.options;
    nlohmann::json j = { { "url", o.url }, { "model", o.model }, { "input_len", o.inputTokens },
        { "output_len", o.outputTokens }, { "num_prompts", o.numPrompts },
        { "request_rate",
            std::isinf(o.requestRate) ? nlohmann::json("inf") : nlohmann::json(o.requestRate) },
        { "max_concurrency", o.maxConcurrency > 0 ? nlohmann::json(o.maxConcurrency) : nullptr },
        { "seed", o.seed }, { "warmups", o.warmups }, { "duration", r.durationSeconds },
        { "completed", r.completed }, { "failed", r.failed },
        { "total_input_tokens", r.totalInput }, { "total_output_tokens", r.totalOutput },
        { "request_throughput", r.requestThroughput }, { "output_throughput", r.outputThroughput },
        { "total_token_throughput", r.totalTokenThroughput }, { "errors", r.errorsByKind } };
    for (const auto& [name, s] : r.metrics) {
        j["mean_" + name + "_ms"] = s.mean;
        j["median_" + name + "_ms"] = s.median;
        j["std_" + name + "_ms"] = s.stddev;
        for (const auto& [p, v] : s.percentiles) {
            j[fmt::format("p{:g}_{}_ms", p, name)] = v;
        }
    }
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& q : r.requests) {
        if (!q.ok) {
            failed.push_back(
                { { "index", q.index }, { "kind", q.errorKind }, { "message", q.errorMessage } });
        }
    }
    j["failed_requests"] = failed;
    return j;
}

} // namespace day0::serve
