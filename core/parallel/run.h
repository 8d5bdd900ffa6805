#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/sharding.h"
#include "comm/communicator.h"
#include "comm/in_process_communicator.h"
#include "exec/backend_dispatch.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"
#include "parallel/rank_stream.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::profile {
class CpuTracer;
}

namespace day0::parallel {

/// What a sharded run computes: the plan's layout, the prompts of every sequence (data-parallel
/// replica d runs sequences [d × microBatches, (d + 1) × microBatches)), greedy tokens per
/// sequence.
struct ParallelRunOptions {
    checkpoint::ShardLayout layout;
    int microBatches = 1; ///< sequences per replica, pipelined through the stages
    std::vector<std::vector<std::int64_t>> prompts; ///< dp × microBatches prompts
    std::int64_t newTokens = 1; ///< greedy tokens per sequence (prefill gives the first)
    /// Identity of the checkpoint every rank must share (checkpointFingerprint, or any string
    /// that changes with the weights).
    std::string checkpointId;
    /// Also advanced per step (in-process runs: one bar for all ranks); may be null.
    Progress* sharedProgress = nullptr;
    /// When set, rank r reads its pre-sliced tensors from rankSource(r) (a `day0 shard` rank
    /// file) instead of slicing the full checkpoint in memory.
    std::function<const exec::WeightSource*(int rank)> rankSource;
    /// When set, world rank r computes its float operators on backendFor(r) (a backend plugin
    /// such as cuda on the rank's device; operators it declines fall back to the CPU); each rank
    /// needs its own backend object. Null: every rank on the CPU reference.
    std::function<Result<std::shared_ptr<exec::Backend>>(int rank)> backendFor;
    /// When on, every rank streams its weights a layer at a time from its file (rank_stream.h)
    /// instead of loading its slices whole; the CPU reference only (refused with backendFor).
    RankStreamOptions stream;
};

/// A `day0 shard` output folder opened for a run: one weight source per rank (its rank file;
/// null for ranks not opened).
struct ShardFolder {
    std::vector<std::unique_ptr<exec::WeightSource>> ranks;
    std::vector<std::filesystem::path> files; ///< every rank's rank file, opened or not
};

/// True if `dir` holds a `day0 shard` output (plan.json of format day0-shard-plan).
bool isShardFolder(const std::filesystem::path& dir);

/// Opens the rank files of shard folder `dir` for `layout` (only `onlyRank`'s when ≥ 0, as one
/// MPI process needs). The error names the folder and both layouts when the folder was written
/// for another plan.
Result<ShardFolder> openShardFolder(
    const std::filesystem::path& dir, const checkpoint::ShardLayout& layout, int onlyRank = -1);

/// One sequence's outcome, gathered on world rank 0.
struct SequenceResult {
    std::vector<std::int64_t> prompt;
    std::vector<std::int64_t> generated;
    std::vector<float> logits; ///< [prompt + newTokens − 1, vocab]: every position fed
};

/// Which communicator of a sharded run a collective ran on.
enum class CommGroup { World, Tensor, Expert };

/// One collective as the communication table counts it.
struct CommEvent {
    int rank = 0; ///< world rank
    comm::CollectiveKind kind = comm::CollectiveKind::Barrier;
    std::int64_t bytes = 0;
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    int groupSize = 1;
    CommGroup group = CommGroup::World;
};

/// What one rank did.
struct RankSummary {
    int rank = 0;
    checkpoint::RankCoord coord;
    /// fp32 bytes of the slices it loaded; streamed: what its largest phase needed at once.
    std::int64_t weightBytes = 0;
    std::int64_t streamBytesRead = 0; ///< streamed: mapped bytes read over every step (else 0)
    double seconds = 0.0; ///< prefill + decode on this rank
    std::int64_t nativeCalls = 0; ///< operator calls its backend ran (0 on the CPU reference)
    std::int64_t fallbackCalls = 0; ///< operator calls that fell back to the CPU
};

/// Point-to-point figures measured between world ranks 0 and 1 before the run.
struct MachineFigures {
    bool measured = false;
    double latency = 0.0; ///< seconds per message (half a small round trip)
    double bandwidth = 0.0; ///< bytes/s of a 4 MiB message, latency removed
    std::string method; ///< how they were measured, for the table's label
};

/// The outcome of a sharded run. On world rank 0 every field covers all ranks; other ranks see
/// only their own rank summary and events.
struct ParallelRunResult {
    std::vector<SequenceResult> sequences;
    std::vector<RankSummary> ranks;
    std::vector<CommEvent> events;
    MachineFigures machine;
    double seconds = 0.0; ///< wall time of the forward passes on rank 0
    exec::DispatchReport dispatch; ///< where rank 0's operators ran (its backend, per operator)

    /// Operator calls the ranks' backends ran, over all ranks in `ranks`.
    [[nodiscard]] std::int64_t nativeCalls() const;
    /// Operator calls that fell back to the CPU, over all ranks in `ranks`.
    [[nodiscard]] std::int64_t fallbackCalls() const;
};

/// Collects collectives of one or more ranks (thread-safe): events for the table and, when a
/// tracer is given for the rank, a Communication slice on that rank's CPU trace.
class CommRecorder {
public:
    /// `tracers[r]` (may be empty or hold nulls) receives rank r's collective slices.
    explicit CommRecorder(std::vector<profile::CpuTracer*> tracers = {});
    /// The observer to install on a world communicator (in-process: the world's observer).
    comm::CollectiveObserver observer();
    /// Turns recording of world rank `rank` on or off (off while results are gathered).
    void setEnabled(int rank, bool on);
    /// Events of world rank `rank` so far.
    [[nodiscard]] std::vector<CommEvent> eventsOf(int rank) const;
    /// Size of the group named `group` in a run of `layout` ("tp…", "expert…", "world").
    static int groupSize(const std::string& group, const checkpoint::ShardLayout& layout);
    void setLayout(const checkpoint::ShardLayout& layout);

private:
    mutable std::mutex m_mutex;
    std::vector<profile::CpuTracer*> m_tracers;
    std::vector<std::vector<CommEvent>> m_events;
    std::vector<bool> m_disabled; ///< by world rank
    checkpoint::ShardLayout m_layout;
};

/// Runs one rank of a sharded fp32 prefill + greedy decode: checks that every rank was started
/// with the same plan, model and checkpoint (the error names the first mismatch and both values),
/// loads this rank's slices (core/checkpoint's rules) from `weights`, builds the TP and expert
/// groups, runs the stages with micro-batches (activations by send/recv), and gathers the
/// sequences, rank summaries and the recorder's events on world rank 0. Collective over `world`;
/// a failing rank aborts the world with its reason. Progress counts sequence steps.
Result<ParallelRunResult> runParallelRank(comm::Communicator& world, const model::ModelSpec& spec,
    const exec::WeightSource& weights, const ParallelRunOptions& options, CommRecorder& recorder,
    Progress& progress, std::stop_token stop);

/// Bytes that crossed the links of one node during a run.
struct NodeTraffic {
    std::int64_t intraBytes = 0; ///< between ranks of this node (its fast-link domain)
    std::int64_t interBytes = 0; ///< into or out of this node (its network uplink)
};

/// Traffic per node when rank r runs on device r of nodes of `gpusPerNode` devices: each
/// collective's bytes are spread evenly over the other members of its group, each pipeline
/// send goes to its stage peer (recvs are the same bytes, not counted twice).
std::vector<NodeTraffic> nodeTraffic(
    const std::vector<CommEvent>& events, const checkpoint::ShardLayout& layout, int gpusPerNode);

/// Per-rank progress of an in-process run (the GUI shows it on the rank items).
struct RankProgress {
    std::vector<std::unique_ptr<Progress>> ranks;
};

/// Runs every rank of `options.layout` on its own thread in one in-process world and returns
/// rank 0's result. `rankProgress` (optional) is advanced per rank: entries already sized to the
/// world are reused (so a GUI may poll them while the run fills them), otherwise refilled;
/// `tracers` as for CommRecorder.
Result<ParallelRunResult> runParallelInProcess(const model::ModelSpec& spec,
    const exec::WeightSource& weights, const ParallelRunOptions& options, Progress& progress,
    std::stop_token stop, RankProgress* rankProgress = nullptr,
    std::vector<profile::CpuTracer*> tracers = {}, comm::InProcessOptions comm = {});

/// A small random checkpoint of `modelArg`'s architecture whose heads, layers, experts and widths
/// every part of `layout` divides, cached under `cacheDir` (made once per architecture and
/// layout, reused after, in cacheDir/parallel). For runs of a plan on a model that has only its
/// config when the demo checkpoint (shrunk_cache.h) does not split for the plan.
Result<std::filesystem::path> prepareParallelCheckpoint(const std::string& modelArg,
    const checkpoint::ShardLayout& layout, const std::filesystem::path& cacheDir,
    Progress& progress, std::stop_token stop);

/// Checks, without reading weights, that `layout` fits `spec`: enough layers for the stages,
/// heads that TP divides, and every forward tensor splitting for every rank (the error names the
/// dimension or the tensor).
Result<void> checkPlanFits(const model::ModelSpec& spec, const checkpoint::ShardLayout& layout);

/// Refuses, naming each, what of `spec` the sharded executor does not compute (its vision tower,
/// per-layer blocks, ...; with `onBackend` also what no backend computes).
Result<void> checkExecutorCovers(const model::ModelSpec& spec, bool onBackend);

/// Refuses a layout with a field the executor does not run (cp > 1 today), naming it; the part
/// of checkPlanFits that needs no model.
Result<void> checkRunnable(const checkpoint::ShardLayout& layout);

/// "tp=2,pp=2,ep=1,dp=1,etp=2,mb=1": the layout as every rank must agree on it.
std::string layoutString(const checkpoint::ShardLayout& layout, int microBatches);

/// An identity of the checkpoint folder or file at `path`: SHA-256 over its config.json and its
/// day0 manifest (per-file SHA-256) when present, else over the names and sizes of its files.
Result<std::string> checkpointFingerprint(const std::filesystem::path& path);

/// Measured vs modelled communication of one collective kind, averaged over ranks.
struct CommKindRow {
    std::string kind; ///< "all_reduce", ...
    std::int64_t calls = 0; ///< over all ranks
    std::int64_t bytes = 0; ///< over all ranks
    double measuredSeconds = 0.0; ///< per rank (sum over ranks / ranks)
    double predictedSeconds = 0.0; ///< alpha-beta model with the machine figures, per rank
};

/// The communication table of a run: one row per collective kind, then a total row.
std::vector<CommKindRow> commTable(
    const std::vector<CommEvent>& events, int ranks, const MachineFigures& machine);

} // namespace day0::parallel
