#pragma once

// Internal to core/exec: the checkpoint stream of `--stream` (layer_stream.h), declared here so
// that its members live by concern: layer_stream_plan.cpp (which weights each phase reads, the
// budget checked before anything runs, what fits to read ahead) and layer_stream.cpp (the
// step protocol the forward drives, the loads, the read-ahead loader, the public entry points).

#include "base/progress.h"
#include "checkpoint/checkpoint.h"
#include "exec/forward.h"
#include "exec/layer_stream.h"
#include "exec/piece_reader.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace day0::exec::detail {

using Piece = StreamPiece;

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
int expertOf(std::string_view name, const std::string& ffn);

/// a streamed run's per-layer buffers, freed layer after layer, come back from the heap and stay
/// resident after they are freed: a streamed validate on a 402 MiB checkpoint peaked at 281 MiB
/// against a 256 MiB budget (138 MiB with the threshold fixed). Fixing the threshold at 1 MiB
/// keeps large buffers mapped, so freeing one returns it to the system; it stays so for the
/// rest of the process, which from here on streams.
void returnFreedLargeBuffers();

class CheckpointStream final : public LayerStream {
public:
    using Tensor = numerics::Tensor;
    using Shape = numerics::Shape;

    /// `rounds`: the run emulates a lower precision, so the forward keeps a rounded copy of
    /// each matrix of the phase that runs (counted against the budget).
    CheckpointStream(checkpoint::Checkpoint ckpt, DType compute, bool rounds,
        const StreamOptions& options, std::int64_t steps, Progress& progress, std::stop_token stop);

    /// A run that ends (done, failed or cancelled) stops and joins its loader first.
    ~CheckpointStream() override;
    CheckpointStream(const CheckpointStream&) = delete;
    CheckpointStream& operator=(const CheckpointStream&) = delete;

    /// Maps every weight the forward reads to its phase and checks names, shapes, dtypes and
    /// scales, and the budget against the largest phase, before anything runs.
    Result<void> plan(const model::ModelSpec& spec, const LayerSlice* slice);

    WeightTable& table() override { return m_table; }

    Result<void> beginStep() override;

    void enter(const std::string& anchor) override;

    Result<void> endStep() override;

    void routed(const std::string& router, std::span<const std::int64_t> experts) override;

    [[nodiscard]] std::stop_token stopToken() const override { return m_abort.get_token(); }

    [[nodiscard]] const StreamStats& stats() const { return m_stats; }

private:
    /// The piece of `req`, checked as Engine::create's loader checks it; nullopt for an optional
    /// weight the checkpoint lacks.
    Result<std::optional<Piece>> describe(
        const WeightRequirement& req, const model::ModelSpec& spec) const;

    void fail(Error error);

    /// Where a phase's tensors are being read to: the table, the converted bytes it holds, and
    /// what reading them cost.
    struct Loading {
        WeightTable& table;
        std::uint64_t& held;
        std::uint64_t bytesRead = 0;
        std::optional<Error> error;
    };

    /// A phase read ahead on the loader thread while the one before it computes.
    struct Ahead {
        int index = -1; ///< the phase; -1: none
        WeightTable table;
        std::uint64_t held = 0;
        std::uint64_t bytesRead = 0;
        double seconds = 0.0; ///< the loader's time reading it
        std::optional<Error> error;
    };

    /// Moves the current phase's buffers to the free pool. The loader must be idle (settle()).
    void release();

    /// A phase read ahead but not entered: its buffers go to the free pool.
    void dropAhead();

    /// Waits for the loader's phase (the time waited is the run's time in loads) and takes in
    /// what it read, its failure included. The reader and the free pool are then this thread's.
    void settle();

    void notePeak();

    /// The converted bytes a load of `ph` reads (its routed experts wait for the router).
    [[nodiscard]] std::uint64_t loadedBytes(const Phase& ph) const;

    /// Whether phase `index` is read by a load (not a phase outside the slice).
    [[nodiscard]] bool readsAhead(std::size_t index) const;

    /// What phase `current` (all its experts and rounded copies) and phase `next` read ahead
    /// beside it hold at once, with the reader's buffers.
    [[nodiscard]] std::uint64_t pairNeed(std::size_t current, std::size_t next) const;

    /// Releases the current phase, makes phase `index` current (read ahead already, else read
    /// now into reused buffers: a free buffer of the same size, else a new one; free buffers it
    /// does not reuse are dropped first) and starts reading the next phase ahead. A MoE layer's
    /// routed experts wait for its router (routed()), unless every expert is asked for.
    void load(int index);

    /// Starts reading the phase after `index` on the loader thread, while `index` computes
    /// (after the head: the embedding of the next step, none after the last step), where the
    /// two fit the budget together; else only its pages are read ahead (MADV_WILLNEED) and it
    /// loads when the forward enters it.
    void readAhead(std::size_t index);

    /// Reads `ph`'s pages ahead into the page cache (MADV_WILLNEED); its routed experts only
    /// once its router has chosen.
    void advisePages(const Phase& ph) const;

    /// Reads `ph`'s tensors (its routed experts only if every expert is asked for) into
    /// `into`, after dropping the free buffers it does not reuse (so at most the current phase
    /// and this one are held). On the loader thread or, with the loader idle, on the run's.
    void fill(const Phase& ph, Loading& into);

    /// A load on the run's thread: its bytes and failure taken in.
    void finish(Loading& into);

    [[nodiscard]] std::uint64_t bytesOf(const Piece& p) const;

    /// Converts `p` into a free buffer of its size (else a new one) and puts it in the table.
    void loadPiece(const Piece& p, Loading& into);

    [[nodiscard]] std::string rateText() const;

    static constexpr int kReleaseOnly = -1; ///< m_next: the slice ends here

    checkpoint::Checkpoint m_ckpt;
    DType m_compute;
    bool m_rounds = false;
    bool m_sliced = false;
    bool m_routedOnly = true; ///< MoE layers: only the experts their router chose
    std::function<void(const std::string&, bool)> m_beforeRead; ///< StreamOptions::beforeRead
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
    WeightTable m_table;
    std::multimap<std::uint64_t, Tensor> m_free; ///< released buffers, by byte size
    PieceReader m_reader;
    std::uint64_t m_readHold = 0; ///< the reader's buffers, at most
    int m_step = 0;
    std::optional<Error> m_stepError;
    StreamStats m_stats;
    Ahead m_ahead; ///< the loader's while it runs
    std::jthread m_loader; ///< reads m_ahead; joined by settle() and the destructor
};

} // namespace day0::exec::detail
