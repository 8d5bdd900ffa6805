#pragma once

#include "actions/bench_record.h"
#include "base/progress.h"
#include "base/result.h"
#include "history/run_record.h"

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// What the serving check does: `day0 serve` started in this process on `checkpoint` (loopback,
/// a free port), or the endpoint at `url` serving it, driven by a short staged load (one level
/// per entry of `concurrency`, `requestsPerLevel` greedy requests each) whose every answer must
/// carry the reference engine's greedy tokens (`day0 bench serve --check`).
struct ServingCheckOptions {
    std::filesystem::path checkpoint; ///< the served checkpoint, and the reference's
    std::string url; ///< empty: serve `checkpoint` in-process
    std::string precision = "fp32"; ///< of the in-process server and of the reference
    std::vector<int> concurrency { 1, 4 }; ///< the load levels, in order
    int requestsPerLevel = 8;
    std::int64_t inputTokens = 16; ///< prompt tokens per request (seeded random ids)
    std::int64_t outputTokens = 8; ///< max_tokens per request, with ignore_eos
    std::uint64_t seed = 0;
    double timeoutSeconds = 120; ///< per read of each request
    double logprobTolerance = 1e-3; ///< nats, as --check-logprob-tol
};

/// A finished serving check: each level as `day0 bench serve` records it, the bench's run
/// record, and why it failed (empty: every request completed with the reference's tokens).
struct ServingCheckOutcome {
    std::string url; ///< the endpoint driven
    bool inProcess = false;
    /// In-process: how its decode steps ran (serve::Scheduler::decodePath); else empty.
    std::string decodePath;
    std::vector<BenchLevelOutcome> levels;
    history::RunRecord record; ///< benchRunRecord of the levels
    int failedRequests = 0;
    int divergedRequests = 0;
    std::string failure; ///< "3 of 16 requests failed: ...", "2 requests diverge: ..."
};

/// Runs the serving check. Errors when it cannot run (the checkpoint does not load, the port
/// cannot be bound, the endpoint is unreachable or sends no token_ids); failed requests and
/// divergent tokens are in the outcome. It runs the levels by runStagedBench, whose progress it
/// reports; cancellable.
Result<ServingCheckOutcome> checkServing(
    const ServingCheckOptions& options, Progress& progress, std::stop_token stop);

} // namespace day0::actions
