#include "parallel/rank_stream.h"

#include "base/resident_pages.h"
#include "base/units.h"
#include "checkpoint/checkpoint.h"
#include "exec/layer_stream.h"
#include "model/layer_graph.h"
#include "parallel/forward.h"
#include "parallel/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <mutex>
#include <set>
#include <vector>

namespace day0::parallel {

namespace {

/// A mapped safetensors checkpoint read as stored, as exec::openCheckpointWeights reads it, except
/// that each read releases the tensor's mapped pages once they are copied. Single-threaded (one
/// rank's).
class ReleasingWeights final : public exec::WeightSource {
public:
    explicit ReleasingWeights(checkpoint::Checkpoint ckpt)
        : m_ckpt(std::move(ckpt))
    {
    }

    [[nodiscard]] bool has(const std::string& name) const override
    {
        return m_ckpt.find(name) != nullptr;
    }

    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override
    {
        const auto* t = m_ckpt.find(name);
        if (t == nullptr) {
            return Error::badInput(fmt::format("{}: no tensor '{}'", describe(), name));
        }
        if (!t->dtype) {
            return Error::unsupported(fmt::format(
                "{}: tensor '{}' is {}, which is not streamed", describe(), name, t->dtypeName));
        }
        auto bytes = m_ckpt.data(*t);
        if (!bytes) {
            return bytes.error();
        }
        numerics::Tensor tensor = numerics::Tensor::fromBytes(t->shape, *t->dtype, *bytes);
        releaseResidentPages(*bytes);
        m_read += std::int64_t(bytes->size());
        return tensor;
    }

    [[nodiscard]] std::vector<std::string> names() const override
    {
        std::vector<std::string> out;
        for (const auto& t : m_ckpt.tensors()) {
            out.push_back(t.name);
        }
        return out;
    }

    [[nodiscard]] std::string describe() const override { return m_ckpt.root().string(); }

    /// Mapped bytes of `name` (0 when absent).
    [[nodiscard]] std::int64_t storedBytes(const std::string& name) const
    {
        const auto* t = m_ckpt.find(name);
        return t == nullptr ? 0 : std::int64_t(t->bytes);
    }

    void prefetch(const std::string& name) const
    {
        if (const auto* t = m_ckpt.find(name)) {
            if (auto bytes = m_ckpt.data(*t)) {
                prefetchPages(*bytes);
            }
        }
    }

    [[nodiscard]] std::int64_t bytesRead() const { return m_read; }

private:
    checkpoint::Checkpoint m_ckpt;
    mutable std::int64_t m_read = 0;
};

/// The weights of one phase of one rank and what holding them costs.
struct Phase {
    std::string label; ///< "model.embed_tokens", "model.layers.3", "lm_head"
    std::set<std::string> names; ///< the forward's weights it loads (the rank may hold none)
    std::int64_t sliceBytes = 0; ///< this rank's fp32 slices
    std::int64_t transientBytes = 0; ///< the largest tensor's mapped pages and copies
    [[nodiscard]] std::int64_t need() const { return sliceBytes + transientBytes; }
};

/// Large buffers freed phase after phase go back to the system (layer_stream.cpp says why).
void returnFreedLargeBuffers()
{
    static std::once_flag once;
    std::call_once(once, [] { ::mallopt(M_MMAP_THRESHOLD, 1 << 20); });
}

} // namespace

std::uint64_t rankShareOfBudget(std::uint64_t budget, int ranks)
{
    return ranks > 0 ? budget / std::uint64_t(ranks) : budget;
}

BudgetShare inProcessShareOfBudget(std::uint64_t budget, int ranks, bool perRank)
{
    BudgetShare share;
    if (budget == 0) {
        share.basis = "no budget";
        return share;
    }
    const std::string size = formatBytes(Bytes(double(budget)));
    if (perRank || ranks <= 1) {
        share.perRank = budget;
        share.basis = perRank ? fmt::format("{} per rank (--memory-budget-per-rank)", size)
                              : fmt::format("{} for the one rank", size);
        return share;
    }
    share.perRank = rankShareOfBudget(budget, ranks);
    share.sharers = ranks;
    share.basis = fmt::format("{} / {} in-process ranks", size, ranks);
    return share;
}

Result<BudgetShare> processShareOfBudget(std::uint64_t budget, int worldSize, bool perRank,
    std::optional<int> nodeProcesses, const EnvLookup& env)
{
    BudgetShare share;
    if (budget == 0) {
        share.basis = "no budget";
        return share;
    }
    const std::string size = formatBytes(Bytes(double(budget)));
    if (perRank) {
        share.perRank = budget;
        share.basis = fmt::format("{} per process (--memory-budget-per-rank)", size);
        return share;
    }
    const auto onThisNode = [&](int local, const std::string& source) {
        share.perRank = rankShareOfBudget(budget, local);
        share.sharers = local;
        share.basis = fmt::format("{} per node / {} process{} on this node ({})", size, local,
            local == 1 ? "" : "es", source);
    };
    if (nodeProcesses) {
        if (*nodeProcesses < 1 || *nodeProcesses > std::max(1, worldSize)) {
            return Error::internal(fmt::format("--memory-budget: the communicator counts {} "
                                               "processes on this node, outside 1 to the "
                                               "world's {}",
                *nodeProcesses, worldSize));
        }
        onThisNode(*nodeProcesses, "MPI_COMM_TYPE_SHARED");
        return share;
    }
    for (const char* name : kLocalSizeVariables) {
        const char* value = env(name);
        if (value == nullptr) {
            continue;
        }
        int local = 0;
        const std::string_view text(value);
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), local);
        if (ec != std::errc() || end != text.data() + text.size() || local < 1
            || local > std::max(1, worldSize)) {
            return Error::badInput(fmt::format("--memory-budget: {}='{}' is not a count of "
                                               "processes on this node (1 to the world's {})",
                name, text, worldSize));
        }
        onThisNode(local, name);
        return share;
    }
    share.perRank = rankShareOfBudget(budget, worldSize);
    share.sharers = std::max(1, worldSize);
    share.basis = fmt::format("{} / all {} processes: no launcher variable ({}) says how many "
                              "share this node",
        size, share.sharers, fmt::join(kLocalSizeVariables, ", "));
    return share;
}

namespace detail {

struct RankStream::Impl {
    const model::ModelSpec& spec;
    checkpoint::ShardLayout layout;
    checkpoint::RankCoord coord;
    RankStreamOptions options;
    std::unique_ptr<ReleasingWeights> source;
    std::vector<Phase> phases; ///< index: phase + 1 (the embedding is phase −1)
    exec::detail::WeightTable table;
    int current = INT_MIN;
    RankStreamStats stats;

    /// Assigns the forward's weights to phases and sizes each for this rank.
    Result<void> plan();
};

Result<void> RankStream::Impl::plan()
{
    const int layers = int(spec.numLayers);
    phases.resize(std::size_t(layers) + 2);
    phases.front().label = "model.embed_tokens";
    for (int l = 0; l < layers; ++l) {
        phases[std::size_t(l) + 1].label = fmt::format("model.layers.{}", l);
    }
    phases.back().label = "lm_head";
    const model::LayerGraph graph = model::buildLayerGraph(spec);
    const bool tied = !source->has("lm_head.weight");
    const auto refuse = [](const std::string& what) {
        return Error::unsupported(fmt::format("--stream: sharded run: {}", what));
    };
    for (const auto& req : exec::detail::requiredWeights(spec)) {
        if (req.integer) {
            return refuse(fmt::format("weight '{}' is loaded transformed", req.name));
        }
        std::vector<int> into; // phase indices
        if (req.name == "model.embed_tokens.weight") {
            into.push_back(0);
            if (tied) {
                into.push_back(layers + 1); // the tied head reads the embedding
            }
        } else if (req.name == "model.norm.weight" || req.name == "lm_head.weight") {
            if (req.name == "lm_head.weight" && tied) {
                continue;
            }
            into.push_back(layers + 1);
        } else {
            for (int l = 0; l < layers && into.empty(); ++l) {
                if (req.name.starts_with(phases[std::size_t(l) + 1].label + ".")) {
                    into.push_back(l + 1);
                }
            }
        }
        if (into.empty()) {
            return refuse(fmt::format("weight '{}' belongs to no decoder layer", req.name));
        }
        const model::TensorSpec* t = graph.findTensor(req.name);
        if (t == nullptr) {
            return refuse(
                fmt::format("weight '{}' is not in the {} layer graph", req.name, spec.modelType));
        }
        auto slice = checkpoint::sliceFor(graph, *t, layout, coord);
        if (!slice) {
            return slice.error().withContext(source->describe());
        }
        const bool held = slice->has_value();
        const std::int64_t sliceBytes
            = held ? numerics::numelOf(checkpoint::sliceShape(req.shape, **slice)) * 4 : 0;
        const std::int64_t stored
            = source->storedBytes(req.name) + source->storedBytes(req.name + "_scale_inv");
        // Mapped pages and their copy as stored; a slice of the full checkpoint also passes
        // through the whole tensor in fp32.
        const std::int64_t transient = held ? 2 * stored
                + (options.presliced || (*slice)->whole() ? 0 : numerics::numelOf(req.shape) * 4)
                                            : 0;
        for (const int i : into) {
            // Only the phases this rank enters: the embedding on the first stage, the head on
            // the last (the tied embedding is held by both), its stage's layers.
            const bool entered = (i == 0 && coord.stage == 0)
                || (i == layers + 1 && coord.stage == layout.pp - 1) || (i > 0 && i <= layers);
            if (!held || !entered) {
                continue;
            }
            Phase& ph = phases[std::size_t(i)];
            ph.names.insert(req.name);
            ph.sliceBytes += sliceBytes;
            ph.transientBytes = std::max(ph.transientBytes, transient);
        }
    }
    for (const auto& ph : phases) {
        if (ph.need() > stats.largestPhaseBytes) {
            stats.largestPhaseBytes = ph.need();
            stats.largestPhase = ph.label;
        }
    }
    const auto budget = options.rankBudget;
    if (budget > 0 && std::uint64_t(stats.largestPhaseBytes) > budget) {
        const auto& ph = *std::find_if(phases.begin(), phases.end(),
            [&](const Phase& p) { return p.label == stats.largestPhase; });
        return Error::badInput(fmt::format(
            "--memory-budget: rank {} may hold {} (the run's budget shared by its {} ranks), but "
            "its slice of {} alone needs {} bytes ({} of fp32 slices and {} of the largest "
            "tensor's mapped pages and copies); raise the budget to at least {} times that",
            coord.rank, formatBytes(Bytes(std::int64_t(budget))), layout.worldSize(), ph.label,
            ph.need(), formatBytes(Bytes(ph.sliceBytes)), formatBytes(Bytes(ph.transientBytes)),
            layout.worldSize()));
    }
    return success();
}

RankStream::RankStream(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

RankStream::~RankStream() = default;

Result<std::unique_ptr<RankStream>> RankStream::open(const model::ModelSpec& spec,
    const std::filesystem::path& path, const checkpoint::ShardLayout& layout,
    const checkpoint::RankCoord& coord, const RankStreamOptions& options)
{
    DAY0_TRY(exec::checkStreamable(spec, exec::RunOptions {}));
    auto ckpt = exec::openStreamedCheckpoint(path);
    if (!ckpt) {
        return ckpt.error();
    }
    returnFreedLargeBuffers();
    auto impl = std::unique_ptr<Impl>(new Impl { spec, layout, coord, options,
        std::make_unique<ReleasingWeights>(std::move(*ckpt)), {}, {}, INT_MIN, {} });
    DAY0_TRY(impl->plan());
    return std::unique_ptr<RankStream>(new RankStream(std::move(impl)));
}

exec::detail::WeightTable& RankStream::table() { return m_impl->table; }

const RankStreamStats& RankStream::stats() const
{
    m_impl->stats.bytesRead = m_impl->source->bytesRead();
    return m_impl->stats;
}

void RankStream::release()
{
    m_impl->table = {};
    m_impl->current = INT_MIN;
}

Result<void> RankStream::enter(int phase, std::stop_token stop)
{
    Impl& s = *m_impl;
    const int index = phase + 1;
    if (index < 0 || index >= int(s.phases.size())) {
        return Error::internal(fmt::format("--stream: rank {}: no phase {}", s.coord.rank, phase));
    }
    release();
    const Phase& ph = s.phases[std::size_t(index)];
    std::int64_t bytes = 0;
    auto loaded = loadRankWeights(s.spec, *s.source, s.layout, s.coord, bytes, std::move(stop),
        s.options.presliced, [&ph](const std::string& name) { return ph.names.contains(name); });
    if (!loaded) {
        return loaded.error().withContext(fmt::format("rank {}: {}", s.coord.rank, ph.label));
    }
    // The forward holds a reference to the table: filled in place.
    s.table = std::move(*loaded);
    s.current = phase;
    ++s.stats.phasesLoaded;
    if (std::size_t(index) + 1 < s.phases.size()) {
        for (const auto& name : s.phases[std::size_t(index) + 1].names) {
            s.source->prefetch(name);
        }
    }
    return success();
}

} // namespace detail

} // namespace day0::parallel
