#pragma once

#include "actions/bench_record.h"
#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "serve/bench_metrics.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// One load level of a staged bench: how requests arrive and how long they are.
struct BenchStage {
    int concurrency = 0; ///< requests in flight at most; 0: no cap
    double rate = std::numeric_limits<double>::infinity(); ///< req/s; infinity: all at once
    std::int64_t inputTokens = 32; ///< prompt tokens of every request
    std::int64_t outputTokens = 16; ///< max_tokens (ignore_eos) of every request
    int numPrompts = 16;
    /// "concurrency=4", "rate=2", "concurrency=4 rate=2" or "unlimited", then the lengths as
    /// "32→16 tok" (the level's label in the record and the tables).
    [[nodiscard]] std::string label() const;
};

/// The staged load a new serving bench starts from: concurrency 1, 2, 4 and 8 with short prompts,
/// so a CPU-served shrunk checkpoint finishes it in seconds.
std::vector<BenchStage> defaultBenchStages();

/// A staged `bench serve` against an OpenAI-compatible endpoint: a URL, or `checkpoint` served
/// in-process by the OpenAI server (serve::OpenAiServer) on a free loopback port for the run.
struct StagedBenchRequest {
    std::string url; ///< "http://host:port"; empty: serve `checkpoint` in-process
    std::string checkpoint; ///< served when `url` is empty; the reference of `check`
    std::string precision = "fp32"; ///< the in-process server's and the reference's arithmetic
    std::vector<BenchStage> stages;
    serve::SloSet slos; ///< goodput objectives; none: no goodput
    std::vector<double> percentiles { 50, 90, 99 };
    /// Compare every answer's greedy tokens with the reference engine on `checkpoint`
    /// (`bench serve --check`), reporting the first divergence per request and level.
    bool check = false;
    double logprobTolerance = 1e-3; ///< nats
    std::uint64_t seed = 0;
    int warmups = 1; ///< before the first level only, as the CLI's stages
    double timeoutSeconds = 300;
};

/// What a staged bench measured, and its run record (kind run, tool=bench: benchRunRecord).
struct StagedBenchOutcome {
    std::string url; ///< the endpoint driven (the loopback URL when served in-process)
    std::vector<BenchLevelOutcome> levels;
    history::RunRecord record { history::RunKind::Run };
};

/// Runs the stages in order as `day0 bench serve --stages` does (warm-ups before the first only),
/// checking each level against the reference when asked; `onLevel` gets each level as it ends.
/// Errors: no stage, a checkpoint that cannot be served or loaded, an unreachable endpoint, a
/// failed warm-up. Failed requests and divergences are results (the record's status says so).
/// Progress: the reference and server loads, then the running level's requests (reset per
/// level, its stage named). Cancellable: requests in flight finish, then Error::cancelled().
Result<StagedBenchOutcome> runStagedBench(const StagedBenchRequest& request, Progress& progress,
    std::stop_token stop, const std::function<void(const BenchLevelOutcome&)>& onLevel = {});

/// `checkpoint` served by the OpenAI server on 127.0.0.1 at a free port until destroyed (then it
/// refuses new requests, lets those in flight finish, at most 30 s, and stops). The one
/// in-process server of the Serving panel's bench and validate's serving step.
class LocalServer {
public:
    /// Loads `checkpoint` in `precision` (a `day0 run --precision` spelling) and binds; room
    /// for `maxRequests` requests at once (running and queued).
    static Result<std::unique_ptr<LocalServer>> start(const std::string& checkpoint,
        const std::string& precision, int maxRequests, Progress& progress, std::stop_token stop);
    ~LocalServer();
    LocalServer(const LocalServer&) = delete;
    LocalServer& operator=(const LocalServer&) = delete;

    [[nodiscard]] const std::string& url() const;
    /// How the server's decode steps run: batched, or one after another and why
    /// (serve::Scheduler::decodePath).
    [[nodiscard]] std::string decodePath() const;

    struct Impl;

private:
    explicit LocalServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace day0::actions
