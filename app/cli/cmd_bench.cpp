// day0 bench serve <url>: a load client for any OpenAI-compatible /v1/completions endpoint
// (core/serve/serve_bench.h); metrics as vLLM's `vllm bench serve` defines them.
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "serve/serve_bench.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <sstream>

namespace day0::cli {

namespace {

struct BenchServeArgs {
    serve::BenchOptions options;
    std::string percentiles = "50,90,99";
    double requestRate = 0.0; ///< 0: infinity (all at once)
    std::string stages; ///< "concurrency=1,concurrency=4,rate=20": load levels run in order
};

/// One load level of --stages.
struct Stage {
    int concurrency = 0; ///< 0: no cap
    double rate = 0.0; ///< 0: all at once
};

Result<std::vector<Stage>> parseStages(const std::string& text)
{
    std::vector<Stage> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        const auto eq = item.find('=');
        const std::string key = item.substr(0, eq);
        const std::string value = eq == std::string::npos ? std::string() : item.substr(eq + 1);
        Stage stage;
        try {
            std::size_t used = 0;
            if (key == "concurrency") {
                stage.concurrency = std::stoi(value, &used);
                if (stage.concurrency < 1) {
                    throw std::invalid_argument(value);
                }
            } else if (key == "rate") {
                stage.rate = std::stod(value, &used);
                if (!(stage.rate > 0.0)) {
                    throw std::invalid_argument(value);
                }
            } else {
                throw std::invalid_argument(key);
            }
            if (used != value.size()) {
                throw std::invalid_argument(value);
            }
        } catch (const std::exception&) {
            return Error::badInput(fmt::format(
                "--stages: '{}' is not concurrency=N (N >= 1) or rate=R (R > 0 req/s)", item));
        }
        out.push_back(stage);
    }
    if (out.empty()) {
        return Error::badInput("--stages: no load level given");
    }
    return out;
}

Result<std::vector<double>> parsePercentiles(const std::string& text)
{
    std::vector<double> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            std::size_t used = 0;
            const double p = std::stod(item, &used);
            if (used != item.size() || p < 0.0 || p > 100.0) {
                throw std::invalid_argument(item);
            }
            out.push_back(p);
        } catch (const std::exception&) {
            return Error::badInput(
                fmt::format("--percentiles: '{}' is not a percentile between 0 and 100", item));
        }
    }
    if (out.empty()) {
        return Error::badInput("--percentiles: none given");
    }
    return out;
}

void printText(const serve::BenchResult& r)
{
    const auto& o = r.options;
    fmt::print("day0 bench serve: {} model '{}', {} prompts of {} tokens, {} output tokens, "
               "rate {}, concurrency {}\n",
        o.url, o.model, o.numPrompts, o.inputTokens, o.outputTokens,
        std::isinf(o.requestRate) ? std::string("inf") : fmt::format("{:g} req/s", o.requestRate),
        o.maxConcurrency > 0 ? std::to_string(o.maxConcurrency) : std::string("unlimited"));
    fmt::print("{:<34}{:>12}\n", "Successful requests:", r.completed);
    fmt::print("{:<34}{:>12}\n", "Failed requests:", r.failed);
    fmt::print("{:<34}{:>12.3f}\n", "Benchmark duration (s):", r.durationSeconds);
    fmt::print("{:<34}{:>12}\n", "Total input tokens:", r.totalInput);
    fmt::print("{:<34}{:>12}\n", "Total generated tokens:", r.totalOutput);
    fmt::print("{:<34}{:>12.2f}\n", "Request throughput (req/s):", r.requestThroughput);
    fmt::print("{:<34}{:>12.2f}\n", "Output token throughput (tok/s):", r.outputThroughput);
    fmt::print("{:<34}{:>12.2f}\n", "Total token throughput (tok/s):", r.totalTokenThroughput);
    for (const auto* name : { "ttft", "tpot", "itl", "e2el" }) {
        const auto& s = r.metrics.at(name);
        std::string upper(name);
        for (auto& c : upper) {
            c = char(std::toupper(static_cast<unsigned char>(c)));
        }
        fmt::print("{:-^46}\n", fmt::format(" {} ({} values) ", upper, s.count));
        fmt::print("{:<34}{:>12.3f}\n", fmt::format("Mean {} (ms):", upper), s.mean);
        fmt::print("{:<34}{:>12.3f}\n", fmt::format("Median {} (ms):", upper), s.median);
        for (const auto& [p, v] : s.percentiles) {
            fmt::print("{:<34}{:>12.3f}\n", fmt::format("P{:g} {} (ms):", p, upper), v);
        }
    }
    if (r.failed > 0) {
        fmt::print("{:-^46}\n", " Errors ");
        for (const auto& [kind, n] : r.errorsByKind) {
            fmt::print("{:<34}{:>12}\n", kind + ":", n);
        }
    }
}

int runBenchServe(const BenchServeArgs& a, const GlobalOptions& global)
{
    serve::BenchOptions o = a.options;
    auto percentiles = parsePercentiles(a.percentiles);
    if (!percentiles) {
        return reportError(percentiles.error());
    }
    o.percentiles = *percentiles;
    o.requestRate = a.requestRate > 0 ? a.requestRate : std::numeric_limits<double>::infinity();
    // Without --stages, one level: the one the options give.
    std::vector<Stage> stages { Stage { o.maxConcurrency, a.requestRate } };
    if (!a.stages.empty()) {
        auto parsed = parseStages(a.stages);
        if (!parsed) {
            return reportError(parsed.error());
        }
        stages = *parsed;
    }
    std::vector<serve::BenchResult> results;
    for (std::size_t s = 0; s < stages.size(); ++s) {
        serve::BenchOptions level = o;
        level.maxConcurrency = stages[s].concurrency;
        level.requestRate
            = stages[s].rate > 0 ? stages[s].rate : std::numeric_limits<double>::infinity();
        level.warmups = s == 0 ? o.warmups : 0; // the server is warm after the first level
        Progress progress;
        std::optional<ProgressBar> bar;
        bar.emplace(
            progress, fmt::format("bench serve {}/{}", s + 1, stages.size()), !global.quiet);
        auto result = serve::runServeBench(level, progress, interruptToken());
        bar.reset();
        if (!result) {
            return reportError(result.error());
        }
        if (!global.json) {
            if (stages.size() > 1) {
                fmt::print("{:=^46}\n", fmt::format(" stage {} of {} ", s + 1, stages.size()));
            }
            printText(*result);
        }
        results.push_back(std::move(*result));
    }
    if (global.json) {
        if (a.stages.empty()) {
            fmt::print("{}\n", serve::benchJson(results.front()).dump(2));
        } else {
            nlohmann::json all = nlohmann::json::array();
            for (const auto& r : results) {
                all.push_back(serve::benchJson(r));
            }
            fmt::print("{}\n", nlohmann::json { { "stages", all } }.dump(2));
        }
    }
    int failed = 0;
    std::size_t sent = 0;
    std::string list;
    for (std::size_t s = 0; s < results.size(); ++s) {
        failed += results[s].failed;
        sent += results[s].requests.size();
        for (const auto& r : results[s].requests) {
            if (!r.ok) {
                list += fmt::format("\n  {}request {}: {}: {}",
                    results.size() > 1 ? fmt::format("stage {} ", s + 1) : std::string(), r.index,
                    r.errorKind, r.errorMessage);
            }
        }
    }
    if (failed > 0) {
        return reportError(
            Error::checkFailed(fmt::format("{} of {} requests failed:{}", failed, sent, list)));
    }
    return 0;
}

const bool registered = registerCommand({ "bench",
    "load tests: `bench serve URL` drives an OpenAI-compatible endpoint and reports TTFT, TPOT, "
    "ITL, E2EL percentiles and throughput",
    57, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        app.require_subcommand(1);
        CLI::App* sub = app.add_subcommand("serve",
            "streamed completions against URL (e.g. http://127.0.0.1:8000): fixed input and "
            "output lengths, Poisson arrivals or a concurrency cap, warm-up excluded");
        sub->fallthrough();
        auto a = std::make_shared<BenchServeArgs>();
        auto& o = a->options;
        sub->add_option("url", o.url, "the server, http://HOST:PORT")->required();
        sub->add_option("--model", o.model, "model id (default: the first of GET /v1/models)");
        sub->add_option("--input-len", o.inputTokens, "prompt tokens per request (default 32)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 26));
        sub->add_option("--output-len", o.outputTokens,
               "max_tokens per request, with ignore_eos (default 16)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 26));
        sub->add_option("--num-prompts", o.numPrompts, "measured requests (default 50)")
            ->check(CLI::Range(1, 1000000));
        sub->add_option("--request-rate", a->requestRate,
               "requests per second, Poisson arrivals (default: all at once)")
            ->check(CLI::Range(0.0, 1e6));
        sub->add_option("--max-concurrency", o.maxConcurrency,
               "requests in flight at most (default: no cap)")
            ->check(CLI::Range(0, 1000000));
        sub->add_option("--seed", o.seed, "seed of the prompts and arrival times (default 0)");
        sub->add_option("--warmup", o.warmups, "unmeasured requests sent first (default 1)")
            ->check(CLI::Range(0, 10000));
        sub->add_option("--percentiles", a->percentiles,
            "percentiles of each metric, comma-separated (default 50,90,99)");
        sub->add_option("--vocab", o.vocab,
               "draw prompt token ids below this (default: the endpoint's vocab_size)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 32));
        sub->add_option("--stages", a->stages,
            "load levels run in order, e.g. concurrency=1,concurrency=4,rate=20 (each sends "
            "--num-prompts requests; the warm-up precedes the first)");
        sub->add_option("--timeout", o.timeoutSeconds,
               "seconds a request may wait for each read (default 300)")
            ->check(CLI::Range(1.0, 86400.0));
        return [a, &global] { return runBenchServe(*a, global); };
    } });

} // namespace

} // namespace day0::cli
