#include "train/trainer.h"

#include "comm/in_process_communicator.h"
#include "train/next_token_mlp.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

namespace day0::train {

namespace {

using Clock = std::chrono::steady_clock;

/// The number formats a precision uses.
struct Formats {
    DType weights; ///< the model's copy every rank holds and computes on
    DType arith; ///< master weights, gradients after the reduction, optimizer arithmetic
};

Formats formatsOf(TrainPrecision p)
{
    switch (p) {
    case TrainPrecision::F64:
        return { DType::F64, DType::F64 };
    case TrainPrecision::F32:
        return { DType::F32, DType::F32 };
    case TrainPrecision::MixedBf16:
        return { DType::BF16, DType::F32 };
    }
    return { DType::F64, DType::F64 };
}

/// A rank's slice of the flat buffer under ZeRO-1: [begin, end), from chunks of the buffer
/// padded to a multiple of dp so that the all-gather has equal counts.
struct ShardRange {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t chunk = 0; ///< padded elements per rank
};

ShardRange shardOf(std::int64_t total, int dp, int rank, int zero)
{
    if (zero == 0) {
        return { 0, total, total };
    }
    const std::int64_t chunk = (total + dp - 1) / dp;
    const std::int64_t begin = std::min(total, chunk * rank);
    return { begin, std::min(total, begin + chunk), chunk };
}

/// The communicators and place of one rank: world rank = dpRank × tp + tpRank.
struct RankGroups {
    comm::Communicator* world = nullptr;
    /// The data-parallel peers: the ranks of the same TP position (the world without TP).
    std::shared_ptr<comm::Communicator> dp;
    std::shared_ptr<comm::Communicator> tp; ///< the TP peers (null without TP)
    int dpRank = 0;
    int tpRank = 0;
};

/// Splits the world into TP groups (consecutive ranks) and DP groups (one per TP position).
Result<RankGroups> rankGroups(comm::Communicator& world, int tp)
{
    RankGroups g;
    g.world = &world;
    g.dpRank = world.rank() / tp;
    g.tpRank = world.rank() % tp;
    if (tp == 1) {
        g.dp = std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {});
        return g;
    }
    auto tpGroup = world.split(g.dpRank, g.tpRank, fmt::format("tp{}", g.dpRank));
    if (!tpGroup) {
        return tpGroup.error();
    }
    auto dpGroup = world.split(g.tpRank, g.dpRank, fmt::format("dp{}", g.tpRank));
    if (!dpGroup) {
        return dpGroup.error();
    }
    g.tp = std::move(*tpGroup);
    g.dp = std::move(*dpGroup);
    return g;
}

/// Shared by the rank threads of one attempt: only rank 0 writes it.
struct AttemptOutput {
    std::vector<StepRecord> history;
    std::vector<double> weights;
    CompressionStats compression;
    std::vector<std::int64_t> optimizerBytes; ///< one slot per rank, each written by its rank
    std::vector<TrainerBuffers> buffers; ///< one slot per rank, each written by its rank
    /// Set by a rank whose loss or gradient norm went non-finite: the same steps would diverge
    /// again, so no restart is tried.
    std::atomic<bool> diverged = false;
};

/// One rank's state and loop.
class RankTrainer {
public:
    /// `shard`: this rank's tensor-parallel share of `model` (null without TP).
    RankTrainer(const TrainableModel& model, const TensorParallelShard* shard,
        const TrainingData& corpus, const TrainOptions& o, RankGroups groups, bool injectDrill)
        : m_model(model)
        , m_shard(shard)
        , m_compute(shard ? *shard : model)
        , m_corpus(corpus)
        , m_o(o)
        , m_g(std::move(groups))
        , m_comm(*m_g.world)
        , m_layout(FlatLayout::of(m_compute.parameters()))
        , m_formats(formatsOf(o.precision))
        , m_range(shardOf(m_layout.total, o.dp, m_g.dpRank, o.zero))
        , m_injectDrill(injectDrill)
    {
    }

    /// Fresh weights from the seed (every rank computes the same ones).
    void initialise()
    {
        auto init = m_compute.initialValues(m_o.seed);
        for (double& v : init) {
            v = roundTo(v, m_formats.arith);
        }
        m_master.assign(init.begin() + m_range.begin, init.begin() + m_range.end);
        m_state.expAvg.assign(m_master.size(), 0.0);
        m_state.expAvgSq.assign(m_master.size(), 0.0);
        m_weights.resize(init.size());
        for (std::size_t i = 0; i < init.size(); ++i) {
            m_weights[i] = roundTo(init[i], m_formats.weights);
        }
    }

    /// The state of a checkpoint; the weights are the gathered, rounded master shards.
    Result<void> restore(const RankShard& shard, const std::vector<StepRecord>& history)
    {
        if (shard.shardBegin != m_range.begin
            || std::int64_t(shard.master.size()) != m_range.end - m_range.begin) {
            return Error::badInput(fmt::format("rank {}: checkpoint shard holds [{}, {}) of the "
                                               "buffer, this run's rank owns [{}, {})",
                m_comm.rank(), shard.shardBegin,
                shard.shardBegin + std::int64_t(shard.master.size()), m_range.begin, m_range.end));
        }
        m_master = shard.master;
        m_state.expAvg = shard.expAvg;
        m_state.expAvgSq = shard.expAvgSq;
        m_residual = shard.residual;
        m_history = history;
        m_weights.assign(std::size_t(m_layout.total), 0.0);
        return publishWeights();
    }

    Result<void> run(std::int64_t firstStep, const CheckpointStore* store, Progress* progress,
        const std::stop_token& stop, AttemptOutput& out)
    {
        std::vector<double> grad(std::size_t(m_layout.total));
        std::int64_t kept = 0; // the largest a step's backward kept
        const int perRank = m_o.globalBatch / m_o.dp;
        for (std::int64_t step = firstStep; step < m_o.steps; ++step) {
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
            if (drillAt(step, DrillKind::Kill)) {
                return Error::checkFailed(
                    fmt::format("drill: rank {} killed at step {}", m_comm.rank(), step));
            }
            const Batch batch = m_corpus.batch(
                step, std::int64_t(m_g.dpRank) * perRank, perRank, m_o.sequenceLength);
            StepFootprint footprint;
            auto loss = m_compute.lossGradientsAndFootprint(
                m_weights, batch, m_formats.weights, grad, footprint);
            if (!loss) {
                return loss.error().withContext(
                    fmt::format("step {} rank {}", step, m_comm.rank()));
            }
            kept = std::max(kept, footprint.keptActivations);
            for (double& g : grad) {
                g = roundTo(g, m_formats.arith);
            }
            const double replicaLoss = *loss;
            DAY0_TRY(reduce(step, grad, *loss, out, stop));
            const double meanLoss = *loss;
            DAY0_TRY(tap(step, batch, grad, replicaLoss, meanLoss));
            const double lr = m_o.schedule.at(step);
            auto measured = gradNorm(grad);
            if (!measured) {
                return measured.error();
            }
            const double norm = *measured;
            if (m_o.maxGradNorm > 0) {
                clipToNorm(grad, norm, m_o.maxGradNorm, m_formats.arith);
            }
            if (!std::isfinite(meanLoss) || !std::isfinite(norm)) {
                out.diverged = true;
                return Error::checkFailed(
                    fmt::format("step {}: loss {} and gradient norm {}: training diverged", step,
                        meanLoss, norm));
            }
            const auto begin = std::size_t(m_range.begin);
            DAY0_TRY(
                adamwStep(m_master, std::span<const double>(grad).subspan(begin, m_master.size()),
                    m_state, step + 1, lr, m_o.adamw, m_formats.arith));
            DAY0_TRY(publishWeights());
            m_history.push_back({ step, meanLoss, norm, lr });
            if (store && m_o.checkpointEvery > 0 && (step + 1) % m_o.checkpointEvery == 0) {
                DAY0_TRY(saveCheckpoint(*store, step + 1));
            }
            if (progress && m_comm.rank() == 0) {
                progress->setDone(step + 1);
            }
        }
        const std::int64_t unit = dtypeSize(m_formats.arith);
        const std::int64_t masters
            = m_formats.weights != m_formats.arith ? std::int64_t(m_master.size()) : 0;
        out.optimizerBytes[std::size_t(m_comm.rank())]
            = unit * (std::int64_t(m_state.expAvg.size() + m_state.expAvgSq.size()) + masters);
        std::vector<double> whole;
        if (m_g.dpRank == 0) {
            DAY0_TRY(wholeWeights(whole));
        }
        constexpr auto kDouble = std::int64_t(sizeof(double));
        out.buffers[std::size_t(m_comm.rank())] = { kDouble * std::int64_t(m_weights.size()),
            kDouble * std::int64_t(m_master.size()),
            kDouble * std::int64_t(m_state.expAvg.size() + m_state.expAvgSq.size()),
            kDouble * std::int64_t(grad.size()), kDouble * std::int64_t(m_residual.size()), kept };
        if (m_comm.rank() == 0) {
            out.history = m_history;
            out.weights = std::move(whole);
        }
        return success();
    }

private:
    [[nodiscard]] bool drillAt(std::int64_t step, DrillKind kind) const
    {
        return m_injectDrill && m_o.drill && m_o.drill->kind == kind && m_o.drill->step == step
            && m_o.drill->rank == m_comm.rank();
    }

    /// The gradient and loss means over the ranks; the Fail and Hang drills strike here.
    Result<void> reduce(std::int64_t step, std::vector<double>& grad, double& loss,
        AttemptOutput& out, const std::stop_token& stop)
    {
        const auto start = Clock::now();
        if (drillAt(step, DrillKind::Fail)) {
            const auto why
                = fmt::format("drill: rank {} failed during the gradient all-reduce of step {}",
                    m_comm.rank(), step);
            m_comm.abort(why); // the world's: every group stops
            return Error::checkFailed(why);
        }
        if (drillAt(step, DrillKind::Hang)) {
            // Silent: the others must find out through the communicator's timeout. Ctrl-C ends
            // the wait.
            const auto until = Clock::now()
                + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(2.0 * m_o.commTimeout.value + 0.2));
            while (Clock::now() < until && !stop.stop_requested()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            return Error::checkFailed(
                fmt::format("drill: rank {} hung at step {}", m_comm.rank(), step));
        }
        auto stats = meanAllReduce(
            *m_g.dp, grad, m_o.compression, m_residual, int(dtypeSize(m_formats.arith)));
        if (!stats) {
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            return Error { stats.error().code,
                fmt::format("step {} rank {}: gradient all-reduce failed after {:.2f} s: {}", step,
                    m_comm.rank(), waited, stats.error().message) };
        }
        for (double& g : grad) {
            g = roundTo(g, m_formats.arith);
        }
        // Every TP rank of a replica computed the same loss: the mean is over the replicas.
        DAY0_TRY(m_g.dp->allReduce(&loss, &loss, 1, DType::F64, comm::ReduceOp::Sum));
        loss /= double(m_g.dp->size());
        if (m_comm.rank() == 0) {
            out.compression = *stats;
        }
        return success();
    }

    /// Hands a tapped step's gradient (TrainOptions::gradientTap) to its writer, the whole
    /// model's: with TP the replica's shards are put together (collective over the TP group)
    /// and TP rank 0 writes.
    Result<void> tap(std::int64_t step, const Batch& batch, std::span<const double> grad,
        double replicaLoss, double stepLoss) const
    {
        const auto& t = m_o.gradientTap;
        if (!t.write || std::find(t.steps.begin(), t.steps.end(), step) == t.steps.end()) {
            return success();
        }
        TappedGradient g { step, m_g.dpRank, m_o.dp, &batch, m_weights, grad, replicaLoss,
            stepLoss };
        std::vector<double> weights;
        std::vector<double> gradient;
        if (m_shard != nullptr) {
            DAY0_TRY(wholeWeights(weights));
            gradient.assign(weights.size(), 0.0);
            m_shard->scatter(grad, gradient);
            DAY0_TRY(m_g.tp->allReduce(gradient.data(), gradient.data(), gradient.size(),
                DType::F64, comm::ReduceOp::Sum));
            if (m_g.tpRank != 0) {
                return success();
            }
            g.weights = weights;
            g.gradient = gradient;
        }
        auto written = t.write(g);
        if (!written) {
            return written.error().withContext(
                fmt::format("gradient dump of step {} rank {}", step, m_comm.rank()));
        }
        return success();
    }

    /// The weights every rank computes on: its own range from its master shard, the others'
    /// all-gathered under ZeRO-1.
    Result<void> publishWeights()
    {
        std::vector<double> mine(std::size_t(m_range.chunk), 0.0);
        for (std::size_t i = 0; i < m_master.size(); ++i) {
            mine[i] = roundTo(m_master[i], m_formats.weights);
        }
        if (m_o.zero == 0) {
            std::copy(
                mine.begin(), mine.begin() + std::ptrdiff_t(m_master.size()), m_weights.begin());
            return success();
        }
        std::vector<double> all(std::size_t(m_range.chunk) * std::size_t(m_g.dp->size()));
        DAY0_TRY(m_g.dp->allGather(mine.data(), all.data(), mine.size(), DType::F64));
        std::copy(all.begin(), all.begin() + std::ptrdiff_t(m_weights.size()), m_weights.begin());
        return success();
    }

    Result<void> saveCheckpoint(const CheckpointStore& store, std::int64_t completed)
    {
        RankShard shard { completed, m_comm.rank(), m_range.begin, m_master, m_state.expAvg,
            m_state.expAvgSq, m_residual };
        const CheckpointMeta meta { completed, m_comm.size(), configurationKey(m_model, m_o) };
        return store.save(m_comm, shard, meta, m_history);
    }

    /// The global L2 norm of the reduced gradient; with TP, the ranks' sums of squares of their
    /// slices added over the TP group, each replicated parameter counted once (TP rank 0's).
    Result<double> gradNorm(std::span<const double> grad) const
    {
        auto squares = parameterSquares(grad, m_layout);
        if (m_shard != nullptr) {
            for (std::size_t i = 0; i < squares.size(); ++i) {
                if (m_g.tpRank != 0 && m_shard->replicated(i)) {
                    squares[i] = 0.0;
                }
            }
            DAY0_TRY(m_g.tp->allReduce(
                squares.data(), squares.data(), squares.size(), DType::F64, comm::ReduceOp::Sum));
        }
        return normOfSquares(squares, m_formats.arith);
    }

    /// The whole model's weights: this rank's, or with TP its replica's shards put together
    /// (collective over the TP group).
    Result<void> wholeWeights(std::vector<double>& whole) const
    {
        if (m_shard == nullptr) {
            whole = m_weights;
            return success();
        }
        whole.assign(std::size_t(FlatLayout::of(m_model.parameters()).total), 0.0);
        m_shard->scatter(m_weights, whole);
        return m_g.tp->allReduce(
            whole.data(), whole.data(), whole.size(), DType::F64, comm::ReduceOp::Sum);
    }

    const TrainableModel& m_model;
    const TensorParallelShard* m_shard;
    const TrainableModel& m_compute;
    const TrainingData& m_corpus;
    const TrainOptions& m_o;
    RankGroups m_g;
    comm::Communicator& m_comm; ///< the world
    FlatLayout m_layout;
    Formats m_formats;
    ShardRange m_range;
    bool m_injectDrill;
    std::vector<double> m_master;
    AdamWState m_state;
    std::vector<double> m_weights;
    std::vector<double> m_residual;
    std::vector<StepRecord> m_history;
};

Result<void> checkOptions(const TrainOptions& o)
{
    if (o.tp < 1) {
        return Error::badInput(fmt::format("train: tp={} must be at least 1", o.tp));
    }
    if (o.dp < 1 || o.globalBatch < 1 || o.globalBatch % o.dp != 0) {
        return Error::badInput(fmt::format(
            "train: global batch {} must be a positive multiple of dp={}", o.globalBatch, o.dp));
    }
    if (o.zero != 0 && o.zero != 1) {
        return Error::unsupported(fmt::format(
            "train: zero={} is not modelled by the trainer (0, or 1: sharded optimizer state)",
            o.zero));
    }
    if (o.steps < 1 || o.sequenceLength < 3) {
        return Error::badInput("train: needs at least one step and sequences of 3+ tokens");
    }
    if (o.checkpointEvery > 0 && o.checkpointDir.empty()) {
        return Error::badInput("train: a checkpoint interval needs a checkpoint folder");
    }
    if ((o.resume || o.maxRestarts > 0) && o.checkpointDir.empty()) {
        return Error::badInput("train: resuming and restarting need a checkpoint folder");
    }
    if (o.drill && (o.drill->rank < 0 || o.drill->rank >= o.dp * o.tp)) {
        return Error::badInput(
            fmt::format("train: drill rank {} outside the {} ranks of dp={}, tp={}", o.drill->rank,
                o.dp * o.tp, o.dp, o.tp));
    }
    return success();
}

} // namespace

std::string precisionName(TrainPrecision p)
{
    switch (p) {
    case TrainPrecision::F64:
        return "f64";
    case TrainPrecision::F32:
        return "f32";
    case TrainPrecision::MixedBf16:
        return "bf16-mixed";
    }
    return "f64";
}

Result<TrainPrecision> parsePrecision(const std::string& text)
{
    for (auto p : { TrainPrecision::F64, TrainPrecision::F32, TrainPrecision::MixedBf16 }) {
        if (text == precisionName(p)) {
            return p;
        }
    }
    return Error::badInput(fmt::format("precision '{}': unknown (f64, f32, bf16-mixed)", text));
}

Result<Drill> Drill::parse(const std::string& text)
{
    Drill d;
    const auto eq = text.find('=');
    const std::string kind = text.substr(0, eq);
    if (kind == "kill-at") {
        d.kind = DrillKind::Kill;
    } else if (kind == "fail-at") {
        d.kind = DrillKind::Fail;
    } else if (kind == "hang-at") {
        d.kind = DrillKind::Hang;
    } else {
        return Error::badInput(fmt::format(
            "drill '{}': unknown (kill-at=STEP, fail-at=STEP, hang-at=STEP[,rank=R])", text));
    }
    const std::string rest = eq == std::string::npos ? "" : text.substr(eq + 1);
    const auto comma = rest.find(',');
    const std::string stepText = rest.substr(0, comma);
    const std::string rankText
        = comma == std::string::npos ? std::string("rank=0") : rest.substr(comma + 1);
    auto whole = [](std::string_view t, auto& value) {
        const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
        return !t.empty() && ec == std::errc() && ptr == t.data() + t.size() && value >= 0;
    };
    std::int64_t step = 0;
    int rank = 0;
    if (!whole(stepText, step) || rankText.rfind("rank=", 0) != 0
        || !whole(std::string_view(rankText).substr(5), rank)) {
        return Error::badInput(fmt::format("drill '{}': expected {}=STEP[,rank=R]", text, kind));
    }
    d.step = step;
    d.rank = rank;
    return d;
}

std::string configurationKey(const TrainableModel& model, const TrainOptions& o)
{
    std::string params;
    for (const auto& p : model.parameters()) {
        params += fmt::format("{}{};", p.name, fmt::join(p.shape, "x"));
    }
    return fmt::format("params={} precision={} dp={} tp={} zero={} compression={} batch={}x{} "
                       "seed={} lr={}:{}:{}:{}:{} adamw={}:{}:{}:{} clip={}",
               params, precisionName(o.precision), o.dp, o.tp, o.zero, o.compression.describe(),
               o.globalBatch, o.sequenceLength, o.seed, int(o.schedule.kind), o.schedule.peak,
               o.schedule.floor, o.schedule.warmupSteps, o.schedule.totalSteps, o.adamw.beta1,
               o.adamw.beta2, o.adamw.eps, o.adamw.weightDecay, o.maxGradNorm)
        + (o.source.empty() ? std::string() : fmt::format(" source={}", o.source));
}

Result<TrainResult> runTraining(const TrainableModel& model, const TrainingData& corpus,
    const TrainOptions& o, Progress* progress, std::stop_token stop)
{
    DAY0_TRY(checkOptions(o));
    TrainResult result;
    std::optional<CheckpointStore> store;
    if (!o.checkpointDir.empty()) {
        store.emplace(o.checkpointDir, o.keepLast);
    }
    if (progress) {
        progress->setTotal(o.steps);
    }
    const int world = o.dp * o.tp;
    const CheckpointMeta expected { 0, world, configurationKey(model, o) };
    bool resume = o.resume;
    for (int attempt = 0;; ++attempt) {
        std::optional<FoundCheckpoint> found;
        if (resume && store) {
            auto newest = store->findNewestValid(expected, result.events);
            if (!newest) {
                return newest.error();
            }
            found = std::move(*newest);
            result.events.push_back(found
                    ? fmt::format("resuming from {} (after step {})",
                        found->folder.filename().string(), found->meta.step)
                    : std::string("no valid checkpoint: starting from step 0"));
        }
        result.resumedFromStep = found ? found->meta.step : -1;
        AttemptOutput out;
        out.optimizerBytes.assign(std::size_t(world), 0);
        out.buffers.assign(std::size_t(world), {});
        comm::InProcessOptions commOptions;
        commOptions.timeout = o.commTimeout;
        auto outcome = comm::runInProcess(
            world,
            [&](comm::Communicator& comm) -> Result<void> {
                auto groups = rankGroups(comm, o.tp);
                if (!groups) {
                    return groups.error();
                }
                std::unique_ptr<TensorParallelShard> share;
                if (o.tp > 1) {
                    auto made = model.tensorParallel(o.tp, groups->tpRank, *groups->tp);
                    if (!made) {
                        return made.error();
                    }
                    share = std::move(*made);
                }
                RankTrainer rank(model, share.get(), corpus, o, std::move(*groups), attempt == 0);
                std::int64_t first = 0;
                if (found) {
                    auto shard = store->loadShard(*found, comm.rank());
                    if (!shard) {
                        return shard.error();
                    }
                    DAY0_TRY(rank.restore(*shard, found->history));
                    first = found->meta.step;
                } else {
                    rank.initialise();
                }
                return rank.run(first, store ? &*store : nullptr, progress, stop, out);
            },
            commOptions);
        if (outcome) {
            result.history = std::move(out.history);
            result.finalWeights = std::move(out.weights);
            result.compression = out.compression;
            result.optimizerBytesPerRank = std::move(out.optimizerBytes);
            result.buffersPerRank = std::move(out.buffers);
            result.buffers = result.buffersPerRank.front();
            return result;
        }
        const bool retry = outcome.error().code == ErrorCode::CheckFailed && !out.diverged && store
            && result.restarts < o.maxRestarts;
        if (!retry) {
            return outcome.error();
        }
        ++result.restarts;
        result.events.push_back(
            fmt::format("attempt {} failed: {}; restarting from the newest valid checkpoint",
                attempt + 1, outcome.error().message));
        resume = true;
    }
}

} // namespace day0::train
