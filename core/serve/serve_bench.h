#pragma once

#include "base/progress.h"
#include "base/result.h"

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
    std::int64_t inputTokens = 32; ///< prompt length, token ids drawn uniformly (seeded)
    std::int64_t outputTokens = 16; ///< max_tokens, with ignore_eos so every request runs to it
    int numPrompts = 50;
    /// Requests per second, Poisson arrivals (exponential gaps, seeded); infinity: all at once.
    double requestRate = std::numeric_limits<double>::infinity();
    int maxConcurrency = 0; ///< requests in flight at most; 0: no cap
    std::uint64_t seed = 0;
    int warmups = 1; ///< requests sent one by one first, not measured
    std::vector<double> percentiles { 50, 90, 99 };
    std::int64_t vocab = 0; ///< token ids drawn below this; 0: the endpoint's vocab_size
    double timeoutSeconds = 300; ///< per request, for each read
};

/// What one request saw, times in seconds from its send.
struct RequestRecord {
    int index = 0;
    bool ok = false;
    std::string errorKind; ///< "connection", "http_429", "incomplete_stream", "stream_error", ...
    std::string errorMessage;
    double ttft = 0.0; ///< to the first chunk carrying a token
    double e2el = 0.0; ///< to the last chunk carrying a token
    std::vector<double> itl; ///< gaps between chunks carrying tokens
    std::int64_t promptTokens = 0;
    std::int64_t outputTokens = 0; ///< usage.completion_tokens, else the chunks counted
    std::vector<std::int64_t> tokenIds; ///< choices[0].token_ids where the server sends them
};

/// Mean, median, standard deviation and the asked percentiles of one metric, in milliseconds.
struct MetricSummary {
    std::size_t count = 0;
    double mean = 0.0;
    double median = 0.0;
    double stddev = 0.0;
    std::vector<std::pair<double, double>> percentiles; ///< (p, value)
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
    std::map<std::string, MetricSummary> metrics; ///< ttft, tpot, itl, e2el
    std::map<std::string, int> errorsByKind;
    std::vector<RequestRecord> requests; ///< in index order
};

/// The value below which p percent of `sorted` lies, linearly interpolated between closest
/// ranks (numpy.percentile's default, which vLLM's benchmark uses).
double percentile(const std::vector<double>& sorted, double p);

/// Summarises `seconds` in milliseconds.
MetricSummary summarize(std::vector<double> seconds, const std::vector<double>& percentiles);

/// Runs the warm-ups, then the measured requests, and computes the metrics as vLLM's
/// `vllm bench serve` defines them (vllm/benchmarks/serve.py, calculate_metrics). Failed
/// requests are counted by kind, not fatal; a failed warm-up or an unreachable endpoint is an
/// error. Progress counts requests ended; cancellable (requests in flight finish).
Result<BenchResult> runServeBench(
    const BenchOptions& options, Progress& progress, std::stop_token stop);

/// The result as JSON (metric values in ms, vLLM's key names: mean_ttft_ms, p99_ttft_ms, ...).
nlohmann::json benchJson(const BenchResult& result);

} // namespace day0::serve
