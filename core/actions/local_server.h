#pragma once

#include "base/progress.h"
#include "base/result.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

// Not included: serve/scheduler.h declares Scheduler::emit, which Qt's `emit` macro breaks in
// the panels that include this header.
namespace day0::serve {
struct SchedulerMetrics;
}

namespace day0::actions {

/// How a checkpoint is served: `day0 serve`'s flags, the Serving panel's and validate's
/// in-process server alike.
struct LocalServerOptions {
    std::string checkpoint; ///< a checkpoint folder, as `day0 run` opens it
    std::string precision = "fp32"; ///< a `day0 run --precision` spelling
    std::string host = "127.0.0.1"; ///< loopback unless asked otherwise
    int port = 0; ///< 0: a free port (url() and port() name it)
    std::string servedName; ///< the model id clients send; empty: the checkpoint's folder name
    int maxRunning = 8; ///< sequences advanced together
    int maxQueued = 64; ///< requests waiting beyond those; more get HTTP 429
    std::int64_t kvTokens = 0; ///< the KV-token budget; 0: maxRunning × the model's context
    std::int64_t deltaChunk = 64; ///< as `day0 run --delta-chunk`
    bool batchDecode = true; ///< decode steps batched where the model allows it
    /// Prompts admitted together prefilled as one forward where decode steps are batched.
    bool batchPrefill = true;
    double drainSeconds = 30; ///< what the destructor waits for requests in flight
    /// A plan string ("tp=2", "tp=2,pp=2", "ep=2,tp=2"): requests run on the plan's sharded
    /// ranks in this process (parallel::ServedRanks, the forward `day0 run --plan` runs), fp32
    /// only, decode steps one sequence at a time; empty: one rank.
    std::string plan;
    /// A backend plugin ("hostsim", "cuda"; as `day0 run --backend`) computing the float
    /// operators on `device`, fp32 (decode steps batched as on the CPU, where the model allows
    /// it); empty or "cpu": the CPU reference.
    std::string backend;
    int device = 0;
};

/// What LocalServer::start refuses of `options` before reading the checkpoint, as `day0 serve`
/// refuses it: a precision not spelled as `day0 run`'s, a plan with a backend plugin, a plan
/// string that does not parse or that the served ranks cannot run without looking at the model
/// (cp > 1, dp > 1), a plan in another precision than fp32. What needs the model (heads TP does
/// not divide) is refused when the server starts. The Serving panel checks its fields with it.
Result<void> checkLocalServerOptions(const LocalServerOptions& options);

/// A checkpoint served by the OpenAI server (serve::OpenAiServer over serve::Scheduler) on its
/// own HTTP thread until drained and destroyed: `day0 serve`, the Serving panel's local server
/// and bench, and validate's serving step. Thread-safe accessors.
class LocalServer {
public:
    /// Loads `options.checkpoint` in its precision, starts the scheduler and binds. Errors: a
    /// precision not spelled as `day0 run`'s, a checkpoint that does not load, a port in use.
    /// Cancellable while loading.
    static Result<std::unique_ptr<LocalServer>> start(
        const LocalServerOptions& options, Progress& progress, std::stop_token stop);
    /// `checkpoint` in `precision` on a free loopback port, with room for `maxRequests` requests
    /// at once (running and queued): the in-process server of a bench or a check.
    static Result<std::unique_ptr<LocalServer>> start(const std::string& checkpoint,
        const std::string& precision, int maxRequests, Progress& progress, std::stop_token stop);
    /// Refuses new requests, lets those in flight finish (at most drainSeconds) and stops.
    ~LocalServer();
    LocalServer(const LocalServer&) = delete;
    LocalServer& operator=(const LocalServer&) = delete;

    [[nodiscard]] const std::string& url() const; ///< "http://host:port"
    [[nodiscard]] int port() const;
    [[nodiscard]] const std::string& modelName() const; ///< the served model id
    [[nodiscard]] std::int64_t contextLimit() const; ///< prompt + max_tokens of one request
    /// How the server's decode steps run: batched, or one after another and why
    /// (serve::Scheduler::decodePath).
    [[nodiscard]] std::string decodePath() const;
    /// The plan the ranks run (parallel::layoutString, "tp=2,pp=1,ep=1,dp=1,etp=2,mb=1"); empty
    /// for one rank.
    [[nodiscard]] const std::string& plan() const;
    /// Bytes of weights this server holds in memory: the engine's, or with a plan its ranks'
    /// slices (the checkpoint is loaded once, by the ranks).
    [[nodiscard]] std::int64_t weightBytes() const;
    /// The backend plugin requests compute on ("cpu": the reference).
    [[nodiscard]] const std::string& backend() const;
    /// Why /v1/chat/completions is refused; empty: it is served.
    [[nodiscard]] const std::string& chatRefusal() const;
    /// The checkpoint has a chat template, but one outside the supported subset or malformed.
    [[nodiscard]] bool chatTemplateUnusable() const;
    [[nodiscard]] serve::SchedulerMetrics metrics() const;
    /// The HTTP thread ended by itself (not by drain or destruction).
    [[nodiscard]] bool ended() const;
    /// Refuses new requests (503) and waits for the admitted ones, at most `timeout`; true when
    /// every one finished. The HTTP server stops when this object is destroyed.
    bool drain(std::chrono::milliseconds timeout);

    struct Impl;

private:
    explicit LocalServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace day0::actions
