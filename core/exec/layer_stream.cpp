#include "exec/layer_stream.h"

#include "base/resident_pages.h"
#include "base/units.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/dequantized_weights.h"
#include "exec/backend.h"
#include "exec/forward.h"
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

namespace {

using numerics::Shape;
using numerics::Tensor;

using Piece = detail::StreamPiece;

/// The weights one module of the forward reads, loaded together.
struct Phase {
    std::string label; ///< "model.embed_tokens", "model.layers.3", "model.norm", "lm_head"
    std::vector<Piece> pieces;
    std::uint64_t convertedBytes = 0; ///< in the compute type
    /// An emulated precision's rounded copies of the phase's matrices (Forward's gemmWeight),
    /// held while the phase runs.
    std::uint64_t roundedBytes = 0;
    std::uint64_t storedBytes = 0; ///< stored bytes read (scales included)
    /// The largest piece's stored bytes (scales included): bounds its read (the reader's
    /// buffer and the scales' mapped pages).
    std::uint64_t largestStored = 0;
    /// A MoE layer: its router's anchor ("model.layers.3.mlp.gate"), the pieces of each routed
    /// expert (indices into `pieces`) and their stored bytes; empty router: a dense phase.
    std::string router;
    std::map<int, std::vector<std::size_t>> experts;
    std::uint64_t expertStored = 0;
    std::uint64_t expertConverted = 0; ///< the routed experts' share of convertedBytes
};

/// Threads one tensor is read and converted on at most: the copies out of the page cache and
/// the conversions scale with cores until memory bandwidth is drawn.
constexpr std::size_t kMaxReadWorkers = 8;

/// The routed expert `name` belongs to in the MoE block `ffn` ("<ffn>.experts.<E>.…" → E); -1
/// for any other weight.
int expertOf(std::string_view name, const std::string& ffn)
{
    const std::string prefix = ffn + ".experts.";
    if (!name.starts_with(prefix)) {
        return -1;
    }
    name.remove_prefix(prefix.size());
    int e = -1;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), e);
    if (ec != std::errc() || end == name.data() + name.size() || *end != '.') {
        return -1;
    }
    return e;
}

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
/// a streamed run's per-layer buffers, freed layer after layer, come back from the heap and stay
/// resident after they are freed: a streamed validate on a 402 MiB checkpoint peaked at 281 MiB
/// against a 256 MiB budget (138 MiB with the threshold fixed). Fixing the threshold at 1 MiB
/// keeps large buffers mapped, so freeing one returns it to the system; it stays so for the
/// rest of the process, which from here on streams.
void returnFreedLargeBuffers()
{
    static std::once_flag once;
    std::call_once(once, [] { ::mallopt(M_MMAP_THRESHOLD, 1 << 20); });
}

class CheckpointStream final : public detail::LayerStream {
public:
    /// `rounds`: the run emulates a lower precision, so the forward keeps a rounded copy of
    /// each matrix of the phase that runs (counted against the budget).
    CheckpointStream(checkpoint::Checkpoint ckpt, DType compute, bool rounds,
        const StreamOptions& options, std::int64_t steps, Progress& progress, std::stop_token stop)
        : m_ckpt(std::move(ckpt))
        , m_compute(compute)
        , m_rounds(rounds)
        , m_steps(steps)
        , m_progress(progress)
        , m_link(std::in_place, std::move(stop), [this] { m_abort.request_stop(); })
    {
        m_stats.memoryBudget = options.memoryBudget;
        m_routedOnly = !options.allExperts;
        returnFreedLargeBuffers();
    }

    /// A run that ends (done, failed or cancelled) stops and joins its loader first.
    ~CheckpointStream() override
    {
        m_abort.request_stop();
        if (m_loader.joinable()) {
            m_loader.join();
        }
    }
    CheckpointStream(const CheckpointStream&) = delete;
    CheckpointStream& operator=(const CheckpointStream&) = delete;

    /// Maps every weight the forward reads to its phase and checks names, shapes, dtypes and
    /// scales, and the budget against the largest phase, before anything runs.
    Result<void> plan(const model::ModelSpec& spec, const LayerSlice* slice)
    {
        const int layers = int(spec.numLayers);
        m_phases.resize(std::size_t(layers) + 3);
        m_phases[0].label = "model.embed_tokens";
        for (int l = 0; l < layers; ++l) {
            m_phases[std::size_t(l) + 1].label = fmt::format("model.layers.{}", l);
            m_next[fmt::format("model.layers.{}", l)] = l + 2;
        }
        m_phases[std::size_t(layers) + 1].label = "model.norm";
        m_phases[std::size_t(layers) + 2].label = "lm_head";
        m_next["model.embed_tokens"] = 1;
        m_next["model.norm"] = layers + 2;
        if (slice != nullptr) {
            // Only the slice's layers: the boundary after its last one releases them.
            m_sliced = true;
            m_next[fmt::format("model.layers.{}", slice->last)] = kReleaseOnly;
        }
        for (auto req : detail::requiredWeights(spec)) {
            if (req.integer || detail::zeroCentredNorm(spec, req.name)) {
                return Error::unsupported(
                    fmt::format("--stream: weight '{}' is loaded transformed", req.name));
            }
            int phase = -1;
            if (req.name == "model.embed_tokens.weight") {
                phase = 0;
            } else if (req.name == "model.norm.weight") {
                phase = layers + 1;
            } else if (req.name == "lm_head.weight") {
                phase = layers + 2;
                if (req.optional && m_ckpt.find(req.name) == nullptr) {
                    req.name = "model.embed_tokens.weight"; // tied: the head reads the embedding
                }
            } else {
                int l = -1;
                const std::string_view rest = std::string_view(req.name).substr(
                    req.name.starts_with("model.layers.") ? 13 : req.name.size());
                const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), l);
                if (ec == std::errc() && l >= 0 && l < layers && end != rest.data() + rest.size()
                    && *end == '.') {
                    phase = l + 1;
                }
            }
            if (phase < 0) {
                return Error::unsupported(
                    fmt::format("--stream: weight '{}' belongs to no decoder layer", req.name));
            }
            if (slice != nullptr && (phase <= slice->first || phase > slice->last + 1)) {
                continue; // outside the slice: never read
            }
            auto piece = describe(req, spec);
            if (!piece) {
                return piece.error();
            }
            if (!piece->has_value()) {
                continue; // an optional weight the checkpoint lacks
            }
            Phase& ph = m_phases[std::size_t(phase)];
            const int layer = phase - 1;
            if (phase >= 1 && phase <= layers && spec.moe
                && spec.layers[std::size_t(layer)].moe()) {
                const auto names = detail::layerNames(spec, layer);
                ph.router = names.router;
                (*piece)->expert = expertOf((*piece)->name, names.ffn);
            }
            const auto converted = std::uint64_t(numerics::numelOf((*piece)->shape))
                * std::uint64_t(dtypeSize(m_compute));
            const auto stored = (*piece)->bytes.size() + (*piece)->scaleBytes.size();
            ph.convertedBytes += converted;
            if (m_rounds && phase > 0 && (*piece)->shape.size() == 2) {
                ph.roundedBytes += converted;
            }
            ph.storedBytes += stored;
            ph.largestStored = std::max<std::uint64_t>(ph.largestStored, stored);
            if ((*piece)->expert >= 0) {
                ph.experts[(*piece)->expert].push_back(ph.pieces.size());
                ph.expertStored += stored;
                ph.expertConverted += converted;
            }
            ph.pieces.push_back(std::move(**piece));
        }
        std::uint64_t total = 0;
        std::uint64_t largestStored = 0;
        std::uint64_t largestChunk = 0;
        for (const auto& ph : m_phases) {
            const std::uint64_t need = ph.convertedBytes + ph.roundedBytes + ph.largestStored;
            if (need > m_stats.largestPhaseBytes) {
                m_stats.largestPhaseBytes = need;
                m_stats.largestPhase = ph.label;
            }
            total += ph.storedBytes;
            largestStored = std::max(largestStored, ph.largestStored);
            for (const Piece& p : ph.pieces) {
                largestChunk = std::max(largestChunk, detail::PieceReader::readBufferBytes(p));
            }
        }
        // Each worker holds a chunk: together never more than the largest tensor as stored.
        const std::size_t workers = std::min<std::size_t>(
            { std::max(1u, std::thread::hardware_concurrency()), kMaxReadWorkers,
                std::max<std::uint64_t>(
                    1, largestStored / std::max<std::uint64_t>(1, largestChunk)) });
        m_reader.setWorkers(workers);
        m_readHold = std::uint64_t(workers) * largestChunk;
        for (std::size_t i = 0; i < m_phases.size(); ++i) {
            const std::size_t next = (i + 1) % m_phases.size();
            if (readsAhead(next)) {
                m_stats.largestPairBytes = std::max(m_stats.largestPairBytes, pairNeed(i, next));
            }
        }
        const std::uint64_t budget = m_stats.memoryBudget;
        if (budget > 0 && m_stats.largestPhaseBytes > budget) {
            const auto& ph = *std::find_if(m_phases.begin(), m_phases.end(),
                [&](const Phase& p) { return p.label == m_stats.largestPhase; });
            return Error::badInput(fmt::format(
                "--memory-budget {}: {} alone needs {} bytes ({}: {} of weights in {}{} and {} "
                "of its largest tensor as stored, the most its read holds); raise the budget to "
                "at least that",
                formatBytes(Bytes(std::int64_t(budget))), ph.label, m_stats.largestPhaseBytes,
                formatBytes(Bytes(std::int64_t(m_stats.largestPhaseBytes))),
                formatBytes(Bytes(std::int64_t(ph.convertedBytes))), dtypeName(m_compute),
                ph.roundedBytes > 0 ? fmt::format(", {} of their copies rounded to the target's "
                                                  "precision",
                    formatBytes(Bytes(std::int64_t(ph.roundedBytes))))
                                    : std::string(),
                formatBytes(Bytes(std::int64_t(ph.largestStored)))));
        }
        m_progress.setDone(0);
        m_progressTotal = std::int64_t(total) * m_steps;
        m_progress.setTotal(m_progressTotal);
        return success();
    }

    detail::WeightTable& table() override { return m_table; }

    Result<void> beginStep() override
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

    void enter(const std::string& anchor) override
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

    Result<void> endStep() override
    {
        settle();
        release();
        if (m_stepError) {
            dropAhead();
            return *m_stepError;
        }
        return success();
    }

    void routed(const std::string& router, std::span<const std::int64_t> experts) override
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

    [[nodiscard]] std::stop_token stopToken() const override { return m_abort.get_token(); }

    [[nodiscard]] const StreamStats& stats() const { return m_stats; }

private:
    /// The piece of `req`, checked as Engine::create's loader checks it; nullopt for an optional
    /// weight the checkpoint lacks.
    Result<std::optional<Piece>> describe(
        const detail::WeightRequirement& req, const model::ModelSpec& spec) const
    {
        const std::string where = m_ckpt.root().string();
        const checkpoint::CheckpointTensor* t = m_ckpt.find(req.name);
        if (t == nullptr) {
            if (req.optional) {
                return std::optional<Piece>();
            }
            return Error::badInput(fmt::format("{}: missing tensor '{}' needed by the {} forward",
                where, req.name, spec.modelType));
        }
        if (t->shape != req.shape) {
            return Error::badInput(
                fmt::format("{}: tensor '{}' has shape {} but the config needs {}", where, req.name,
                    numerics::shapeString(t->shape), numerics::shapeString(req.shape)));
        }
        if (!t->dtype || !isFloat(*t->dtype)) {
            return Error::badInput(fmt::format(
                "{}: tensor '{}' is {}, expected a floating type", where, req.name, t->dtypeName));
        }
        Piece p;
        p.name = req.name;
        p.shape = req.shape;
        p.stored = *t->dtype;
        auto bytes = m_ckpt.data(*t);
        if (!bytes) {
            return bytes.error();
        }
        p.bytes = *bytes;
        p.file = (m_ckpt.root() / t->file).string();
        p.offset = t->offset;
        const bool fp8 = p.stored == DType::F8E4M3 || p.stored == DType::F8E5M2;
        p.exactFp8 = fp8;
        const std::string scaleName = req.name + "_scale_inv";
        const checkpoint::CheckpointTensor* scale = fp8 ? m_ckpt.find(scaleName) : nullptr;
        if (scale == nullptr) {
            return std::optional<Piece>(std::move(p));
        }
        const std::int64_t rows = req.shape[0];
        const std::int64_t cols = req.shape.size() > 1 ? req.shape[1] : 1;
        p.blockRows = spec.quantization ? spec.quantization->blockRows : 128;
        p.blockCols = spec.quantization ? spec.quantization->blockCols : 128;
        const Shape expected { (rows + p.blockRows - 1) / p.blockRows,
            (cols + p.blockCols - 1) / p.blockCols };
        if (scale->shape != expected || !scale->dtype || !isFloat(*scale->dtype)) {
            return Error::badInput(fmt::format(
                "{}: tensor '{}' is {} {}; a {}x{}-block scale of {} needs float {}", where,
                scaleName, scale->dtypeName, numerics::shapeString(scale->shape), p.blockRows,
                p.blockCols, numerics::shapeString(req.shape), numerics::shapeString(expected)));
        }
        auto scaleBytes = m_ckpt.data(*scale);
        if (!scaleBytes) {
            return scaleBytes.error();
        }
        p.scaleBytes = *scaleBytes;
        p.scaleDtype = *scale->dtype;
        return std::optional<Piece>(std::move(p));
    }

    void fail(Error error)
    {
        if (!m_stepError) {
            m_stepError = std::move(error);
        }
        m_abort.request_stop();
    }

    /// Where a phase's tensors are being read to: the table, the converted bytes it holds, and
    /// what reading them cost.
    struct Loading {
        detail::WeightTable& table;
        std::uint64_t& held;
        std::uint64_t bytesRead = 0;
        std::optional<Error> error;
    };

    /// A phase read ahead on the loader thread while the one before it computes.
    struct Ahead {
        int index = -1; ///< the phase; -1: none
        detail::WeightTable table;
        std::uint64_t held = 0;
        std::uint64_t bytesRead = 0;
        double seconds = 0.0; ///< the loader's time reading it
        std::optional<Error> error;
    };

    /// Moves the current phase's buffers to the free pool. The loader must be idle (settle()).
    void release()
    {
        for (auto& [name, t] : m_table.tensors) {
            m_free.emplace(std::uint64_t(t.byteSize()), std::move(t));
        }
        m_table.tensors.clear();
        m_table.exactFp8.clear();
        m_current = -1;
    }

    /// A phase read ahead but not entered: its buffers go to the free pool.
    void dropAhead()
    {
        for (auto& [name, t] : m_ahead.table.tensors) {
            m_free.emplace(std::uint64_t(t.byteSize()), std::move(t));
        }
        m_ahead.table.tensors.clear();
        m_ahead.table.exactFp8.clear();
        m_ahead.index = -1;
        m_ahead.held = 0;
    }

    /// Waits for the loader's phase (the time waited is the run's time in loads) and takes in
    /// what it read, its failure included. The reader and the free pool are then this thread's.
    void settle()
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

    void notePeak()
    {
        m_stats.residentPeakBytes
            = std::max(m_stats.residentPeakBytes, m_held + (m_ahead.index >= 0 ? m_ahead.held : 0));
    }

    /// The converted bytes a load of `ph` reads (its routed experts wait for the router).
    [[nodiscard]] std::uint64_t loadedBytes(const Phase& ph) const
    {
        return ph.convertedBytes - (m_routedOnly ? ph.expertConverted : 0);
    }

    /// Whether phase `index` is read by a load (not a phase outside the slice).
    [[nodiscard]] bool readsAhead(std::size_t index) const
    {
        const Phase& ph = m_phases[index];
        return std::any_of(ph.pieces.begin(), ph.pieces.end(),
            [&](const Piece& p) { return !m_routedOnly || p.expert < 0; });
    }

    /// What phase `current` (all its experts and rounded copies) and phase `next` read ahead
    /// beside it hold at once, with the reader's buffers.
    [[nodiscard]] std::uint64_t pairNeed(std::size_t current, std::size_t next) const
    {
        const Phase& ph = m_phases[current];
        return ph.convertedBytes + ph.roundedBytes + loadedBytes(m_phases[next]) + m_readHold;
    }

    /// Releases the current phase, makes phase `index` current (read ahead already, else read
    /// now into reused buffers: a free buffer of the same size, else a new one; free buffers it
    /// does not reuse are dropped first) and starts reading the next phase ahead. A MoE layer's
    /// routed experts wait for its router (routed()), unless every expert is asked for.
    void load(int index)
    {
        settle();
        release();
        m_current = index;
        m_loadedExperts.clear();
        const Phase& ph = m_phases[std::size_t(index)];
        const auto started = std::chrono::steady_clock::now();
        const std::string step
            = m_step <= 1 ? "prefill" : fmt::format("decode step {}", m_step - 1);
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

    /// Starts reading the phase after `index` on the loader thread, while `index` computes
    /// (after the head: the embedding of the next step, none after the last step), where the
    /// two fit the budget together; else only its pages are read ahead (MADV_WILLNEED) and it
    /// loads when the forward enters it.
    void readAhead(std::size_t index)
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

    /// Reads `ph`'s pages ahead into the page cache (MADV_WILLNEED); its routed experts only
    /// once its router has chosen.
    void advisePages(const Phase& ph) const
    {
        for (const Piece& p : ph.pieces) {
            if (!m_routedOnly || p.expert < 0) {
                prefetchPages(p.bytes);
                prefetchPages(p.scaleBytes);
            }
        }
    }

    /// Reads `ph`'s tensors (its routed experts only if every expert is asked for) into
    /// `into`, after dropping the free buffers it does not reuse (so at most the current phase
    /// and this one are held). On the loader thread or, with the loader idle, on the run's.
    void fill(const Phase& ph, Loading& into)
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

    /// A load on the run's thread: its bytes and failure taken in.
    void finish(Loading& into)
    {
        m_stats.bytesRead += into.bytesRead;
        into.bytesRead = 0;
        if (into.error) {
            fail(*std::exchange(into.error, std::nullopt));
        }
    }

    [[nodiscard]] std::uint64_t bytesOf(const Piece& p) const
    {
        return std::uint64_t(numerics::numelOf(p.shape)) * std::uint64_t(dtypeSize(m_compute));
    }

    /// Converts `p` into a free buffer of its size (else a new one) and puts it in the table.
    void loadPiece(const Piece& p, Loading& into)
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
        if (!m_abort.stop_requested()) {
            // Read from the file a chunk at a time (the read-ahead advice brought it into the
            // page cache), so its mapped pages never enter this process.
            if (auto converted = m_reader.read(p, slot, m_compute, m_abort.get_token());
                !converted) {
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

    [[nodiscard]] std::string rateText() const
    {
        if (m_stats.readSeconds <= 0.0) {
            return {};
        }
        return fmt::format(" ({} read, {}/s)", formatBytes(Bytes(std::int64_t(m_stats.bytesRead))),
            formatBytes(Bytes(std::int64_t(double(m_stats.bytesRead) / m_stats.readSeconds))));
    }

    static constexpr int kReleaseOnly = -1; ///< m_next: the slice ends here

    checkpoint::Checkpoint m_ckpt;
    DType m_compute;
    bool m_rounds = false;
    bool m_sliced = false;
    bool m_routedOnly = true; ///< MoE layers: only the experts their router chose
    int m_current = -1; ///< the phase in the table
    std::set<int> m_loadedExperts; ///< of the current phase
    std::uint64_t m_held = 0; ///< converted bytes in the table
    std::int64_t m_progressTotal = 0;
    std::int64_t m_steps;
    Progress& m_progress;
    std::stop_source m_abort;
    std::optional<std::stop_callback<std::function<void()>>> m_link;
    std::vector<Phase> m_phases;
    std::map<std::string, int> m_next; ///< anchor finished → phase that follows
    detail::WeightTable m_table;
    std::multimap<std::uint64_t, Tensor> m_free; ///< released buffers, by byte size
    detail::PieceReader m_reader;
    std::uint64_t m_readHold = 0; ///< the reader's buffers, at most
    int m_step = 0;
    std::optional<Error> m_stepError;
    StreamStats m_stats;
    Ahead m_ahead; ///< the loader's while it runs
    std::jthread m_loader; ///< reads m_ahead; joined by settle() and the destructor
};

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
