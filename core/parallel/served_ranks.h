#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/sharding.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::exec {
class Backend;
}

namespace day0::parallel {

/// A plan's ranks kept loaded as threads of this process, serving sequences step by step: each
/// sequence gets a KV cache on every rank (its local heads of its stage's layers), each step runs
/// the sharded forward (parallel/forward.h, the one `day0 run --plan` runs) over the stages and
/// returns the last token's logits; several sequences' steps run as one batched step
/// (feedBatch). What `day0 serve --plan` runs requests on. One replica (dp = 1); one call at a
/// time (the server's scheduler loop).
class ServedRanks {
public:
    /// The part of start's refusals that needs no model: a layout the executor does not run
    /// (checkRunnable) or of more than one replica (dp > 1).
    static Result<void> checkLayout(const checkpoint::ShardLayout& layout);
    /// Opens `checkpoint` and starts `layout`'s ranks, each loading its slices. Refused by name:
    /// a layout the executor does not run (checkRunnable), dp > 1, a model the sharded executor
    /// does not cover (checkExecutorCovers) or that the plan does not split (checkPlanFits).
    /// With `backendFor`, rank r computes its float operators on backendFor(r) (a backend
    /// plugin instance of its own, on its shard; operators it declines fall back to the CPU), as
    /// `day0 run --plan --backend` does; whoever made the backends' plugin keeps it loaded while
    /// the ranks live. Cancellable while loading.
    static Result<std::unique_ptr<ServedRanks>> start(const std::filesystem::path& checkpoint,
        const checkpoint::ShardLayout& layout, Progress& progress, std::stop_token stop,
        std::function<Result<std::shared_ptr<exec::Backend>>(int rank)> backendFor = {});
    /// Stops the ranks.
    ~ServedRanks();
    ServedRanks(const ServedRanks&) = delete;
    ServedRanks& operator=(const ServedRanks&) = delete;

    /// A new sequence with room for `capacity` tokens on every rank; its id.
    Result<std::int64_t> open(std::int64_t capacity);
    /// Runs `ids` at positions [start, start + ids.size()) of `sequence` and returns the logits
    /// [vocab] of the last, widened to double. A failing rank stops every rank: this and every
    /// later call then return its error.
    Result<std::vector<double>> feed(
        std::int64_t sequence, std::span<const std::int64_t> ids, std::int64_t start);
    /// One step of several sequences together: ids[i] at positions [starts[i], starts[i] +
    /// ids[i].size()) of sequences[i]; the logits [vocab] of each one's last token, in order.
    /// Each rank runs the step on its shard as one batched forward
    /// (ParallelForward::layersBatch: every linear one product over all the sequences' rows,
    /// each sequence attending over its own cache). More than one sequence is refused for a
    /// model batchRefusal() names. A failing rank stops every rank, as for feed.
    Result<std::vector<std::vector<double>>> feedBatch(std::span<const std::int64_t> sequences,
        std::span<const std::span<const std::int64_t>> ids, std::span<const std::int64_t> starts);
    /// Why feedBatch does not run several sequences of this model together; empty: it does.
    [[nodiscard]] const std::string& batchRefusal() const;
    /// Frees `sequence`'s caches.
    void close(std::int64_t sequence);

    /// The layout as the ranks run it (layoutString): "tp=2,pp=1,ep=1,dp=1,etp=2,mb=1".
    [[nodiscard]] const std::string& plan() const;
    [[nodiscard]] int worldSize() const;
    /// Bytes of weights the ranks hold together (their slices, fp32; replicated tensors once
    /// per rank holding them).
    [[nodiscard]] std::int64_t weightBytes() const;

    struct Impl;

private:
    explicit ServedRanks(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace day0::parallel
