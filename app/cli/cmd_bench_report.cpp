#include "cmd_bench_report.h"

#include "table.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

namespace day0::cli {

namespace {

std::string upper(std::string name)
{
    for (auto& c : name) {
        c = char(std::toupper(static_cast<unsigned char>(c)));
    }
    return name;
}

std::string rateText(const serve::ArrivalOptions& a)
{
    if (a.ramp != serve::RampUp::None) {
        return fmt::format(
            "{} ramp {:g} -> {:g} req/s", serve::rampUpName(a.ramp), a.rampStart, a.rampEnd);
    }
    if (std::isinf(a.rate)) {
        return "inf";
    }
    return a.burstiness == 1.0
        ? fmt::format("{:g} req/s (Poisson)", a.rate)
        : fmt::format("{:g} req/s (gamma, burstiness {:g})", a.rate, a.burstiness);
}

/// "p99" of the last asked percentile, and its value in `s`.
std::pair<std::string, double> lastPercentile(const serve::MetricSummary& s)
{
    if (s.percentiles.empty()) {
        return { "p50", s.median };
    }
    return { fmt::format("p{:g}", s.percentiles.back().first), s.percentiles.back().second };
}

} // namespace

void printBenchLevel(const serve::BenchResult& r)
{
    const auto& o = r.options;
    const auto& l = o.lengths;
    const std::string lengths = !l.fromFile.empty()
        ? fmt::format("lengths from a file ({} pairs)", l.fromFile.size())
        : fmt::format("{} input tokens{}, {} output tokens{}", l.inputTokens,
            l.inputRange > 0 ? fmt::format(" ±{:g}%", 100 * l.inputRange) : "", l.outputTokens,
            l.outputRange > 0 ? fmt::format(" ±{:g}%", 100 * l.outputRange) : "");
    fmt::print("day0 bench serve: {} model '{}', {} prompts, {}, rate {}, concurrency {}\n", o.url,
        o.model, o.numPrompts, lengths, rateText(o.arrivals),
        o.maxConcurrency > 0 ? std::to_string(o.maxConcurrency) : std::string("unlimited"));
    fmt::print("{:<38}{:>12}\n", "Successful requests:", r.completed);
    fmt::print("{:<38}{:>12}\n", "Failed requests:", r.failed);
    fmt::print("{:<38}{:>12.3f}\n", "Benchmark duration (s):", r.durationSeconds);
    fmt::print("{:<38}{:>12}\n", "Total input tokens:", r.totalInput);
    fmt::print("{:<38}{:>12}\n", "Total generated tokens:", r.totalOutput);
    fmt::print("{:<38}{:>12.2f}\n", "Request throughput (req/s):", r.requestThroughput);
    if (o.slos.any()) {
        fmt::print("{:<38}{:>12.2f}\n",
            fmt::format("Request goodput (req/s) [{}]:", o.slos.describe()), r.goodput);
        fmt::print("{:<38}{:>12}\n", "Requests meeting every SLO:", r.good);
    }
    fmt::print("{:<38}{:>12.2f}\n", "Output token throughput (tok/s):", r.outputThroughput);
    fmt::print("{:<38}{:>12.2f}\n", "Total token throughput (tok/s):", r.totalTokenThroughput);
    fmt::print("{:<38}{:>12.2f}\n", "Mean tokens/s per user:", r.perUser.mean);
    for (const auto* name : { "ttft", "tpot", "itl", "e2el" }) {
        const auto& s = r.metrics.at(name);
        const std::string big = upper(name);
        fmt::print("{:-^50}\n", fmt::format(" {} ({} values) ", big, s.count));
        fmt::print("{:<38}{:>12.3f}\n", fmt::format("Mean {} (ms):", big), s.mean);
        fmt::print("{:<38}{:>12.3f}\n", fmt::format("Median {} (ms):", big), s.median);
        for (const auto& [p, v] : s.percentiles) {
            fmt::print("{:<38}{:>12.3f}\n", fmt::format("P{:g} {} (ms):", p, big), v);
        }
    }
    if (r.failed > 0) {
        fmt::print("{:-^50}\n", " Errors ");
        for (const auto& [kind, n] : r.errorsByKind) {
            fmt::print("{:<38}{:>12}\n", kind + ":", n);
        }
    }
}

void printBenchLevels(const std::vector<BenchLevel>& levels)
{
    if (levels.empty()) {
        return;
    }
    const bool goodput = levels.front().result.options.slos.any();
    const auto [pTtft, unused] = lastPercentile(levels.front().result.metrics.at("ttft"));
    std::vector<std::string> header { "level", "ok", "failed", "req/s" };
    if (goodput) {
        header.emplace_back("goodput req/s");
    }
    for (const auto* h : { "out tok/s", "median TTFT", "", "median TPOT", "", "errors" }) {
        header.emplace_back(h);
    }
    header[header.size() - 4] = pTtft + " TTFT";
    header[header.size() - 2] = pTtft + " TPOT";
    std::vector<Table::Align> align(header.size(), Table::Align::Right);
    align[0] = Table::Align::Left;
    align.back() = Table::Align::Left;
    Table perLevel(header, align);
    Table pareto(
        { "level", "output tok/s", "tok/s/user (mean)", "tok/s/user (median)", "mean TPOT" },
        { Table::Align::Left, Table::Align::Right, Table::Align::Right, Table::Align::Right,
            Table::Align::Right });
    for (const auto& level : levels) {
        const auto& r = level.result;
        std::string errors;
        for (const auto& [kind, n] : r.errorsByKind) {
            errors += fmt::format("{}{} {}", errors.empty() ? "" : ", ", n, kind);
        }
        std::vector<std::string> row { level.label, std::to_string(r.completed),
            std::to_string(r.failed), fmt::format("{:.2f}", r.requestThroughput) };
        if (goodput) {
            row.push_back(fmt::format("{:.2f}", r.goodput));
        }
        const auto& ttft = r.metrics.at("ttft");
        const auto& tpot = r.metrics.at("tpot");
        row.push_back(fmt::format("{:.1f}", r.outputThroughput));
        row.push_back(fmt::format("{:.2f} ms", ttft.median));
        row.push_back(fmt::format("{:.2f} ms", lastPercentile(ttft).second));
        row.push_back(fmt::format("{:.2f} ms", tpot.median));
        row.push_back(fmt::format("{:.2f} ms", lastPercentile(tpot).second));
        row.push_back(errors.empty() ? "-" : errors);
        perLevel.addRow(std::move(row));
        pareto.addRow({ level.label, fmt::format("{:.1f}", r.outputThroughput),
            fmt::format("{:.1f}", r.perUser.mean), fmt::format("{:.1f}", r.perUser.median),
            fmt::format("{:.2f} ms", tpot.mean) });
    }
    fmt::print("{:=^50}\n{}", " per level ", perLevel.render());
    fmt::print("{:=^50}\n{}", " throughput vs latency ", pareto.render());
}

std::string benchMetricDefinitions()
{
    std::string kinds;
    for (const auto& [kind, meaning] : serve::errorKinds()) {
        kinds += fmt::format("  {}: {}\n", kind, meaning);
    }
    return "Metrics (times from each request's send; failed requests count in none):\n"
           "  TTFT, ITL, E2EL, TPOT as vLLM's `vllm bench serve` (calculate_metrics): TTFT to the\n"
           "  first SSE event carrying a token; ITL the gaps between such events, pooled over\n"
           "  requests; E2EL to the last one; TPOT = (E2EL - TTFT) / (output tokens - 1) per\n"
           "  request with more than one output token (output tokens: usage.completion_tokens).\n"
           "  Percentiles: numpy.percentile's linear interpolation; std: the population one.\n"
           "  Request throughput = completed / duration; output token throughput = output\n"
           "  tokens / duration; total token throughput = (prompt + output tokens) / duration\n"
           "  (vLLM's); the duration runs from the level's first send to its last completion.\n"
           "  Goodput (--goodput ttft:MS tpot:MS e2el:MS), as vLLM's: a completed request is good\n"
           "  only if it meets EVERY given objective (value <= objective; a one-token request's\n"
           "  TPOT is 0); goodput = good requests / duration, in req/s.\n"
           "  tokens/s/user, as AIPerf's output token throughput per user: 1 / TPOT of each\n"
           "  request with more than one output token, then mean and percentiles over requests.\n"
           "Arrivals: gaps ~ Gamma(shape=B, scale=1/(rate*B)) as vLLM's get_request (B =\n"
           "  --burstiness, 1: Poisson), rescaled so the last send falls at N/rate; --ramp-up\n"
           "  linear|exponential moves the rate from --ramp-start to --ramp-end over the requests\n"
           "  (vLLM's ramp-up strategies). Lengths: --input-range R draws uniformly in\n"
           "  [len*(1-R), len*(1+R)] (vLLM's random dataset's range ratio).\n"
           "Error kinds:\n"
        + kinds;
}

} // namespace day0::cli
