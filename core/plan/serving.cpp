#include "plan/serving.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace day0::plan {

std::optional<KvReservation> parseScheduler(std::string_view name)
{
    if (name == "guaranteed_no_evict") {
        return KvReservation::WholeRequest;
    }
    if (name == "max_utilization") {
        return KvReservation::AverageContext;
    }
    return std::nullopt;
}

std::string_view schedulerName(KvReservation reservation)
{
    return reservation == KvReservation::WholeRequest ? "guaranteed_no_evict" : "max_utilization";
}

int reservedTokens(const Workload& workload, KvReservation reservation)
{
    return workload.prompt()
        + (reservation == KvReservation::WholeRequest ? workload.outputLength
                                                      : workload.outputLength / 2);
}

int averageContext(const Workload& workload)
{
    return workload.prompt() + workload.outputLength / 2;
}

Admission admitSequences(const ModelSummary& model, Layout layout, Workload workload,
    const MemoryOptions& options, double capacity, const ServingRuntime& runtime,
    std::span<const detail::StageWeights> weights)
{
    // Workspace and buffers are sized for the runtime's cap, as runtimes size them at start-up.
    layout.microBatch = std::max(1, runtime.maxBatch);
    workload.promptLength = workload.prompt();
    workload.context = reservedTokens(workload, runtime.reservation);
    Layout one = layout;
    one.microBatch = 1;
    Admission a;
    a.sequences = layout.microBatch;
    a.capped = true;
    double fewest = std::numeric_limits<double>::max();
    for (int s = 0; s < layout.pp; ++s) {
        const auto w = weights.size() > std::size_t(s)
            ? weights[std::size_t(s)]
            : detail::stageWeights(model, layout, workload, s);
        const auto b = detail::stageBuffers(model, layout, workload, options, s);
        const double other = (w.denseBytes + w.expertBytes
                                 + detail::inferenceWorkspace(model, layout, workload, options, s)
                                 + b.comm + b.moeDispatch)
                * (1.0 + options.fragmentation)
            + b.runtime;
        const double kv = detail::inferenceKvCache(model, one, workload, s);
        if (!(kv > 0)) {
            continue; // a stage that keeps no cache admits any number
        }
        const double pool = std::max(0.0, runtime.kvCacheFraction * (capacity - other));
        const double fits = std::floor(pool / kv);
        if (fits < fewest) {
            fewest = fits;
            a.stage = s;
            a.pool = pool;
            a.perSequence = kv;
            if (fits < 1) {
                // The device memory that would make this stage's pool hold one sequence.
                a.shortfall = other + kv / runtime.kvCacheFraction - capacity;
            }
        }
    }
    if (fewest < a.sequences) {
        a.sequences = int(std::max(0.0, fewest));
        a.capped = false;
    }
    return a;
}

} // namespace day0::plan
