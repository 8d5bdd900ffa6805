#pragma once

// Internals shared by the cost model and the planner: per-class FLOP tables built once per
// model and workload, collective times, and the step-time kernel over precomputed stage weights.

#include "hardware/cluster.h"
#include "plan/cost_model.h"
#include "plan/memory_kernel.h"

#include <array>
#include <vector>

namespace day0::plan::detail {

/// A small array on the stack, on the heap when a model has unusually many layer classes.
template <typename T> class ScratchArray {
public:
    explicit ScratchArray(std::size_t n)
    {
        if (n > m_small.size()) {
            m_big.resize(n);
            m_data = m_big.data();
        } else {
            m_data = m_small.data();
        }
        for (std::size_t i = 0; i < n; ++i) {
            m_data[i] = T {};
        }
    }
    T& operator[](std::size_t i) { return m_data[i]; }
    const T& operator[](std::size_t i) const { return m_data[i]; }

private:
    std::array<T, 16> m_small {};
    std::vector<T> m_big;
    T* m_data = nullptr;
};

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

/// Dispatch (or combine) of `tokens` tokens of `tokenBytes` each over an EP group of `size`
/// ranks spaced `stride` apart, each token routed to `s.topK` of `s.experts` experts spread
/// evenly over the group. Without node dedup every routed copy travels on its own
/// (allToAllTime). With it a token crosses the scale-out link once per other node holding one
/// of its experts, and the copies for the other GPUs of a node travel over the fast link there;
/// routing is uniform, and group-limited routing (s.expertGroups, s.groupsPerToken) caps the
/// nodes a token reaches when each node holds whole groups.
double expertExchangeTime(double tokens, const LayerShape& s, double tokenBytes, int stride,
    int size, const Network& net, bool nodeDedup);

/// Point-to-point transfer of `bytes` between ranks `distance` apart.
double sendTime(double bytes, int distance, const Network& net);

/// Attention-score and value FLOPs of one token by mixer kind, given the keys it attends to
/// (`span`: its window or the causal mask applied; capped here by an indexer's selection) and the
/// keys its indexer or compressor sees (`scored`): full or windowed softmax attention;
/// indexer-selected keys (DSA, CSA, block-sparse) plus the indexer's own scoring of every
/// (compressed) key; DeepSeek-V4's window plus its compressed entries; the fixed state work of
/// recurrent mixers. Training averages over a causal sequence, decode attends over the cache.
double mixerCoreFlops(const LayerShape& s, double span, double scored);

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

/// FLOP/s that large GEMMs reach: the FP8 or BF16 dense peak times its efficiency.
double gemmRate(const CostTables& tables, bool fp8, const CostOptions& options);

/// One micro-batch's time on one stage, split by kind (training).
struct StageTime {
    double compute = 0; ///< forward + backward (+ recompute)
    double forward = 0; ///< forward-only compute, for overlap windows
    double tp = 0;
    double ep = 0;
    double cp = 0;
    double pp = 0;
    double zero = 0; ///< exposed ZeRO-2/3 per-micro-batch collectives (set by the combiner)
    [[nodiscard]] double total() const { return compute + tp + ep + cp + pp + zero; }
};

/// What one micro-batch costs a stage before recompute and ZeRO are applied: forward compute
/// seconds and communication seconds per pass.
struct StageWork {
    double dense = 0; ///< forward GEMMs outside routed experts and attention scores
    double core = 0; ///< forward attention scores and values
    double routed = 0; ///< forward routed-expert GEMMs
    double tp = 0; ///< TP/SP/ETP collectives per pass
    double ep = 0; ///< expert all-to-all per pass
    double cp = 0; ///< context-parallel ring per pass
    double pp = 0; ///< pipeline hand-offs per micro-batch (all passes)
};

/// Work of every stage into out[0 .. pp) for the layout's micro-batch; independent of the
/// recompute mode and ZeRO stage. Per-class layer costs are computed once and scaled by each
/// stage's layer counts.
void stageWork(const ModelSummary& model, const CostTables& tables, const Layout& layout,
    const Workload& workload, const CostOptions& options, StageWork* out);

/// Stage times under the layout's recompute mode (ZeRO-3 terms excluded) into out[0 .. pp).
void stageTimes(const Layout& layout, const StageWork* work, StageTime* out);

/// Step time without data-parallel, optimizer and ZeRO-3 terms (all ≥ 0): a lower bound that
/// lets the planner skip layouts that cannot enter its top list.
double pipelineLowerBound(const Layout& layout, const StageTime* times);

/// Step time of a layout from its stages' times and weights (ZeRO stage taken from `layout`).
TrainingCost combineStageTimes(const CostTables& tables, const Layout& layout,
    const Workload& workload, const CostOptions& options, const StageWeights* weights,
    const StageTime* times);

/// Training step time from precomputed stage weights (`weights[s]` for every stage).
TrainingCost trainingCost(const ModelSummary& model, const CostTables& tables, const Layout& layout,
    const Workload& workload, const CostOptions& options, const StageWeights* weights);

} // namespace day0::plan::detail
