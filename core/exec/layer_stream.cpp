#include "exec/layer_stream.h"

#include "base/resident_pages.h"
#include "base/units.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/dequantized_weights.h"
#include "exec/backend.h"
#include "exec/forward.h"
#include "exec/layer_stream_stream.h"
#include "exec/layout_weights.h"
#include "exec/piece_reader.h"
#include "exec/streamed_sequence.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace day0::exec {

namespace detail {

Result<void> CheckpointStream::beginStep()
{
    m_stepError.reset();
    ++m_step;
    if (m_sliced) {
        settle();
        release(); // the slice's first layer loads when the forward enters it
        return success();
    }
    load(0);
    if (m_stepError) {
        release();
        return *m_stepError;
    }
    return success();
}

void CheckpointStream::enter(const std::string& anchor)
{
    const auto it = m_next.find(anchor);
    if (it == m_next.end()) {
        fail(Error::internal(fmt::format("--stream: no layer follows '{}'", anchor)));
        return;
    }
    if (it->second == kReleaseOnly) {
        settle();
        release();
        dropAhead();
        m_free.clear();
        return;
    }
    load(it->second);
}

Result<void> CheckpointStream::endStep()
{
    settle();
    release();
    if (m_stepError) {
        dropAhead();
        return *m_stepError;
    }
    return success();
}

void CheckpointStream::routed(const std::string& router, std::span<const std::int64_t> experts)
{
    if (!m_routedOnly || m_current < 0) {
        return;
    }
    const Phase& ph = m_phases[std::size_t(m_current)];
    if (ph.router.empty() || ph.router != router) {
        return; // not this layer's router (an indexer's selection, a dense layer)
    }
    // The reader and the free buffers are the loader's until it has read the next phase.
    settle();
    const auto started = std::chrono::steady_clock::now();
    Loading into { m_table, m_held };
    for (const std::int64_t e : std::set<std::int64_t>(experts.begin(), experts.end())) {
        const auto it = ph.experts.find(int(e));
        if (it == ph.experts.end() || !m_loadedExperts.insert(int(e)).second) {
            continue;
        }
        for (const std::size_t i : it->second) {
            const Piece& p = ph.pieces[i];
            loadPiece(p, into);
            const auto stored = p.bytes.size() + p.scaleBytes.size();
            m_stats.expertBytesSkipped -= stored;
            m_progressTotal += std::int64_t(stored);
        }
    }
    finish(into);
    notePeak(); // the experts beside the rest of the layer and the next one read ahead
    m_progress.setTotal(m_progressTotal);
    m_stats.readSeconds
        += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void CheckpointStream::fail(Error error)
{
    if (!m_stepError) {
        m_stepError = std::move(error);
    }
    m_abort.request_stop();
}

void CheckpointStream::release()
{
    for (auto& [name, t] : m_table.tensors) {
        m_free.emplace(std::uint64_t(t.byteSize()), std::move(t));
    }
    m_table.tensors.clear();
    m_table.exactFp8.clear();
    m_current = -1;
}

void CheckpointStream::dropAhead()
{
    for (auto& [name, t] : m_ahead.table.tensors) {
        m_free.emplace(std::uint64_t(t.byteSize()), std::move(t));
    }
    m_ahead.table.tensors.clear();
    m_ahead.table.exactFp8.clear();
    m_ahead.index = -1;
    m_ahead.held = 0;
}

void CheckpointStream::settle()
{
    if (!m_loader.joinable()) {
        return;
    }
    const auto started = std::chrono::steady_clock::now();
    m_loader.join();
    m_stats.readSeconds
        += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    m_stats.bytesRead += m_ahead.bytesRead;
    m_stats.readAheadSeconds += m_ahead.seconds;
    ++m_stats.phasesReadAhead;
    notePeak();
    if (m_ahead.error) {
        fail(*std::exchange(m_ahead.error, std::nullopt));
    }
}

void CheckpointStream::notePeak()
{
    m_stats.residentPeakBytes
        = std::max(m_stats.residentPeakBytes, m_held + (m_ahead.index >= 0 ? m_ahead.held : 0));
}

void CheckpointStream::load(int index)
{
    settle();
    release();
    m_current = index;
    m_loadedExperts.clear();
    const Phase& ph = m_phases[std::size_t(index)];
    const auto started = std::chrono::steady_clock::now();
    const std::string step = m_step <= 1 ? "prefill" : fmt::format("decode step {}", m_step - 1);
    m_progress.setStage(fmt::format("{}: {}{}", step, ph.label, rateText()));
    if (m_ahead.index == index) {
        m_table = std::move(m_ahead.table);
        m_held = m_ahead.held;
        m_ahead.table = {};
        m_ahead.index = -1;
        m_ahead.held = 0;
    } else {
        dropAhead();
        m_held = 0;
        Loading into { m_table, m_held };
        fill(ph, into);
        finish(into);
    }
    if (m_routedOnly && ph.expertStored > 0) {
        // Counted as skipped until the router asks for them.
        m_stats.expertBytesSkipped += ph.expertStored;
        m_progressTotal -= std::int64_t(ph.expertStored);
        m_progress.setTotal(m_progressTotal);
    }
    m_stats.readSeconds
        += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ++m_stats.phasesLoaded;
    notePeak();
    readAhead(std::size_t(index));
}

void CheckpointStream::readAhead(std::size_t index)
{
    const std::size_t next = (index + 1) % m_phases.size();
    if (m_abort.stop_requested() || !readsAhead(next) || (next == 0 && m_step >= m_steps)) {
        return;
    }
    const std::uint64_t budget = m_stats.memoryBudget;
    if (budget > 0 && pairNeed(index, next) > budget) {
        advisePages(m_phases[next]);
        return;
    }
    m_ahead.index = int(next);
    m_ahead.held = 0;
    m_ahead.bytesRead = 0;
    m_ahead.seconds = 0.0;
    m_loader = std::jthread([this, next] {
        const auto started = std::chrono::steady_clock::now();
        // The disk reads the phase after it while this one is read and converted: a run
        // whose layers compute in a few ms (one token) is otherwise a chain of loads, each
        // waiting on its own reads.
        advisePages(m_phases[(next + 1) % m_phases.size()]);
        Loading into { m_ahead.table, m_ahead.held };
        fill(m_phases[next], into);
        m_ahead.bytesRead = into.bytesRead;
        if (into.error) {
            m_ahead.error = std::move(into.error);
            m_abort.request_stop();
        }
        m_ahead.seconds
            = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    });
}

void CheckpointStream::advisePages(const Phase& ph) const
{
    for (const Piece& p : ph.pieces) {
        if (!m_routedOnly || p.expert < 0) {
            prefetchPages(p.bytes);
            prefetchPages(p.scaleBytes);
        }
    }
}

void CheckpointStream::fill(const Phase& ph, Loading& into)
{
    std::multimap<std::uint64_t, Tensor> keep;
    for (const Piece& p : ph.pieces) {
        if (m_routedOnly && p.expert >= 0) {
            continue;
        }
        const auto it = m_free.find(bytesOf(p));
        if (it != m_free.end()) {
            keep.insert(m_free.extract(it));
        }
    }
    m_free = std::move(keep);
    for (const Piece& p : ph.pieces) {
        if (!m_routedOnly || p.expert < 0) {
            loadPiece(p, into);
        }
    }
}

void CheckpointStream::finish(Loading& into)
{
    m_stats.bytesRead += into.bytesRead;
    into.bytesRead = 0;
    if (into.error) {
        fail(*std::exchange(into.error, std::nullopt));
    }
}

std::uint64_t CheckpointStream::bytesOf(const Piece& p) const
{
    return std::uint64_t(numerics::numelOf(p.shape)) * std::uint64_t(dtypeSize(m_compute));
}

void CheckpointStream::loadPiece(const Piece& p, Loading& into)
{
    Tensor slot;
    if (const auto it = m_free.find(bytesOf(p)); it != m_free.end()) {
        slot = it->second.view(p.shape);
        m_free.erase(it);
    } else {
        slot = Tensor::zeros(p.shape, m_compute);
    }
    into.held += std::uint64_t(slot.byteSize());
    // A stopped run still gets every tensor (the layer under way reads them) but no more
    // conversion; the forward returns at the next layer.
    if (m_beforeRead) {
        m_beforeRead(p.name, &into.table == &m_ahead.table);
    }
    if (!m_abort.stop_requested()) {
        // Read from the file a chunk at a time (the read-ahead advice brought it into the
        // page cache), so its mapped pages never enter this process.
        if (auto converted = m_reader.read(p, slot, m_compute, m_abort.get_token()); !converted) {
            if (!into.error) {
                into.error = converted.error().withContext(p.name);
            }
            m_abort.request_stop();
        }
        // The scales were read through the map: their pages leave this process.
        releaseResidentPages(p.scaleBytes);
        const auto read = p.bytes.size() + p.scaleBytes.size();
        into.bytesRead += read;
        m_progress.advance(std::int64_t(read));
    }
    if (p.exactFp8) {
        into.table.exactFp8.insert(p.name);
    }
    into.table.tensors[p.name] = std::move(slot);
}

std::string CheckpointStream::rateText() const
{
    if (m_stats.readSeconds <= 0.0) {
        return {};
    }
    return fmt::format(" ({} read, {}/s)", formatBytes(Bytes(std::int64_t(m_stats.bytesRead))),
        formatBytes(Bytes(std::int64_t(double(m_stats.bytesRead) / m_stats.readSeconds))));
}

} // namespace detail

namespace {

using detail::CheckpointStream;

bool streamableFamily(model::Family f)
{
    using F = model::Family;
    switch (f) {
    case F::Llama:
    case F::Mistral:
    case F::Mixtral:
    case F::Qwen2:
    case F::Qwen2Moe:
    case F::Qwen3:
    case F::Qwen3Moe:
    case F::DeepseekV2:
    case F::DeepseekV3:
    case F::GenericDecoder:
        return true;
    default:
        return false;
    }
}

/// Why `spec` or `options` cannot be streamed, by name; success when they can.
Result<void> refuseUnstreamable(const model::ModelSpec& spec, const RunOptions& options)
{
    const auto refuse
        = [](std::string what) { return Error::unsupported(fmt::format("--stream: {}", what)); };
    if (!streamableFamily(spec.family)) {
        return refuse(fmt::format("{} is not streamed (its forward reads weights outside the "
                                  "layer that runs); run it without --stream",
            spec.modelType));
    }
    if (detail::needsLayoutMapping(spec)) {
        return refuse(fmt::format("the {} checkpoint layout (text prefix '{}', packed experts or a "
                                  "vision tower) is not streamed",
            spec.modelType, spec.layout.textPrefix));
    }
    if (spec.attentionSinks) {
        return refuse("attention sinks are read for every layer up front");
    }
    if (const auto missing = unsupportedFeatures(spec); !missing.empty()) {
        return Error::unsupported(
            fmt::format("the CPU reference engine lacks: {}", fmt::join(missing, "; ")));
    }
    if (spec.quantization && checkpoint::readsDequantized(*spec.quantization)) {
        return refuse(fmt::format("quantisation '{}' is not streamed (BF16, F16, F32 and block "
                                  "FP8 weights are)",
            spec.quantization->method));
    }
    if (options.backend != nullptr) {
        return refuse(fmt::format(
            "backend '{}': streamed runs compute on the CPU reference", options.backend->name()));
    }
    if (options.image) {
        return refuse("--image: the vision tower is not streamed");
    }
    return success();
}

/// True when a float run of `plan` rounds its weights to an emulated precision somewhere.
bool roundsWeights(const PrecisionPlan& plan)
{
    if (plan.isF64()) {
        return false;
    }
    bool rounds = plan.base != PrecisionMode::F32;
    for (const auto& [kind, mode] : plan.perOpKind) {
        rounds = rounds || mode != PrecisionMode::F32;
    }
    for (const auto& [layer, mode] : plan.perLayer) {
        rounds = rounds || mode != PrecisionMode::F32;
    }
    return rounds;
}

/// glibc raises its mmap threshold (up to 32 MiB) each time a large mapped block is freed, so

} // namespace

Result<checkpoint::Checkpoint> openStreamedCheckpoint(const std::filesystem::path& path)
{
    auto ckpt = checkpoint::Checkpoint::open(path);
    if (!ckpt) {
        return ckpt.error();
    }
    DAY0_TRY(ckpt->firstError());
    if (ckpt->gguf() != nullptr) {
        return Error::unsupported(fmt::format(
            "--stream: {} is a GGUF file; streamed runs read safetensors", path.string()));
    }
    return ckpt;
}

Result<StreamedRun> runStreamed(const std::filesystem::path& path, const model::ModelSpec& spec,
    const RunOptions& options, const StreamOptions& stream, Progress& progress,
    std::stop_token stop, const LayerSlice* slice)
{
    DAY0_TRY(refuseUnstreamable(spec, options));
    if (slice != nullptr) {
        DAY0_TRY(refuseUnsliceable(spec, options));
    }
    if (options.newTokens < 1) {
        return Error::badInput("--tokens must be at least 1");
    }
    auto ckpt = openStreamedCheckpoint(path);
    if (!ckpt) {
        return ckpt.error();
    }
    const bool fp64 = options.precision.isF64();
    CheckpointStream layers(std::move(*ckpt), fp64 ? DType::F64 : DType::F32,
        roundsWeights(options.precision), stream, options.newTokens, progress, std::move(stop));
    DAY0_TRY(layers.plan(spec, slice));
    auto run = detail::runOverStream(spec, fp64, options, layers, progress, slice);
    if (!run) {
        return run.error();
    }
    StreamedRun out { std::move(*run), layers.stats() };
    out.stats.peakRssBytes = peakResidentBytes();
    auto& extra = out.run.dump.info.extra;
    extra["streamed"] = true;
    extra["stream_bytes_read"] = out.stats.bytesRead;
    return out;
}

Result<void> checkStreamable(const model::ModelSpec& spec, const RunOptions& options)
{
    return refuseUnstreamable(spec, options);
}

namespace detail {

Result<std::unique_ptr<LayerStream>> openCheckpointStream(const std::filesystem::path& path,
    const model::ModelSpec& spec, const PrecisionPlan& plan, const StreamOptions& stream,
    std::int64_t steps, Progress& progress, std::stop_token stop)
{
    RunOptions options;
    options.precision = plan;
    DAY0_TRY(refuseUnstreamable(spec, options));
    auto ckpt = openStreamedCheckpoint(path);
    if (!ckpt) {
        return ckpt.error();
    }
    auto layers = std::make_unique<CheckpointStream>(std::move(*ckpt),
        plan.isF64() ? DType::F64 : DType::F32, roundsWeights(plan), stream, steps, progress,
        std::move(stop));
    DAY0_TRY(layers->plan(spec, nullptr));
    return std::unique_ptr<LayerStream>(std::move(layers));
}

} // namespace detail

} // namespace day0::exec
