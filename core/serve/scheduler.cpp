#include "serve/scheduler.h"

#include "exec/sequence_decoder.h"
#include "model/cache_footprint.h"
#include "numerics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::serve {

RequestStream::Batch RequestStream::take(std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    m_ready.wait_for(lock, timeout, [&] { return !m_pending.empty() || m_finish.has_value(); });
    Batch batch;
    batch.tokens.swap(m_pending);
    batch.finish = m_finish;
    batch.error = m_error;
    batch.stopReason = m_stopReason;
    return batch;
}

void RequestStream::cancel()
{
    const std::lock_guard lock(m_mutex);
    m_cancelled = true;
}

bool RequestStream::cancelled() const
{
    const std::lock_guard lock(m_mutex);
    return m_cancelled;
}

void RequestStream::push(TokenEvent event)
{
    {
        const std::lock_guard lock(m_mutex);
        m_pending.push_back(std::move(event));
    }
    m_ready.notify_all();
}

void RequestStream::finish(Finish why, std::string error, StopReason reason)
{
    {
        const std::lock_guard lock(m_mutex);
        m_finish = why;
        m_error = std::move(error);
        m_stopReason = std::move(reason);
    }
    m_ready.notify_all();
}

struct Scheduler::Sequence {
    GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point arrived;
    std::optional<exec::SequenceDecoder> decoder;
    std::unique_ptr<SteppedSequence> stepped; ///< instead of decoder, on SchedulerOptions::source
    std::optional<Sampler> sampler; ///< made with the decoder, at the prefill
    std::optional<StopChecker> checker; ///< likewise
    std::int64_t generated = 0;
    std::int64_t last = -1; ///< the last generated token, fed on the next step
    Clock::time_point lastToken; ///< when the last token was generated (inter-token latency)
    double bytesReserved = 0.0; ///< cacheBytes(reserve()), counted while running
    double bytesUsed = 0.0; ///< cacheBytes(tokens fed), counted while running
    /// How it ended (Scheduler::end), told to the client once its slot is free, so that a client
    /// that has its whole answer finds the slot free for its next request.
    struct Ending {
        Finish why = Finish::Length;
        std::string error;
        StopReason reason;
    };
    std::optional<Ending> ending;
    [[nodiscard]] bool opened() const { return decoder.has_value() || stepped != nullptr; }
    /// Tokens fed so far.
    [[nodiscard]] std::int64_t position() const
    {
        return stepped ? stepped->position() : decoder ? decoder->position() : 0;
    }
    [[nodiscard]] std::int64_t reserve() const
    {
        return std::int64_t(request.prompt.size()) + request.maxTokens;
    }
};

Scheduler::Scheduler(exec::Engine engine, SchedulerOptions options)
    : m_engine(std::move(engine))
    , m_spec(m_engine->spec())
    , m_options(std::move(options))
{
    start();
}

Scheduler::Scheduler(model::ModelSpec spec, SchedulerOptions options)
    : m_spec(std::move(spec))
    , m_options(std::move(options))
{
    start();
}

void Scheduler::start()
{
    if (m_options.kvTokenBudget <= 0) {
        const std::int64_t context = m_spec.maxPositions > 0 ? m_spec.maxPositions : 4096;
        m_options.kvTokenBudget = context * std::max(1, m_options.maxRunning);
    }
    m_metrics.kvTokenBudget = m_options.kvTokenBudget;
    if (!m_options.batchDecode) {
        m_batchRefusal = "turned off";
    } else if (m_options.source) {
        m_batchRefusal = m_options.source->sequentialReason();
    } else if (!m_engine) {
        m_batchRefusal = "no engine and no sequence source";
    } else {
        m_batchRefusal = exec::SequenceDecoder::batchRefusal(*m_engine);
    }
    m_metrics.batchedDecode = m_batchRefusal.empty();
    m_thread = std::jthread([this](std::stop_token stop) { loop(stop); });
}

Scheduler::~Scheduler()
{
    m_thread.request_stop();
    m_wake.notify_all();
    if (m_thread.joinable()) {
        m_thread.join();
    }
    // Whoever still waits learns the request ended.
    for (auto& seq : m_queue) {
        seq->stream->finish(Finish::Failed, "the server stopped");
    }
    for (auto& seq : m_running) {
        seq->stream->finish(Finish::Failed, "the server stopped");
    }
}

std::int64_t Scheduler::contextLimit() const
{
    const std::int64_t context = m_spec.maxPositions;
    return context > 0 ? std::min(context, m_options.kvTokenBudget) : m_options.kvTokenBudget;
}

std::string Scheduler::decodePath() const
{
    return m_batchRefusal.empty() ? std::string("batched")
                                  : fmt::format("sequential ({})", m_batchRefusal);
}

Scheduler::Submitted Scheduler::submit(GenerationRequest request)
{
    Submitted out;
    auto seq = std::make_unique<Sequence>();
    seq->request = std::move(request);
    seq->arrived = Clock::now();
    if (seq->reserve() > contextLimit()) {
        out.admission = Admission::TooLarge;
        out.reason = fmt::format("the prompt ({} tokens) plus max_tokens ({}) need {} tokens; "
                                 "this server fits at most {} per request",
            seq->request.prompt.size(), seq->request.maxTokens, seq->reserve(), contextLimit());
        return out;
    }
    {
        const std::lock_guard lock(m_mutex);
        if (m_draining) {
            out.admission = Admission::Draining;
            out.reason = "the server is shutting down and accepts no new requests";
            return out;
        }
        // maxQueued counts requests waiting beyond the running slots: a request arriving at a
        // free slot is admitted even with --max-queue 0.
        if (std::int64_t(m_queue.size()) + m_runningCount
            >= std::int64_t(m_options.maxQueued) + m_options.maxRunning) {
            ++m_metrics.rejectedFull;
            out.admission = Admission::QueueFull;
            out.reason = fmt::format("the request queue is full ({} waiting, {} running); retry "
                                     "later",
                m_queue.size(), m_runningCount);
            return out;
        }
        seq->stream = std::make_shared<RequestStream>();
        out.stream = seq->stream;
        m_queue.push_back(std::move(seq));
    }
    m_wake.notify_all();
    return out;
}

bool Scheduler::drain(std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    m_draining = true;
    return m_idle.wait_for(lock, timeout, [&] { return m_queue.empty() && m_runningCount == 0; });
}

SchedulerMetrics Scheduler::metrics() const
{
    const std::lock_guard lock(m_mutex);
    SchedulerMetrics m = m_metrics;
    m.queued = std::int64_t(m_queue.size());
    m.running = m_runningCount;
    const auto since = Clock::now()
        - std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(SchedulerMetrics::kTokenRateWindow));
    std::int64_t prompt = 0;
    std::int64_t generated = 0;
    for (const auto& [when, p, g] : m_recent) {
        if (when >= since) {
            prompt += p;
            generated += g;
        }
    }
    m.promptTokensPerSecond = double(prompt) / SchedulerMetrics::kTokenRateWindow;
    m.generationTokensPerSecond = double(generated) / SchedulerMetrics::kTokenRateWindow;
    return m;
}

double Scheduler::cacheBytes(std::int64_t tokens) const
{
    const double element = m_options.plan.isF64() ? 8.0 : 4.0;
    double bytes = 0.0;
    for (const auto& kind : model::cacheByKind(m_spec, double(tokens), element)) {
        bytes += kind.bytes;
    }
    return bytes;
}

void Scheduler::admit()
{
    // First come, first served: the head waits for room rather than being overtaken, so a long
    // request is not starved by short ones.
    while (!m_queue.empty() && std::int64_t(m_running.size()) < m_options.maxRunning) {
        auto& head = m_queue.front();
        if (head->stream->cancelled()) {
            ++m_metrics.cancelled;
            head->stream->finish(Finish::Cancelled);
            m_queue.pop_front();
            continue;
        }
        if (m_metrics.kvTokensReserved + head->reserve() > m_options.kvTokenBudget) {
            break;
        }
        m_metrics.kvTokensReserved += head->reserve();
        head->bytesReserved = cacheBytes(head->reserve());
        m_metrics.kvBytesReserved += head->bytesReserved;
        m_running.push_back(std::move(head));
        m_queue.pop_front();
    }
    m_runningCount = std::int64_t(m_running.size());
}

void Scheduler::end(Sequence& seq, Finish why, std::string error, StopReason reason)
{
    {
        const std::lock_guard lock(m_mutex);
        switch (why) {
        case Finish::Length:
            ++m_metrics.finishedLength;
            break;
        case Finish::Stop:
            ++m_metrics.finishedStop;
            break;
        case Finish::Cancelled:
            ++m_metrics.cancelled;
            break;
        case Finish::Failed:
            ++m_metrics.failed;
            break;
        }
    }
    seq.ending = Sequence::Ending { why, std::move(error), std::move(reason) };
}

bool Scheduler::open(Sequence& seq)
{
    // The capacity Engine::run gives the same request: prompt + new tokens − 1.
    const std::int64_t capacity
        = std::int64_t(seq.request.prompt.size()) + seq.request.maxTokens - 1;
    if (m_options.source) {
        auto stepped = m_options.source->open(capacity);
        if (!stepped) {
            end(seq, Finish::Failed, stepped.error().message);
            return false;
        }
        seq.stepped = std::move(*stepped);
    } else if (!m_engine) {
        end(seq, Finish::Failed,
            "internal error: the scheduler has neither an engine nor a sequence source");
        return false;
    } else {
        auto decoder = exec::SequenceDecoder::open(
            *m_engine, m_options.plan, capacity, m_options.deltaChunk, m_options.backend.get());
        if (!decoder) {
            end(seq, Finish::Failed, decoder.error().message);
            return false;
        }
        seq.decoder.emplace(std::move(*decoder));
    }
    seq.sampler.emplace(seq.request.sampling);
    auto stopIds = seq.request.stopTokenIds;
    if (!seq.request.ignoreEos) {
        stopIds.insert(m_options.eosIds.begin(), m_options.eosIds.end());
    }
    seq.checker.emplace(seq.request.tokenizer, seq.request.stop, std::move(stopIds));
    return true;
}

std::vector<bool> Scheduler::prefillBatch(std::span<Sequence* const> seqs, std::stop_token stop)
{
    std::vector<bool> going(seqs.size(), false);
    // The sequences opened, by their index in `seqs`, in order.
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        if (open(*seqs[i])) {
            at.push_back(i);
        }
    }
    std::size_t first = 0;
    while (first < at.size()) {
        // A group of prompts within the token cap (a longer prompt prefills alone).
        std::size_t last = first;
        std::int64_t tokens = 0;
        while (last < at.size()) {
            const auto n = std::int64_t(seqs[at[last]]->request.prompt.size());
            if (last > first && tokens + n > m_options.prefillBatchTokens) {
                break;
            }
            tokens += n;
            ++last;
        }
        if (last - first == 1) {
            going[at[first]] = advance(*seqs[at[first]], stop);
            first = last;
            continue;
        }
        std::vector<Sequence*> group;
        std::vector<std::span<const std::int64_t>> prompts;
        for (std::size_t k = first; k < last; ++k) {
            group.push_back(seqs[at[k]]);
            prompts.emplace_back(seqs[at[k]]->request.prompt);
        }
        auto rows = feedTogether(group, prompts, stop);
        if (!rows) {
            for (std::size_t k = first; k < last; ++k) {
                end(*seqs[at[k]], Finish::Failed, rows.error().message);
            }
            first = last;
            continue;
        }
        {
            const std::lock_guard lock(m_mutex);
            ++m_metrics.prefillBatches;
            m_metrics.prefillBatchSequences += std::int64_t(last - first);
        }
        for (std::size_t k = first; k < last; ++k) {
            going[at[k]] = emit(*seqs[at[k]], (*rows)[k - first], true);
        }
        first = last;
    }
    return going;
}

bool Scheduler::advance(Sequence& seq, std::stop_token stop)
{
    // Opened by prefillBatch and left to prefill alone, or not opened yet.
    const bool prefill = !seq.opened() || seq.position() == 0;
    if (!seq.opened() && !open(seq)) {
        return false;
    }
    const std::int64_t one[] = { seq.last };
    const std::span<const std::int64_t> ids
        = prefill ? std::span<const std::int64_t>(seq.request.prompt) : std::span(one);
    auto logits = seq.stepped ? seq.stepped->feed(ids, stop) : seq.decoder->feed(ids, stop);
    if (!logits) {
        end(seq, Finish::Failed, logits.error().message);
        return false;
    }
    return emit(seq, *logits, prefill);
}

Result<std::vector<std::vector<double>>> Scheduler::feedTogether(std::span<Sequence* const> seqs,
    std::span<const std::span<const std::int64_t>> tokens, std::stop_token stop)
{
    if (m_options.source) {
        std::vector<SteppedSequence*> stepped;
        for (auto* seq : seqs) {
            stepped.push_back(seq->stepped.get());
        }
        return m_options.source->feedBatch(stepped, tokens, stop);
    }
    std::vector<exec::SequenceDecoder*> decoders;
    for (auto* seq : seqs) {
        decoders.push_back(&*seq->decoder);
    }
    return exec::SequenceDecoder::feedBatch(decoders, tokens, stop);
}

std::vector<bool> Scheduler::advanceBatch(std::span<Sequence* const> seqs, std::stop_token stop)
{
    std::vector<std::span<const std::int64_t>> tokens;
    for (auto* seq : seqs) {
        tokens.emplace_back(&seq->last, 1);
    }
    auto rows = feedTogether(seqs, tokens, stop);
    std::vector<bool> going(seqs.size(), false);
    if (!rows) {
        for (auto* seq : seqs) {
            end(*seq, Finish::Failed, rows.error().message);
        }
        return going;
    }
    {
        const std::lock_guard lock(m_mutex);
        ++m_metrics.decodeBatches;
        m_metrics.decodeBatchRows += std::int64_t(seqs.size());
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        going[i] = emit(*seqs[i], (*rows)[i], false);
    }
    return going;
}

bool Scheduler::emit(Sequence& seq, std::span<const double> logits, bool prefill)
{
    TokenEvent event;
    event.token = seq.sampler->sample(logits);
    if (seq.request.topLogprobs >= 0) {
        const double lse = exec::logSumExp(logits);
        event.logprob = logits[std::size_t(event.token)] - lse;
        if (seq.request.topLogprobs > 0) {
            for (const auto id : numerics::topKIndices(logits, seq.request.topLogprobs)) {
                event.top.emplace_back(id, logits[std::size_t(id)] - lse);
            }
        }
    }
    seq.last = event.token;
    ++seq.generated;
    const double bytesUsed = cacheBytes(seq.position());
    {
        const std::lock_guard lock(m_mutex);
        const auto now = Clock::now();
        const auto& buckets = SchedulerMetrics::kTtftBuckets;
        const auto bucketOf = [&](double seconds) {
            return std::size_t(
                std::lower_bound(buckets.begin(), buckets.end(), seconds) - buckets.begin());
        };
        const auto prompt = prefill ? std::int64_t(seq.request.prompt.size()) : 0;
        if (prefill) {
            m_metrics.promptTokens += prompt;
            const double ttft = std::chrono::duration<double>(now - seq.arrived).count();
            ++m_metrics.ttftCounts[bucketOf(ttft)];
            m_metrics.ttftSum += ttft;
        } else {
            const double itl = std::chrono::duration<double>(now - seq.lastToken).count();
            ++m_metrics.itlCounts[bucketOf(itl)];
            m_metrics.itlSum += itl;
        }
        seq.lastToken = now;
        ++m_metrics.generatedTokens;
        m_metrics.kvTokensUsed += prefill ? std::int64_t(seq.request.prompt.size()) : 1;
        m_metrics.kvBytesUsed += bytesUsed - seq.bytesUsed;
        seq.bytesUsed = bytesUsed;
        m_recent.emplace_back(now, prompt, 1);
        const auto window = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(SchedulerMetrics::kTokenRateWindow));
        while (!m_recent.empty() && std::get<0>(m_recent.front()) < now - window) {
            m_recent.pop_front();
        }
    }
    auto checked = seq.checker->add(event.token);
    event.text = std::move(checked.text);
    if (checked.stopped) {
        // An end-of-sequence id is no stop_reason (vLLM reports null); a stop_token_id is.
        if (const auto* id = std::get_if<std::int64_t>(&checked.reason);
            id != nullptr && !seq.request.stopTokenIds.contains(*id)) {
            checked.reason = std::monostate {};
        }
        seq.stream->push(std::move(event));
        end(seq, Finish::Stop, {}, std::move(checked.reason));
        return false;
    }
    if (seq.generated >= seq.request.maxTokens) {
        event.text += seq.checker->flush();
        seq.stream->push(std::move(event));
        end(seq, Finish::Length);
        return false;
    }
    seq.stream->push(std::move(event));
    return true;
}

void Scheduler::loop(std::stop_token stop)
{
    while (!stop.stop_requested()) {
        {
            std::unique_lock lock(m_mutex);
            if (m_running.empty()) {
                m_wake.wait(lock, stop, [&] { return !m_queue.empty(); });
                if (stop.stop_requested()) {
                    return;
                }
            }
            admit();
        }
        // One iteration: every running sequence one step, outside the lock so that requests
        // can arrive meanwhile.
        std::vector<std::size_t> done;
        std::vector<Sequence*> decoding; // past their prefill: one batched forward
        std::vector<std::size_t> decodingAt;
        std::vector<Sequence*> prefilling; // admitted at this boundary: prefilled together
        std::vector<std::size_t> prefillingAt;
        const bool batching = m_batchRefusal.empty();
        for (std::size_t i = 0; i < m_running.size(); ++i) {
            auto& seq = *m_running[i];
            if (seq.stream->cancelled()) {
                end(seq, Finish::Cancelled);
                done.push_back(i);
                continue;
            }
            if (batching && seq.opened()) {
                decoding.push_back(&seq);
                decodingAt.push_back(i);
                continue;
            }
            if (batching && m_options.batchPrefill && !seq.opened()) {
                prefilling.push_back(&seq);
                prefillingAt.push_back(i);
                continue;
            }
            if (!advance(seq, stop)) {
                done.push_back(i);
            }
        }
        if (!prefilling.empty()) {
            const auto going = prefillBatch(prefilling, stop);
            for (std::size_t k = 0; k < going.size(); ++k) {
                if (!going[k]) {
                    done.push_back(prefillingAt[k]);
                }
            }
        }
        if (decoding.size() == 1) {
            if (!advance(*decoding.front(), stop)) {
                done.push_back(decodingAt.front());
            }
        } else if (!decoding.empty()) {
            const auto going = advanceBatch(decoding, stop);
            for (std::size_t k = 0; k < going.size(); ++k) {
                if (!going[k]) {
                    done.push_back(decodingAt[k]);
                }
            }
        }
        std::sort(done.begin(), done.end());
        std::vector<std::unique_ptr<Sequence>> ended;
        {
            const std::lock_guard lock(m_mutex);
            for (auto it = done.rbegin(); it != done.rend(); ++it) {
                auto& seq = m_running[*it];
                m_metrics.kvTokensReserved -= seq->reserve();
                m_metrics.kvBytesReserved -= seq->bytesReserved;
                m_metrics.kvBytesUsed -= seq->bytesUsed;
                m_metrics.kvTokensUsed -= seq->position();
                ended.push_back(std::move(seq));
                m_running.erase(m_running.begin() + std::ptrdiff_t(*it));
            }
            m_runningCount = std::int64_t(m_running.size());
            // The slots are free: now the clients hear how their requests ended (under the lock,
            // so neither a new request nor a drain sees the slot taken after its answer).
            for (auto& seq : ended) {
                if (seq->ending) {
                    seq->stream->finish(seq->ending->why, std::move(seq->ending->error),
                        std::move(seq->ending->reason));
                }
            }
            if (m_queue.empty() && m_running.empty()) {
                m_idle.notify_all();
            }
        }
    }
}

std::string renderPrometheus(const SchedulerMetrics& m)
{
    std::string out;
    const auto gauge = [&](const char* name, const char* help, std::int64_t value) {
        out += fmt::format(
            "# HELP day0_{0} {1}\n# TYPE day0_{0} gauge\nday0_{0} {2}\n", name, help, value);
    };
    const auto counter = [&](const char* name, const char* help, std::int64_t value) {
        out += fmt::format(
            "# HELP day0_{0} {1}\n# TYPE day0_{0} counter\nday0_{0} {2}\n", name, help, value);
    };
    gauge("requests_waiting", "Requests in the queue, not yet admitted.", m.queued);
    gauge("requests_running", "Sequences the scheduler advances.", m.running);
    gauge(
        "kv_tokens_reserved", "KV-cache tokens reserved by running sequences.", m.kvTokensReserved);
    gauge(
        "kv_tokens_budget", "KV-cache tokens the running sequences may reserve.", m.kvTokenBudget);
    gauge("kv_tokens_used", "Tokens held in the running sequences' KV caches.", m.kvTokensUsed);
    const auto real = [&](const char* name, const char* help, double value) {
        out += fmt::format(
            "# HELP day0_{0} {1}\n# TYPE day0_{0} gauge\nday0_{0} {2}\n", name, help, value);
    };
    real("kv_cache_bytes_used",
        "KV-cache bytes of the tokens the running sequences hold (model cache footprint at the "
        "engine's element size).",
        m.kvBytesUsed);
    real("kv_cache_bytes_reserved",
        "KV-cache bytes the running sequences reserved (prompt + max_tokens each).",
        m.kvBytesReserved);
    real("kv_cache_usage_ratio", "KV tokens reserved over the KV token budget (0..1).",
        m.kvTokenBudget > 0 ? double(m.kvTokensReserved) / double(m.kvTokenBudget) : 0.0);
    real("prompt_tokens_per_second", "Prompt tokens prefilled in the last 10 s, per second.",
        m.promptTokensPerSecond);
    real("generation_tokens_per_second", "Tokens generated in the last 10 s, per second.",
        m.generationTokensPerSecond);
    counter("prompt_tokens_total", "Prompt tokens prefilled.", m.promptTokens);
    counter("generation_tokens_total", "Tokens generated.", m.generatedTokens);
    out += "# HELP day0_requests_finished_total Requests ended, by reason.\n"
           "# TYPE day0_requests_finished_total counter\n";
    out += fmt::format("day0_requests_finished_total{{reason=\"length\"}} {}\n", m.finishedLength);
    out += fmt::format("day0_requests_finished_total{{reason=\"stop\"}} {}\n", m.finishedStop);
    out += fmt::format("day0_requests_finished_total{{reason=\"cancelled\"}} {}\n", m.cancelled);
    out += fmt::format("day0_requests_finished_total{{reason=\"failed\"}} {}\n", m.failed);
    counter("requests_rejected_queue_full_total", "Requests refused with 429.", m.rejectedFull);
    gauge("decode_batched",
        "1: the running sequences' decode steps run as one batched forward; 0: one after another.",
        m.batchedDecode ? 1 : 0);
    counter("decode_batches_total", "Batched decode forwards run.", m.decodeBatches);
    counter("decode_batch_rows_total", "Sequences advanced by batched decode forwards.",
        m.decodeBatchRows);
    counter("prefill_batches_total", "Batched prefills run (two prompts or more each).",
        m.prefillBatches);
    counter("prefill_batch_sequences_total", "Prompts prefilled together by batched prefills.",
        m.prefillBatchSequences);
    const auto histogram = [&](const char* name, const char* help, const auto& counts, double sum) {
        out += fmt::format("# HELP day0_{0} {1}\n# TYPE day0_{0} histogram\n", name, help);
        std::int64_t cumulative = 0;
        for (std::size_t i = 0; i < SchedulerMetrics::kTtftBuckets.size(); ++i) {
            cumulative += counts[i];
            out += fmt::format("day0_{}_bucket{{le=\"{}\"}} {}\n", name,
                SchedulerMetrics::kTtftBuckets[i], cumulative);
        }
        cumulative += counts.back();
        out += fmt::format("day0_{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
        out += fmt::format("day0_{}_sum {}\n", name, sum);
        out += fmt::format("day0_{}_count {}\n", name, cumulative);
    };
    histogram("time_to_first_token_seconds", "From arrival to the first generated token.",
        m.ttftCounts, m.ttftSum);
    histogram("inter_token_latency_seconds", "From one generated token of a sequence to its next.",
        m.itlCounts, m.itlSum);
    return out;
}

} // namespace day0::serve
