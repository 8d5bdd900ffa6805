// day0 bench serve <url>: a load client for any OpenAI-compatible /v1/completions endpoint
// (core/serve/serve_bench.h); metrics as vLLM's `vllm bench serve` defines them.
#include "actions/staged_bench.h"
#include "cmd_bench_report.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "serve/bench_check.h"
#include "serve/bench_plan.h"
#include "serve/serve_bench.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace day0::cli {

namespace {

struct BenchServeArgs {
    serve::BenchOptions options;
    std::string percentiles = "50,90,99";
    double requestRate = 0.0; ///< 0: infinity (all at once)
    std::string rampUp; ///< "", "linear", "exponential"
    std::string stages; ///< "concurrency=1,concurrency=4,rate=20": load levels run in order
    std::string sweep; ///< "rate=1,2,4" or "concurrency=1,2,8": one level per value
    std::vector<std::string> goodput; ///< "ttft:500", "tpot:50", "e2el:2000"
    std::string lengthsFile;
    std::string check; ///< checkpoint whose greedy tokens the answers must equal
    std::string checkPrecision = "fp32";
    double logprobTolerance = 1e-3;
    std::string plan; ///< --plan: the planner's TTFT/TPOT beside the measured ones
    std::string cluster = "h100-sxm:1x1";
    std::string planModel; ///< default: --check's checkpoint
};

nlohmann::json levelPlanJson(const serve::PlanPrediction& p, const serve::BenchResult& r)
{
    return serve::planJson(p, r.metrics.at("ttft").mean, r.metrics.at("tpot").mean);
}

void printPlan(const nlohmann::json& p)
{
    const auto error = [](const nlohmann::json& e) {
        return e.is_null() ? std::string("n/a") : fmt::format("{:+.1f}%", 100 * e.get<double>());
    };
    fmt::print("{:-^50}\n", " Planner ");
    fmt::print("{} on {}, batch {}\n", p["layout"].get<std::string>(),
        p["cluster"].get<std::string>(), p["batch"].get<int>());
    fmt::print("{:<12}{:>14}{:>14}{:>10}\n", "", "predicted ms", "measured ms", "error");
    for (const std::string name : { "ttft", "tpot" }) {
        fmt::print("{:<12}{:>14.4g}{:>14.4g}{:>10}\n", name == "ttft" ? "Mean TTFT" : "Mean TPOT",
            p[name + "_ms"].get<double>(), p["measured_" + name + "_ms"].get<double>(),
            error(p[name + "_error"]));
    }
}

/// One load level of --stages or --sweep; a field left unset keeps the flags' value.
struct Stage {
    std::string label;
    std::optional<int> concurrency; ///< 0: no cap
    std::optional<double> rate; ///< infinity: all at once
};

Result<Stage> parseLevel(const std::string& key, const std::string& value, const char* flag)
{
    Stage stage;
    stage.label = key + "=" + value;
    try {
        std::size_t used = 0;
        if (key == "concurrency") {
            stage.concurrency = std::stoi(value, &used);
            if (*stage.concurrency < 1) {
                throw std::invalid_argument(value);
            }
        } else if (key == "rate") {
            stage.rate = value == "inf" ? std::numeric_limits<double>::infinity()
                                        : std::stod(value, &used);
            used = value == "inf" ? value.size() : used;
            if (!(*stage.rate > 0.0)) {
                throw std::invalid_argument(value);
            }
        } else {
            throw std::invalid_argument(key);
        }
        if (used != value.size()) {
            throw std::invalid_argument(value);
        }
    } catch (const std::exception&) {
        return Error::badInput(
            fmt::format("{}: '{}' is not concurrency=N (N >= 1) or rate=R (R > 0 req/s or inf)",
                flag, stage.label));
    }
    return stage;
}

/// --stages: each level names its own kind; a concurrency level sends all at once, a rate level
/// without a cap (the first slice's meaning, kept).
Result<std::vector<Stage>> parseStages(const std::string& text)
{
    std::vector<Stage> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        const auto eq = item.find('=');
        auto stage = parseLevel(item.substr(0, eq),
            eq == std::string::npos ? std::string() : item.substr(eq + 1), "--stages");
        if (!stage) {
            return stage.error();
        }
        if (stage->concurrency) {
            stage->rate = std::numeric_limits<double>::infinity();
        } else {
            stage->concurrency = 0;
        }
        out.push_back(*stage);
    }
    if (out.empty()) {
        return Error::badInput("--stages: no load level given");
    }
    return out;
}

/// --sweep KEY=V1,V2,...: one level per value, the other flags kept.
Result<std::vector<Stage>> parseSweep(const std::string& text)
{
    const auto eq = text.find('=');
    if (eq == std::string::npos) {
        return Error::badInput(
            fmt::format("--sweep: '{}' is not rate=R1,R2,... or concurrency=N1,N2,...", text));
    }
    const std::string key = text.substr(0, eq);
    std::vector<Stage> out;
    std::stringstream in(text.substr(eq + 1));
    std::string value;
    while (std::getline(in, value, ',')) {
        auto stage = parseLevel(key, value, "--sweep");
        if (!stage) {
            return stage.error();
        }
        out.push_back(*stage);
    }
    if (out.empty()) {
        return Error::badInput("--sweep: no value given");
    }
    return out;
}

Result<serve::BenchOptions> baseOptions(const BenchServeArgs& a)
{
    serve::BenchOptions o = a.options;
    auto percentiles = serve::parsePercentiles(a.percentiles);
    if (!percentiles) {
        return percentiles.error();
    }
    o.percentiles = *percentiles;
    o.arrivals.rate = a.requestRate > 0 ? a.requestRate : std::numeric_limits<double>::infinity();
    if (a.rampUp == "linear") {
        o.arrivals.ramp = serve::RampUp::Linear;
    } else if (a.rampUp == "exponential") {
        o.arrivals.ramp = serve::RampUp::Exponential;
    } else if (!a.rampUp.empty()) {
        return Error::badInput(
            fmt::format("--ramp-up: '{}' is not linear or exponential", a.rampUp));
    }
    if (!a.goodput.empty()) {
        auto slos = serve::parseSlos(a.goodput);
        if (!slos) {
            return slos.error();
        }
        o.slos = *slos;
    }
    if (!a.lengthsFile.empty()) {
        auto pairs = serve::readLengthsFile(a.lengthsFile);
        if (!pairs) {
            return pairs.error();
        }
        o.lengths.fromFile = std::move(*pairs);
    }
    DAY0_TRY(serve::checkArrivals(o.arrivals));
    return o;
}

Result<std::vector<Stage>> levelsOf(const BenchServeArgs& a)
{
    if (!a.stages.empty() && !a.sweep.empty()) {
        return Error::badInput("--stages and --sweep cannot be given together");
    }
    if (!a.stages.empty()) {
        return parseStages(a.stages);
    }
    if (!a.sweep.empty()) {
        return parseSweep(a.sweep);
    }
    return std::vector<Stage> { Stage { "", std::nullopt, std::nullopt } };
}

void printCheck(const serve::LevelCheck& c, const std::string& checkpoint)
{
    fmt::print("{:-^50}\n", " Check ");
    fmt::print("Against {}'s greedy tokens: {} requests compared, {} diverge", checkpoint,
        c.checked, c.divergences.size());
    if (c.logprobsCompared > 0) {
        fmt::print("; log-probabilities of {} compared, max |delta| {:.3g}", c.logprobsCompared,
            c.maxLogprobDelta);
    }
    fmt::print("\n");
    for (const auto& d : c.divergences) {
        fmt::print("  {}\n", serve::describeDivergence(d));
    }
}

/// The levels of `a` as the staged bench runs them: each --stages/--sweep level with the flags'
/// lengths and prompt count, its concurrency and rate, where it sets none, the flags'.
std::vector<actions::BenchStage> benchStages(
    const std::vector<Stage>& levels, const serve::BenchOptions& base)
{
    std::vector<actions::BenchStage> out;
    for (const auto& level : levels) {
        actions::BenchStage s;
        s.concurrency = level.concurrency.value_or(base.maxConcurrency);
        s.rate = level.rate.value_or(base.arrivals.rate);
        s.inputTokens = base.lengths.inputTokens;
        s.outputTokens = base.lengths.outputTokens;
        s.numPrompts = base.numPrompts;
        out.push_back(s);
    }
    return out;
}

/// Prints one finished level (text mode), as it ends.
void printLevel(const actions::BenchLevelOutcome& level, std::size_t index, std::size_t count,
    const std::string& checkpoint)
{
    if (count > 1) {
        fmt::print("{:=^50}\n", fmt::format(" level {} of {}: {} ", index + 1, count, level.label));
    }
    printBenchLevel(level.result);
    if (level.check) {
        printCheck(*level.check, checkpoint);
    }
    if (level.plan) {
        printPlan(levelPlanJson(*level.plan, level.result));
    }
    std::fflush(stdout);
}

nlohmann::json levelJson(const actions::BenchLevelOutcome& level)
{
    auto j = serve::benchJson(level.result);
    if (level.check) {
        j["check"] = serve::checkJson(*level.check);
    }
    if (level.plan) {
        j["plan"] = levelPlanJson(*level.plan, level.result);
    }
    return j;
}

/// The failed requests and divergences of every level, as the error of a failed bench; empty
/// when none.
std::string failures(
    const std::vector<actions::BenchLevelOutcome>& levels, const std::string& check)
{
    int failed = 0;
    std::size_t sent = 0;
    std::string list;
    std::string diverged;
    for (std::size_t s = 0; s < levels.size(); ++s) {
        const auto& r = levels[s].result;
        const std::string where = levels.size() > 1
            ? fmt::format("level {} ({}): ", s + 1, levels[s].label)
            : std::string();
        failed += r.failed;
        sent += r.requests.size();
        for (const auto& q : r.requests) {
            if (!q.ok) {
                list += fmt::format(
                    "\n  {}request {}: {}: {}", where, q.index, q.errorKind, q.errorMessage);
            }
        }
        if (const auto& c = levels[s].check; c && !c->divergences.empty()) {
            diverged += fmt::format("\n  {}{} of {} requests diverge; first: {}", where,
                c->divergences.size(), c->checked,
                serve::describeDivergence(c->divergences.front()));
        }
    }
    std::string message;
    if (failed > 0) {
        message = fmt::format("{} of {} requests failed:{}", failed, sent, list);
    }
    if (!diverged.empty()) {
        message += fmt::format("{}--check: the endpoint's greedy tokens differ from {}'s:{}",
            message.empty() ? "" : "\n", check, diverged);
    }
    return message;
}

int runBenchServe(const BenchServeArgs& a, const GlobalOptions& global)
{
    auto base = baseOptions(a);
    if (!base) {
        return reportError(base.error());
    }
    auto stages = levelsOf(a);
    if (!stages) {
        return reportError(stages.error());
    }
    if (base->arrivals.ramp != serve::RampUp::None) {
        for (const auto& s : *stages) {
            if (s.label.starts_with("rate=")) {
                return reportError(
                    Error::badInput("--ramp-up sets the rate of every level; a "
                                    "rate level in --stages/--sweep contradicts it"));
            }
        }
    }
    actions::StagedBenchRequest request;
    request.url = base->url;
    request.checkpoint = a.check;
    request.precision = a.checkPrecision;
    request.check = !a.check.empty();
    request.logprobTolerance = a.logprobTolerance;
    request.stages = benchStages(*stages, *base);
    request.workload = *base;
    request.plan = a.plan;
    request.cluster = a.cluster;
    request.planModel = a.planModel;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "bench serve", !global.quiet);
    std::size_t ended = 0;
    auto outcome = actions::runStagedBench(
        request, progress, interruptToken(), [&](const actions::BenchLevelOutcome& level) {
            if (!global.json) {
                printLevel(level, ended, stages->size(), a.check);
            }
            ++ended;
        });
    bar.reset();
    if (!outcome) {
        return reportError(outcome.error());
    }
    const auto& levels = outcome->levels;
    const auto runId = recordResult(outcome->record);
    const nlohmann::json runJson = runId ? nlohmann::json(runId->value()) : nlohmann::json();
    if (global.json) {
        if (a.stages.empty() && a.sweep.empty()) {
            auto j = levelJson(levels.front());
            j["run_id"] = runJson;
            fmt::print("{}\n", j.dump(2));
        } else {
            nlohmann::json all = nlohmann::json::array();
            for (const auto& l : levels) {
                auto j = levelJson(l);
                j["level"] = l.label;
                all.push_back(std::move(j));
            }
            fmt::print("{}\n", nlohmann::json { { "stages", all }, { "run_id", runJson } }.dump(2));
        }
    } else if (levels.size() > 1) {
        std::vector<BenchLevel> table;
        for (const auto& l : levels) {
            table.push_back({ l.label, l.result });
        }
        printBenchLevels(table);
    }
    if (const auto message = failures(levels, a.check); !message.empty()) {
        return reportError(Error::checkFailed(message));
    }
    return 0;
}

const bool registered = registerCommand({ "bench",
    "load tests: `bench serve URL` drives an OpenAI-compatible endpoint and reports TTFT, TPOT, "
    "ITL, E2EL percentiles, throughput and goodput",
    57, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        app.require_subcommand(1);
        CLI::App* sub = app.add_subcommand("serve",
            "streamed completions against URL (e.g. http://127.0.0.1:8000): fixed, ranged or "
            "listed lengths; Poisson or gamma arrivals, ramp-up, or a concurrency cap; warm-up "
            "excluded; stages and sweeps; goodput under SLOs");
        sub->fallthrough();
        sub->footer(benchMetricDefinitions());
        auto a = std::make_shared<BenchServeArgs>();
        auto& o = a->options;
        sub->add_option("url", o.url, "the server, http://HOST:PORT")->required();
        sub->add_option("--model", o.model, "model id (default: the first of GET /v1/models)");
        sub->add_option(
               "--input-len", o.lengths.inputTokens, "prompt tokens per request (default 32)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 26));
        sub->add_option("--output-len", o.lengths.outputTokens,
               "max_tokens per request, with ignore_eos (default 16)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 26));
        sub->add_option("--input-range", o.lengths.inputRange,
               "draw prompt lengths uniformly in [len*(1-R), len*(1+R)] (default 0: fixed)")
            ->check(CLI::Range(0.0, 0.999));
        sub->add_option("--output-range", o.lengths.outputRange,
               "draw max_tokens uniformly in [len*(1-R), len*(1+R)] (default 0: fixed)")
            ->check(CLI::Range(0.0, 0.999));
        sub->add_option("--lengths-file", a->lengthsFile,
            "request lengths, one 'INPUT OUTPUT' pair per line, used in order and cycled "
            "(instead of --input-len/--output-len)");
        sub->add_option("--num-prompts", o.numPrompts, "measured requests per level (default 50)")
            ->check(CLI::Range(1, 1000000));
        sub->add_option("--request-rate", a->requestRate,
               "requests per second (default: all at once); gaps Poisson, or gamma with "
               "--burstiness")
            ->check(CLI::Range(0.0, 1e6));
        sub->add_option("--burstiness", o.arrivals.burstiness,
               "gamma shape of the arrival gaps (default 1: Poisson; < 1 burstier)")
            ->check(CLI::Range(1e-3, 1e3));
        sub->add_option("--ramp-up", a->rampUp,
            "linear or exponential: the rate moves from --ramp-start to --ramp-end over the "
            "requests (instead of --request-rate)");
        sub->add_option("--ramp-start", o.arrivals.rampStart, "ramp-up start rate, req/s");
        sub->add_option("--ramp-end", o.arrivals.rampEnd, "ramp-up end rate, req/s");
        sub->add_option("--max-concurrency", o.maxConcurrency,
               "requests in flight at most (default: no cap)")
            ->check(CLI::Range(0, 1000000));
        sub->add_option(
            "--seed", o.seed, "seed of the prompts, lengths and arrival times (default 0)");
        sub->add_option("--warmup", o.warmups, "unmeasured requests sent first (default 1)")
            ->check(CLI::Range(0, 10000));
        sub->add_option("--percentiles", a->percentiles,
            "percentiles of each metric, comma-separated (default 50,90,99)");
        sub->add_option("--goodput", a->goodput,
               "SLOs in ms, e.g. --goodput ttft:500 tpot:50 e2el:2000: goodput counts the "
               "requests meeting every one")
            ->expected(1, 3);
        sub->add_option("--vocab", o.vocab,
               "draw prompt token ids below this (default: the endpoint's vocab_size)")
            ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 32));
        sub->add_option("--stages", a->stages,
            "load levels run in order, e.g. concurrency=1,concurrency=4,rate=20 (each sends "
            "--num-prompts requests; the warm-up precedes the first)");
        sub->add_option("--sweep", a->sweep,
            "one level per value, other flags kept: rate=1,2,4 or concurrency=1,2,8; prints a "
            "row per level and the throughput vs latency table");
        sub->add_option("--check", a->check,
            "checkpoint of the served model: every answer's token_ids must equal its greedy "
            "tokens (and the log-probabilities, where sent, within --check-logprob-tol); the "
            "first divergence of each request and level is reported, exit 1 on any");
        sub->add_option("--check-precision", a->checkPrecision,
            "precision of the reference for --check, as day0 run --precision (default fp32)");
        sub->add_option("--check-logprob-tol", a->logprobTolerance,
               "nats a sent log-probability may differ from the reference's (default 1e-3)")
            ->check(CLI::Range(0.0, 1e9));
        sub->add_option("--plan", a->plan,
            "print the planner's predicted TTFT/TPOT for each level's workload (its mean "
            "lengths; batch: the concurrency cap, else the mean requests in flight) beside the "
            "measured ones, with the error; a plan string, e.g. tp=1");
        sub->add_option("--cluster", a->cluster,
            "the cluster --plan assumes the endpoint runs on (default h100-sxm:1x1)");
        sub->add_option("--plan-model", a->planModel,
            "the served model for --plan: folder, config.json or bundled name (default: "
            "--check's checkpoint)");
        sub->add_option("--timeout", o.timeoutSeconds,
               "seconds a request may wait for each read (default 300)")
            ->check(CLI::Range(1.0, 86400.0));
        return [a, &global] { return runBenchServe(*a, global); };
    } });

} // namespace

} // namespace day0::cli
