// A plan's ranks kept running to serve sequences step by step (parallel/served_ranks.h).
#include "parallel/served_ranks.h"

#include "comm/in_process_communicator.h"
#include "exec/checkpoint_weights.h"
#include "parallel/forward.h"
#include "parallel/run.h"
#include "parallel/stage_link.h"
#include "parallel/weights.h"

#include <fmt/format.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace day0::parallel {

namespace {

/// What every rank does next; the same for all.
struct Command {
    enum class Kind { Open, Feed, Close, Stop };
    Kind kind = Kind::Stop;
    std::int64_t sequence = 0; ///< Open, Close
    std::int64_t capacity = 0; ///< Open
    /// Feed: the sequences stepped together, their token counts and first positions; `ids`
    /// holds their tokens one sequence after another.
    std::vector<std::int64_t> sequences;
    std::vector<std::int64_t> counts;
    std::vector<std::int64_t> starts;
    std::vector<std::int64_t> ids;
};

} // namespace

struct ServedRanks::Impl {
    model::ModelSpec spec;
    /// The checkpoint the ranks load their slices from; released once they all have (its mapped
    /// pages, which every rank's reads made resident, leave the process's RSS with it).
    std::unique_ptr<exec::WeightSource> weights;
    checkpoint::ShardLayout layout;
    std::string plan;
    std::stop_source stopRanks; ///< cancels a rank's load or step when destroyed
    /// Each rank's backend (start's backendFor); null: the CPU reference.
    std::function<Result<std::shared_ptr<exec::Backend>>(int rank)> backendFor;
    std::mutex mutex;
    std::condition_variable changed;
    std::uint64_t issued = 0; ///< commands issued so far
    Command command; ///< the latest
    int ready = 0; ///< ranks loaded
    std::int64_t weightBytes = 0; ///< of the ranks loaded
    int done = 0; ///< ranks that finished the latest command
    bool aborting = false; ///< a rank failed: the others leave their wait
    bool ended = false; ///< the world returned (a rank failed, or after Stop)
    std::optional<Error> failure; ///< why it ended early
    /// Of the latest Feed, from the last stage's TP rank 0: each sequence's last row.
    std::vector<std::vector<double>> logits;
    std::string batchRefusal; ///< ParallelForward::batchRefusal of the model
    std::int64_t nextSequence = 0;
    std::thread runner;

    Result<void> rank(comm::Communicator& world);
    /// One Feed over `segments` (the command's sequences' caches and rows).
    Result<void> step(comm::Communicator& world, detail::ParallelForward& forward,
        std::span<const detail::StepSegment> segments, const Command& c);
    /// Issues `c` to every rank and waits until all have run it.
    Result<void> issue(Command c);
};

Result<void> ServedRanks::Impl::step(comm::Communicator& world, detail::ParallelForward& forward,
    std::span<const detail::StepSegment> segments, const Command& cmd)
{
    const auto& l = layout;
    const auto c = checkpoint::rankCoord(l, world.rank());
    const bool first = c.stage == 0;
    const bool last = c.stage == l.pp - 1;
    const int stride = l.tp * l.dp;
    const auto n = std::int64_t(cmd.ids.size());
    std::vector<float> hidden;
    if (first) {
        auto e = forward.embed(cmd.ids);
        if (!e) {
            return e.error();
        }
        hidden = std::move(*e);
    } else {
        DAY0_TRY(detail::receiveStageInput(
            forward, world, n, world.rank() - stride, hidden, detail::StepIds::Local));
        // Every rank has the step's tokens; hash-routed layers read them.
        if (forward.needsStepIds()) {
            forward.stepIds() = cmd.ids;
        }
    }
    if (segments.size() == 1) {
        DAY0_TRY(forward.layers(
            *segments.front().cache, hidden, n, segments.front().start, stopRanks.get_token()));
    } else {
        DAY0_TRY(forward.layersBatch(segments, hidden, stopRanks.get_token()));
    }
    if (!last) {
        DAY0_TRY(detail::sendStageOutput(
            forward, world, n, world.rank() + stride, hidden, detail::StepIds::Local));
        return success();
    }
    auto out = forward.head(hidden, n);
    if (!out) {
        return out.error();
    }
    if (c.tpRank == 0) {
        const std::lock_guard lock(mutex);
        logits.clear();
        for (const auto& s : segments) {
            const auto row = out->begin() + (s.offset + s.n - 1) * spec.vocabSize;
            logits.emplace_back(row, row + spec.vocabSize);
        }
    }
    return success();
}

Result<void> ServedRanks::Impl::rank(comm::Communicator& world)
{
    const auto& l = layout;
    const auto c = checkpoint::rankCoord(l, world.rank());
    std::int64_t bytes = 0;
    auto table = detail::loadRankWeights(spec, *weights, l, c, bytes, stopRanks.get_token());
    if (!table) {
        return table.error().withContext(fmt::format("rank {}", world.rank()));
    }
    auto groups = detail::splitRankGroups(world, l, c);
    if (!groups) {
        return groups.error();
    }
    // Declared before the forward, which may release the backend's weights when it ends.
    std::shared_ptr<exec::Backend> backend;
    detail::ParallelForward forward(spec, *table, l, c, groups->view());
    DAY0_TRY(forward.init());
    if (backendFor) {
        auto made = backendFor(world.rank());
        if (!made) {
            return made.error().withContext(fmt::format("rank {}: backend", world.rank()));
        }
        backend = std::move(*made);
        forward.setBackend(backend.get());
    }
    std::map<std::int64_t, detail::ShardCache> caches;
    std::uint64_t seen = 0;
    {
        const std::lock_guard lock(mutex);
        ++ready;
        weightBytes += bytes;
    }
    changed.notify_all();
    for (;;) {
        Command cmd;
        {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return issued > seen || aborting; });
            if (aborting) {
                return Error::cancelled(); // the failing rank's error is the world's
            }
            seen = issued;
            cmd = command;
        }
        switch (cmd.kind) {
        case Command::Kind::Stop:
            return success();
        case Command::Kind::Open:
            caches.emplace(cmd.sequence, forward.newCache(cmd.capacity));
            break;
        case Command::Kind::Close:
            caches.erase(cmd.sequence);
            break;
        case Command::Kind::Feed: {
            std::vector<detail::StepSegment> segments;
            std::int64_t offset = 0;
            for (std::size_t i = 0; i < cmd.sequences.size(); ++i) {
                const auto it = caches.find(cmd.sequences[i]);
                if (it == caches.end()) {
                    return Error::internal(
                        fmt::format("sequence {} is not open", cmd.sequences[i]));
                }
                segments.push_back({ &it->second, offset, cmd.counts[i], cmd.starts[i] });
                offset += cmd.counts[i];
            }
            if (auto r = step(world, forward, segments, cmd); !r) {
                return r.error().withContext(fmt::format("rank {}", world.rank()));
            }
            break;
        }
        }
        {
            const std::lock_guard lock(mutex);
            ++done;
        }
        changed.notify_all();
    }
}

Result<void> ServedRanks::Impl::issue(Command c)
{
    std::unique_lock lock(mutex);
    if (ended) {
        return failure ? *failure : Error::internal("the plan's ranks have stopped");
    }
    command = std::move(c);
    done = 0;
    ++issued;
    changed.notify_all();
    const int world = layout.worldSize();
    changed.wait(lock, [&] { return done == world || ended; });
    if (done < world) {
        return failure ? *failure : Error::internal("the plan's ranks have stopped");
    }
    return success();
}

ServedRanks::ServedRanks(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

ServedRanks::~ServedRanks()
{
    {
        const std::lock_guard lock(m_impl->mutex);
        if (!m_impl->ended) {
            m_impl->command = Command {};
            ++m_impl->issued;
        }
    }
    m_impl->stopRanks.request_stop();
    m_impl->changed.notify_all();
    if (m_impl->runner.joinable()) {
        m_impl->runner.join();
    }
}

const std::string& ServedRanks::plan() const { return m_impl->plan; }

int ServedRanks::worldSize() const { return m_impl->layout.worldSize(); }

std::int64_t ServedRanks::weightBytes() const
{
    const std::lock_guard lock(m_impl->mutex);
    return m_impl->weightBytes;
}

Result<std::int64_t> ServedRanks::open(std::int64_t capacity)
{
    if (capacity < 1) {
        return Error::badInput(fmt::format("a sequence needs room for a token, got {}", capacity));
    }
    Command c;
    c.kind = Command::Kind::Open;
    c.sequence = m_impl->nextSequence++;
    c.capacity = capacity;
    DAY0_TRY(m_impl->issue(c));
    return c.sequence;
}

Result<std::vector<double>> ServedRanks::feed(
    std::int64_t sequence, std::span<const std::int64_t> ids, std::int64_t start)
{
    const std::span<const std::int64_t> one[] = { ids };
    auto rows = feedBatch(std::span(&sequence, 1), one, std::span(&start, 1));
    if (!rows) {
        return rows.error();
    }
    return std::move(rows->front());
}

Result<std::vector<std::vector<double>>> ServedRanks::feedBatch(
    std::span<const std::int64_t> sequences, std::span<const std::span<const std::int64_t>> ids,
    std::span<const std::int64_t> starts)
{
    if (sequences.empty() || ids.size() != sequences.size() || starts.size() != sequences.size()) {
        return Error::internal(fmt::format("a batched step of {} sequences with {} token lists "
                                           "and {} positions",
            sequences.size(), ids.size(), starts.size()));
    }
    if (sequences.size() > 1 && !m_impl->batchRefusal.empty()) {
        return Error::unsupported(
            fmt::format("a batched step over --plan {}: {}", m_impl->plan, m_impl->batchRefusal));
    }
    Command c;
    c.kind = Command::Kind::Feed;
    for (std::size_t i = 0; i < sequences.size(); ++i) {
        if (ids[i].empty()) {
            return Error::badInput(fmt::format("no tokens to feed sequence {}", sequences[i]));
        }
        c.sequences.push_back(sequences[i]);
        c.counts.push_back(std::int64_t(ids[i].size()));
        c.starts.push_back(starts[i]);
        c.ids.insert(c.ids.end(), ids[i].begin(), ids[i].end());
    }
    DAY0_TRY(m_impl->issue(std::move(c)));
    const std::lock_guard lock(m_impl->mutex);
    return std::move(m_impl->logits);
}

const std::string& ServedRanks::batchRefusal() const { return m_impl->batchRefusal; }

void ServedRanks::close(std::int64_t sequence)
{
    Command c;
    c.kind = Command::Kind::Close;
    c.sequence = sequence;
    // A failed world has freed every cache already.
    (void)m_impl->issue(c);
}

Result<void> ServedRanks::checkLayout(const checkpoint::ShardLayout& layout)
{
    DAY0_TRY(checkRunnable(layout));
    if (layout.dp != 1) {
        return Error::unsupported(fmt::format("serving over dp={} replicas: a served plan is one "
                                              "replica (dp=1); start a server per replica",
            layout.dp));
    }
    return success();
}

Result<std::unique_ptr<ServedRanks>> ServedRanks::start(const std::filesystem::path& checkpoint,
    const checkpoint::ShardLayout& layout, Progress& progress, std::stop_token stop,
    std::function<Result<std::shared_ptr<exec::Backend>>(int rank)> backendFor)
{
    DAY0_TRY(checkLayout(layout));
    auto impl = std::make_unique<Impl>();
    auto spec = exec::loadCheckpointModel(checkpoint);
    if (!spec) {
        return spec.error();
    }
    impl->spec = std::move(*spec);
    DAY0_TRY(checkExecutorCovers(impl->spec, bool(backendFor)));
    impl->backendFor = std::move(backendFor);
    DAY0_TRY(checkPlanFits(impl->spec, layout));
    impl->batchRefusal = detail::ParallelForward::batchRefusal(impl->spec);
    auto weights = exec::openCheckpointWeights(checkpoint);
    if (!weights) {
        return weights.error();
    }
    impl->weights = std::move(*weights);
    impl->layout = layout;
    impl->plan = layoutString(layout, 1);
    progress.setStage(fmt::format("loading {} ranks of {}", layout.worldSize(), impl->plan));
    auto* state = impl.get();
    state->runner = std::thread([state] {
        auto r = comm::runInProcess(
            state->layout.worldSize(), [state](comm::Communicator& world) -> Result<void> {
                auto ran = state->rank(world);
                if (!ran) {
                    {
                        // The first failure is the world's; the others only follow it.
                        const std::lock_guard lock(state->mutex);
                        if (!state->aborting) {
                            state->aborting = true;
                            state->failure = ran.error();
                        }
                    }
                    state->changed.notify_all();
                }
                return ran;
            });
        {
            const std::lock_guard lock(state->mutex);
            state->ended = true;
            if (!r && !state->failure) {
                state->failure = r.error();
            }
        }
        state->changed.notify_all();
    });
    std::stop_callback cancel(stop, [state] { state->stopRanks.request_stop(); });
    {
        std::unique_lock lock(state->mutex);
        state->changed.wait(
            lock, [&] { return state->ready == state->layout.worldSize() || state->ended; });
        if (state->ended) {
            lock.unlock();
            state->runner.join();
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
            return (state->failure ? *state->failure : Error::internal("the ranks stopped"))
                .withContext("--plan " + state->plan);
        }
    }
    // Every rank holds its slices now (in fp32, converted and cut from the mapped checkpoint):
    // the mapping is no longer read. With it in place the served process kept the whole
    // checkpoint's pages resident (llama-3.1-8b shrunk to 6x768 over tp=2: 113 MB RssFile after
    // the load against 17 MB once released, as the single-rank engine, which drops its source
    // after loading).
    state->weights.reset();
    return std::unique_ptr<ServedRanks>(new ServedRanks(std::move(impl)));
}

} // namespace day0::parallel
