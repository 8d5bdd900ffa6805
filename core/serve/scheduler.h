#pragma once

#include "base/result.h"
#include "exec/engine.h"
#include "exec/precision.h"
#include "serve/sampling.h"
#include "serve/stop_checker.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace day0::serve {

using Clock = std::chrono::steady_clock;

/// What one request asks the scheduler to generate (already validated: openai_protocol.h).
struct GenerationRequest {
    std::vector<std::int64_t> prompt;
    std::int64_t maxTokens = 16;
    bool ignoreEos = false; ///< generate maxTokens even past an end-of-sequence token
    /// Log-probabilities: -1 none, 0 the chosen token's only, k > 0 also the k most likely.
    /// They are the model's (log softmax of the raw logits), before temperature, top-k, top-p.
    int topLogprobs = -1;
    SamplingParams sampling; ///< how tokens are drawn (sampling.h)
    /// Detokenises the output and matches `stop`; null: no text (token-id models).
    const tokenizer::Tokenizer* tokenizer = nullptr;
    std::vector<std::string> stop; ///< stop strings (stop_checker.h); need a tokenizer
    std::set<std::int64_t> stopTokenIds; ///< vLLM's stop_token_ids, honoured even with ignoreEos
};

/// One generated token, with its log-probability and alternatives when asked.
struct TokenEvent {
    std::int64_t token = 0;
    std::string text; ///< the output text this token releases (StopChecker)
    double logprob = 0.0;
    std::vector<std::pair<std::int64_t, double>> top; ///< most likely first
};

/// Why a request ended.
enum class Finish { Length, Stop, Cancelled, Failed };

/// The channel from the scheduler to one request's HTTP handler. Thread-safe.
class RequestStream {
public:
    /// What arrived since the last take.
    struct Batch {
        std::vector<TokenEvent> tokens;
        std::optional<Finish> finish; ///< set once, with the last batch
        std::string error; ///< Finish::Failed: what went wrong
        StopReason stopReason; ///< Finish::Stop: the stop string or token; none for EOS
    };

    /// Waits up to `timeout` for tokens or the end, then takes what arrived.
    Batch take(std::chrono::milliseconds timeout);
    /// The client has gone: the scheduler drops the sequence at its next step and frees its slot.
    void cancel();
    [[nodiscard]] bool cancelled() const;

    // The scheduler's side.
    void push(TokenEvent event);
    void finish(Finish why, std::string error = {}, StopReason reason = {});

private:
    mutable std::mutex m_mutex;
    std::condition_variable m_ready;
    std::vector<TokenEvent> m_pending;
    std::optional<Finish> m_finish;
    std::string m_error;
    StopReason m_stopReason;
    bool m_cancelled = false;
};

/// One sequence fed step by step elsewhere than on the scheduler's engine (a plan's sharded
/// ranks, a backend plugin): the prompt first, then one token per step; the logits [vocab] of
/// the last token fed. Called from the scheduler's loop thread only.
class SteppedSequence {
public:
    virtual ~SteppedSequence() = default;
    virtual Result<std::vector<double>> feed(
        std::span<const std::int64_t> ids, std::stop_token stop)
        = 0;
    /// Tokens fed so far.
    [[nodiscard]] virtual std::int64_t position() const = 0;
};

/// Where a scheduler's sequences run when not on its engine's own forward (SchedulerOptions::
/// source). Their decode steps and the prompts admitted together run as one batched step
/// (feedBatch) unless sequentialReason() says why not. Called from the loop thread only.
class SequenceSource {
public:
    virtual ~SequenceSource() = default;
    /// A sequence with room for `capacity` tokens.
    virtual Result<std::unique_ptr<SteppedSequence>> open(std::int64_t capacity) = 0;
    /// Why steps of several sequences are not batched on it, for decodePath ("sequential
    /// (<this>)"); empty: they are (feedBatch).
    [[nodiscard]] virtual std::string sequentialReason() const = 0;
    /// One step of several of its sequences (opened here) together, seqs[i] fed tokens[i]; the
    /// logits [vocab] of each one's last token, in order. Called only when sequentialReason()
    /// is empty; each sequence advances by its token count on success.
    virtual Result<std::vector<std::vector<double>>> feedBatch(
        std::span<SteppedSequence* const> seqs,
        std::span<const std::span<const std::int64_t>> tokens, std::stop_token stop)
        = 0;
};

/// Limits of the scheduler.
struct SchedulerOptions {
    int maxRunning = 8; ///< sequences advanced together
    int maxQueued = 64; ///< requests waiting beyond those; more get 429
    /// Tokens of KV cache the running sequences may reserve together (each reserves prompt +
    /// max_tokens when admitted); 0: maxRunning × the model's context.
    std::int64_t kvTokenBudget = 0;
    exec::PrecisionPlan plan; ///< the arithmetic (fp32 by default)
    std::int64_t deltaChunk = 64; ///< as `day0 run --delta-chunk`
    std::set<std::int64_t> eosIds; ///< tokens that end a sequence (config.json eos_token_id)
    /// Decode steps of the running sequences as one batched forward
    /// (exec::SequenceDecoder::feedBatch) where the model allows it; false: one after another.
    bool batchDecode = true;
    /// The prompts of sequences admitted at the same step boundary prefilled as one batched
    /// forward (exec::SequenceDecoder::feedBatch over several tokens each: every linear layer one
    /// matrix product over all the prompts' rows, each prompt attending causally over its own
    /// cache), where decode steps are batched; false: one prompt per forward.
    bool batchPrefill = true;
    /// At most this many prompt tokens in one batched prefill; more prefill in further batches
    /// of the same iteration (a longer prompt alone). Short prompts gain (their rows share each
    /// weight pass); long ones already fill a GEMM, and prefilled together every one waits for
    /// the longest: tests/bench/serve_batch_bench measured mean TTFT at concurrency 8 2.4x
    /// shorter batched for 4-11 token prompts, 2.3x longer for 32-256 token ones, uncapped.
    std::int64_t prefillBatchTokens = 64;
    /// Runs the sequences here instead of on the engine's forward (the engine then only gives
    /// the model's spec); null: exec::SequenceDecoder on the engine.
    std::shared_ptr<SequenceSource> source;
    /// Computes the sequences' float operators (a backend plugin, as `day0 run --backend`), fp32,
    /// batched decode steps included. Null: the CPU reference.
    std::shared_ptr<exec::Backend> backend;
};

/// Counters for /metrics; a snapshot.
struct SchedulerMetrics {
    std::int64_t queued = 0;
    std::int64_t running = 0;
    std::int64_t kvTokensReserved = 0;
    std::int64_t kvTokenBudget = 0;
    std::int64_t kvTokensUsed = 0; ///< tokens in the running sequences' caches now
    /// KV-cache bytes of the running sequences, by the model's cache footprint
    /// (model/cache_footprint.h: windows, latent KV, recurrent states) at the engine's element
    /// size (4 bytes in fp32, 8 in fp64): of the tokens they hold, and of what they reserved.
    double kvBytesUsed = 0.0;
    double kvBytesReserved = 0.0;
    /// Tokens prefilled / generated in the last kTokenRateWindow seconds, divided by it.
    double promptTokensPerSecond = 0.0;
    double generationTokensPerSecond = 0.0;
    static constexpr double kTokenRateWindow = 10.0;
    std::int64_t promptTokens = 0; ///< prefilled, all requests
    std::int64_t generatedTokens = 0;
    std::int64_t finishedLength = 0;
    std::int64_t finishedStop = 0;
    std::int64_t cancelled = 0;
    std::int64_t failed = 0;
    std::int64_t rejectedFull = 0; ///< 429s
    static constexpr std::array<double, 12> kTtftBuckets
        = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0 };
    std::array<std::int64_t, kTtftBuckets.size() + 1> ttftCounts {}; ///< last: +Inf
    double ttftSum = 0.0;
    /// Inter-token latency: from one generated token of a sequence to its next (vLLM's
    /// time_per_output_token), same buckets.
    std::array<std::int64_t, kTtftBuckets.size() + 1> itlCounts {};
    double itlSum = 0.0;
    bool batchedDecode = false; ///< decode steps run batched (Scheduler::decodePath)
    std::int64_t decodeBatches = 0; ///< batched decode forwards run
    std::int64_t decodeBatchRows = 0; ///< sequences those forwards advanced together
    std::int64_t prefillBatches = 0; ///< batched prefills run (two prompts or more each)
    std::int64_t prefillBatchSequences = 0; ///< prompts those prefills ran together
};

/// Prometheus text exposition (version 0.0.4) of a snapshot, metric names prefixed `day0_`.
std::string renderPrometheus(const SchedulerMetrics& m);

/// Iteration-level scheduling (Orca, OSDI '22; vLLM's scheduler) over the reference engine: a
/// FIFO queue, up to maxRunning sequences admitted within a KV-token budget, and a loop thread
/// that advances every running sequence by one step (the prefill, or one decode token) per
/// iteration, so requests join and leave at step boundaries. The prompts admitted at the same
/// boundary prefill as one batched forward (SchedulerOptions::batchPrefill), and the decode
/// steps of an iteration run as one batched forward
/// (exec::SequenceDecoder::feedBatch: each linear layer one matrix product over all the running
/// sequences' rows, each row's attention over its own cache) where the model allows it
/// (decodePath() says which path and why), else one after another. A greedy sequence's tokens
/// are those of `day0 run`, a seeded one's are the same whatever runs beside it (its sampler and
/// generator are its own). Thread-safe.
class Scheduler {
public:
    Scheduler(exec::Engine engine, SchedulerOptions options);
    /// Without an engine: every sequence runs on `options.source` (which must be set; without
    /// it each request fails, named), and `spec` only sizes caches and contexts. What a plan's
    /// sharded ranks serve on, so that the weights are held once, by the ranks.
    Scheduler(model::ModelSpec spec, SchedulerOptions options);
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    enum class Admission {
        Accepted,
        QueueFull, ///< 429: try again later
        Draining, ///< 503: the server is shutting down
        TooLarge, ///< 400: prompt + max_tokens exceed the whole KV budget or the context
    };
    struct Submitted {
        Admission admission = Admission::Accepted;
        std::shared_ptr<RequestStream> stream; ///< set when accepted
        std::string reason; ///< why not
    };
    Submitted submit(GenerationRequest request);

    /// Stops admitting requests (new ones get Draining) and waits until every queued and running
    /// one has finished, at most `timeout`; true when drained.
    bool drain(std::chrono::milliseconds timeout);

    [[nodiscard]] SchedulerMetrics metrics() const;
    [[nodiscard]] const model::ModelSpec& spec() const { return m_spec; }
    /// Longest prompt + max_tokens one request may have.
    [[nodiscard]] std::int64_t contextLimit() const;
    /// "batched", or "sequential (<why>)": how decode steps run.
    [[nodiscard]] std::string decodePath() const;

private:
    struct Sequence;
    void loop(std::stop_token stop);
    void admit();
    /// One step of `seq`; false when it has finished.
    bool advance(Sequence& seq, std::stop_token stop);
    /// Opens `seq`'s sequence (its decoder or stepped sequence, sampler, stop checker) before its
    /// prefill; false when that failed (it has finished).
    bool open(Sequence& seq);
    /// The prefills of `seqs` (none opened yet) as batched forwards of at most
    /// prefillBatchTokens prompt tokens; for each, false when it has finished.
    std::vector<bool> prefillBatch(std::span<Sequence* const> seqs, std::stop_token stop);
    /// One batched decode step of `seqs` (every one past its prefill); for each, false when it
    /// has finished.
    std::vector<bool> advanceBatch(std::span<Sequence* const> seqs, std::stop_token stop);
    /// One step of `seqs` together, seqs[i] fed tokens[i]: on their decoders
    /// (exec::SequenceDecoder::feedBatch) or on the sequence source (SequenceSource::feedBatch).
    Result<std::vector<std::vector<double>>> feedTogether(std::span<Sequence* const> seqs,
        std::span<const std::span<const std::int64_t>> tokens, std::stop_token stop);
    /// Samples and delivers the token of `seq`'s step from its `logits`; false when it has
    /// finished.
    bool emit(Sequence& seq, std::span<const double> logits, bool prefill);
    /// Ends `seq` (counted in the metrics) and tells its client.
    void end(Sequence& seq, Finish why, std::string error = {}, StopReason reason = {});
    /// KV-cache bytes of one sequence holding `tokens` (SchedulerMetrics::kvBytesUsed).
    [[nodiscard]] double cacheBytes(std::int64_t tokens) const;

    /// Starts the loop thread; after the members are set.
    void start();

    std::optional<exec::Engine> m_engine; ///< none: every sequence on m_options.source
    model::ModelSpec m_spec;
    SchedulerOptions m_options;
    std::string m_batchRefusal; ///< why decode steps are not batched; empty: they are
    mutable std::mutex m_mutex;
    std::condition_variable_any m_wake;
    std::condition_variable m_idle;
    std::deque<std::unique_ptr<Sequence>> m_queue;
    std::vector<std::unique_ptr<Sequence>> m_running; ///< touched by the loop thread only
    std::int64_t m_runningCount = 0; ///< m_running.size(), under m_mutex for the others
    bool m_draining = false;
    SchedulerMetrics m_metrics;
    /// (when, prompt tokens, generated tokens) of recent steps, for the token rates.
    std::deque<std::tuple<Clock::time_point, std::int64_t, std::int64_t>> m_recent;
    std::jthread m_thread; ///< last: starts after everything above exists
};

} // namespace day0::serve
