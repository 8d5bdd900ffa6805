#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "serve/bench_metrics.h"
#include "serve/bench_workload.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::serve {

/// One load level of `day0 bench serve` against an OpenAI-compatible /v1/completions endpoint.
struct BenchOptions {
    std::string url; ///< "http://host:port"
    std::string model; ///< empty: the first model of GET /v1/models
    /// Prompt lengths (token ids drawn uniformly, seeded) and max_tokens, with ignore_eos so
    /// every request runs to it.
    LengthOptions lengths;
    int numPrompts = 50;
    ArrivalOptions arrivals; ///< when requests are sent (rate, burstiness, ramp-up)
    int maxConcurrency = 0; ///< requests in flight at most; 0: no cap
    std::uint64_t seed = 0;
    int warmups = 1; ///< requests sent one by one first, not measured
    std::vector<double> percentiles { 50, 90, 99 };
    std::int64_t vocab = 0; ///< token ids drawn below this; 0: the endpoint's vocab_size
    double timeoutSeconds = 300; ///< per request, for each read
    SloSet slos; ///< --goodput objectives; none: no goodput
    int logprobs = -1; ///< `logprobs` asked of each request (-1: not asked)
};

/// What one request saw, times in seconds from its send.
struct RequestRecord {
    int index = 0;
    bool ok = false;
    /// http_<status>, timeout, connection_refused, connection_lost, malformed_stream,
    /// stream_error (errorKinds() describes each).
    std::string errorKind;
    std::string errorMessage;
    double sentAt = 0.0; ///< seconds from the level's start
    /// steady_clock seconds (since its epoch) when the request was sent: the other times plus
    /// this are comparable with another steady_clock reading on the same machine.
    double sendClock = 0.0;
    std::vector<std::int64_t> prompt; ///< the token ids sent
    std::int64_t maxTokens = 0;
    double ttft = 0.0; ///< to the first chunk carrying a token
    double e2el = 0.0; ///< to the last chunk carrying a token
    std::vector<double> itl; ///< gaps between chunks carrying tokens
    /// To its end: the response's end when it completed, its failure (error status,
    /// transport error, timeout, malformed event) when it failed; 0 when never sent.
    double ended = 0.0;
    std::int64_t promptTokens = 0;
    std::int64_t outputTokens = 0; ///< usage.completion_tokens, else the chunks counted
    std::vector<std::int64_t> tokenIds; ///< choices[0].token_ids where the server sends them
    /// The chosen tokens' log-probabilities, where asked (logprobs >= 0) and sent.
    std::vector<double> tokenLogprobs;
};

struct BenchResult {
    BenchOptions options;
    double durationSeconds = 0.0; ///< first send to last completion (warm-ups excluded)
    int completed = 0;
    int failed = 0;
    std::int64_t totalInput = 0; ///< of completed requests
    std::int64_t totalOutput = 0;
    double requestThroughput = 0.0; ///< completed / duration
    double outputThroughput = 0.0; ///< output tokens / duration
    double totalTokenThroughput = 0.0; ///< (input + output tokens) / duration
    std::map<std::string, MetricSummary> metrics; ///< ttft, tpot, itl, e2el (ms)
    /// Output tokens per second per user (AIPerf's output_token_throughput_per_user): per
    /// request with more than one output token, 1 / its TPOT.
    MetricSummary perUser;
    int good = 0; ///< completed requests meeting every --goodput objective
    double goodput = 0.0; ///< good / duration, req/s (vLLM's request_goodput)
    std::map<std::string, int> errorsByKind;
    std::vector<RequestRecord> requests; ///< in index order
};

/// Reads the model id (the first listed unless `options.model` names one) and, unless given,
/// the vocab size from GET /v1/models. Errors name the URL.
Result<void> discoverEndpoint(BenchOptions& options);

/// Sends one streamed completion of `record.prompt` asking `record.maxTokens` tokens, as every
/// bench request is sent, and fills `record` (never throws; a failure sets errorKind).
void sendCompletion(const BenchOptions& options, RequestRecord& record);

/// The error kinds a request can end with and what each means, for --help and the docs.
const std::vector<std::pair<std::string, std::string>>& errorKinds();

/// Fills `r`'s counts, throughputs, metrics and goodput from `r.requests` and
/// `r.durationSeconds` (what runServeBench does after the requests end).
void computeMetrics(BenchResult& r);

/// Runs the warm-ups, then the measured requests, and computes the metrics as vLLM's
/// `vllm bench serve` defines them (vllm/benchmarks/serve.py, calculate_metrics). Failed
/// requests are counted by kind, not fatal; a failed warm-up or an unreachable endpoint is an
/// error. Progress counts requests ended; cancellable (requests in flight finish).
Result<BenchResult> runServeBench(
    const BenchOptions& options, Progress& progress, std::stop_token stop);

/// The result as JSON (metric values in ms, vLLM's key names: mean_ttft_ms, p99_ttft_ms, ...).
nlohmann::json benchJson(const BenchResult& result);

} // namespace day0::serve
