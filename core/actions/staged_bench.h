#pragma once

#include "actions/bench_record.h"
#include "actions/local_server.h"
#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"
#include "serve/bench_metrics.h"
#include "serve/serve_bench.h"

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
    /// levelLabel of this stage with no other setting: "concurrency=4 32→16 tok".
    [[nodiscard]] std::string label() const;
};

/// The label of a load level in the record, the tables and the errors, the same in every front
/// end: the load ("concurrency=4", "rate=2", "concurrency=4 rate=2", "linear ramp 1→8 req/s" or
/// "unlimited") then the lengths ("32→16 tok", "32±50%→16 tok", "lengths from a file").
std::string levelLabel(const serve::BenchOptions& level);

/// The staged load a new serving bench starts from: concurrency 1, 2, 4 and 8 with short prompts,
/// so a CPU-served shrunk checkpoint finishes it in seconds.
std::vector<BenchStage> defaultBenchStages();

/// A staged `bench serve` against an OpenAI-compatible endpoint: a URL, or `checkpoint` served
/// in-process (LocalServer) on a free loopback port for the run.
struct StagedBenchRequest {
    std::string url; ///< "http://host:port"; empty: serve `checkpoint` in-process
    std::string checkpoint; ///< served when `url` is empty; the reference of `check`
    std::string precision = "fp32"; ///< the in-process server's and the reference's arithmetic
    std::vector<BenchStage> stages;
    /// What every level shares, as `bench serve`'s flags set it: the model id, length ranges or
    /// a lengths file, burstiness, ramp-up, the prompt vocabulary, seed, warm-ups (before the
    /// first level only), percentiles, goodput SLOs and timeout. Its url, concurrency, rate,
    /// lengths and prompt count are the stages'.
    serve::BenchOptions workload;
    /// Compare every answer's greedy tokens with the reference engine on `checkpoint`
    /// (`bench serve --check`), reporting the first divergence per request and level.
    bool check = false;
    double logprobTolerance = 1e-3; ///< nats
    /// `bench serve --plan`: the planner's TTFT/TPOT of each level's workload under this plan
    /// string on `cluster`, for `planModel` (default: `checkpoint`); empty: none.
    std::string plan;
    std::string cluster = "h100-sxm:1x1";
    std::string planModel;
};

/// What a staged bench measured, and its run record (kind run, tool=bench: benchRunRecord).
struct StagedBenchOutcome {
    std::string url; ///< the endpoint driven (the loopback URL when served in-process)
    /// In-process: how the server's decode steps ran (serve::Scheduler::decodePath); else empty.
    std::string decodePath;
    std::vector<BenchLevelOutcome> levels;
    history::RunRecord record { history::RunKind::Run };
};

/// Runs the stages in order, the one loop of `day0 bench serve`, the Serving panel and
/// validate's serving step (warm-ups before the first only), checking each level against the
/// reference and predicting it by the planner when asked; `onLevel` gets each level as it ends.
/// Errors: no stage, a checkpoint that cannot be served or loaded, a plan the planner refuses,
/// an unreachable endpoint, a failed warm-up. Failed requests and divergences are results (the
/// record's status says so). Progress: the reference and server loads, then the running level's
/// requests (reset per level, its stage named). Cancellable: requests in flight finish, then
/// Error::cancelled().
Result<StagedBenchOutcome> runStagedBench(const StagedBenchRequest& request, Progress& progress,
    std::stop_token stop, const std::function<void(const BenchLevelOutcome&)>& onLevel = {});

} // namespace day0::actions
