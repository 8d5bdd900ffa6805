#include "base/units.h"
#include "checkpoint/dequantized_weights.h"
#include "exec/layer_stream_stream.h"
#include "exec/layout_weights.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <charconv>
#include <mutex>

namespace day0::exec::detail {

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

CheckpointStream::CheckpointStream(checkpoint::Checkpoint ckpt, DType compute, bool rounds,
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
    m_beforeRead = options.beforeRead;
    returnFreedLargeBuffers();
}

CheckpointStream::~CheckpointStream()
{
    m_abort.request_stop();
    if (m_loader.joinable()) {
        m_loader.join();
    }
}

Result<void> CheckpointStream::plan(const model::ModelSpec& spec, const LayerSlice* slice)
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
        if (phase >= 1 && phase <= layers && spec.moe && spec.layers[std::size_t(layer)].moe()) {
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
            std::max<std::uint64_t>(1, largestStored / std::max<std::uint64_t>(1, largestChunk)) });
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

Result<std::optional<Piece>> CheckpointStream::describe(
    const detail::WeightRequirement& req, const model::ModelSpec& spec) const
{
    const std::string where = m_ckpt.root().string();
    const checkpoint::CheckpointTensor* t = m_ckpt.find(req.name);
    if (t == nullptr) {
        if (req.optional) {
            return std::optional<Piece>();
        }
        return Error::badInput(fmt::format(
            "{}: missing tensor '{}' needed by the {} forward", where, req.name, spec.modelType));
    }
    if (t->shape != req.shape) {
        return Error::badInput(fmt::format("{}: tensor '{}' has shape {} but the config needs {}",
            where, req.name, numerics::shapeString(t->shape), numerics::shapeString(req.shape)));
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
        return Error::badInput(
            fmt::format("{}: tensor '{}' is {} {}; a {}x{}-block scale of {} needs float {}", where,
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

std::uint64_t CheckpointStream::loadedBytes(const Phase& ph) const
{
    return ph.convertedBytes - (m_routedOnly ? ph.expertConverted : 0);
}

bool CheckpointStream::readsAhead(std::size_t index) const
{
    const Phase& ph = m_phases[index];
    return std::any_of(ph.pieces.begin(), ph.pieces.end(),
        [&](const Piece& p) { return !m_routedOnly || p.expert < 0; });
}

std::uint64_t CheckpointStream::pairNeed(std::size_t current, std::size_t next) const
{
    const Phase& ph = m_phases[current];
    return ph.convertedBytes + ph.roundedBytes + loadedBytes(m_phases[next]) + m_readHold;
}

} // namespace day0::exec::detail
