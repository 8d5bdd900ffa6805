#pragma once

// Internals shared by the cost model and the planner: per-class FLOP tables built once per
// model and workload, collective times, and the step-time kernel over precomputed stage weights.

#include "hardware/cluster.h"
#include "plan/cost_model.h"
#include "plan/memory_kernel.h"

#include <vector>

namespace day0::plan::detail {

/// Link figures of a cluster for the alpha-beta model.
struct Network {
    double intraBandwidth = 1; ///< bytes/s per device per direction, efficiency applied
    double intraLatency = 0; ///< seconds per step
    double interBandwidth = 1;
    double interLatency = 0;
    int domainSize = 8;
};

Network networkOf(const hardware::Cluster& cluster);

/// Ring reduce-scatter or all-gather (`phases` 1) or all-reduce (`phases` 2) of `bytes` (the
/// full buffer per rank) over `size` ranks spaced `stride` apart, hierarchical when the group
/// leaves a fast domain: (k−1)/k·S/B_intra + (g−1)/g·(S/k)/B_inter per phase, where k members
/// share a domain and g domains take part; latency α·⌈log2 n⌉ per phase and tier.
double collectiveTime(double bytes, int stride, int size, const Network& net, int phases);

/// All-to-all where every rank sends `bytes` in total, spread evenly over the group: the parts
/// for ranks in the same domain go over the fast link, the rest over the scale-out link, in
/// parallel.
double allToAllTime(double bytes, int stride, int size, const Network& net);

/// Point-to-point transfer of `bytes` between ranks `distance` apart.
double sendTime(double bytes, int distance, const Network& net);

/// Forward FLOPs per token of each layer class.
struct ClassFlops {
    double dense = 0; ///< attention projections, dense/shared MLP, router
    double core = 0; ///< attention scores and values, at the workload's sequence (or context)
    double routed = 0; ///< routed experts (top-k), balanced
};

/// Per-model, per-workload tables: built once, reused for every layout.
struct CostTables {
    std::vector<ClassFlops> classes;
    double headFlops = 0; ///< output head per token
    double mtpExtraFlops = 0; ///< per MTP layer beyond its transformer layer (eh_proj + head)
    Network net;
    double peakBf16 = 1;
    double peakFp8 = 1;
    double hbmBandwidth = 1;
    double modelFlopsPerSequence = 0; ///< Megatron's model FLOPs per training sequence
};

CostTables makeCostTables(
    const ModelSummary& model, const Workload& workload, const hardware::Cluster& cluster);

/// Training step time from precomputed stage weights (`weights[s]` for every stage).
TrainingCost trainingCost(const ModelSummary& model, const CostTables& tables, const Layout& layout,
    const Workload& workload, const CostOptions& options, const StageWeights* weights);

} // namespace day0::plan::detail
