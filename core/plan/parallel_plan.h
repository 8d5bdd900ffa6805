#pragma once

#include "base/dtype.h"
#include "base/result.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::plan {

/// What the layout is for.
enum class Mode { Train, Infer };

/// Activation recomputation (Korthikanti et al. 2022): none, selective (core attention is
/// recomputed in the backward pass) or full (only each layer's input is kept).
enum class Recompute { None, Selective, Full };

/// How decoder layers are spread over pipeline stages when no explicit list is given.
enum class StageSplit {
    Balanced, ///< as even as possible; leftover layers go to the middle stages first
    LightEnds, ///< the embedding and the output head/loss each count as one layer, so the first
               ///< and last stages take one decoder layer less (Megatron's
               ///< --account-for-embedding/loss-in-pipeline-split)
};

/// A parallel layout as a user writes it: `tp=8,pp=4,ep=16,dp=2,cp=1,zero=1,recompute=selective`.
/// Fields left at 0 / empty are derived later from the model, cluster and workload (see
/// resolveLayout). Value type.
struct ParallelPlan {
    int tp = 1; ///< tensor parallel
    int pp = 1; ///< pipeline parallel (stages)
    int ep = 1; ///< expert parallel
    int etp = 0; ///< expert tensor parallel; 0: same as tp (Megatron's default)
    int dp = 0; ///< data parallel; 0: the rest of the cluster, world / (tp·pp·cp)
    int cp = 1; ///< context parallel (sequence split across ranks for attention)
    std::optional<bool> sp; ///< sequence parallel; default on when tp > 1 in training
    int zero = 0; ///< 0 none, 1 optimizer states sharded (= Megatron distributed optimizer),
                  ///< 2 + gradients, 3 + weights (FSDP)
    Recompute recompute = Recompute::None;
    int microBatch = 1; ///< sequences per micro-batch
    int globalBatch = 0; ///< sequences per step; 0: the workload's
    int numMicroBatches = 0; ///< micro-batches per step per DP rank; 0: derived
    int vpp = 1; ///< virtual pipeline stages (model chunks) per rank: interleaved 1F1B when > 1
    std::vector<int> stageLayers; ///< decoder layers per stage; empty: `split`
    StageSplit split = StageSplit::Balanced;
    std::optional<DType> weights; ///< weight dtype; empty: checkpoint's (infer) or BF16 (train)
    std::optional<DType> kv; ///< KV-cache dtype; empty: BF16
    DType grads = DType::F32; ///< gradient buffer dtype (Megatron keeps fp32 main grads)
    DType optimizer = DType::F32; ///< Adam moment dtype (master weights are FP32)

    /// Expert tensor parallel size with the default applied.
    [[nodiscard]] int expertTp() const { return etp > 0 ? etp : tp; }
    bool operator==(const ParallelPlan&) const = default;
};

/// Expert tensor parallelism when a plan does not give etp, the one default every part of Day0
/// applies (memory, planner, shard, the executor): in training Megatron's, etp = tp; in
/// inference with expert parallelism whole experts on each rank (etp = 1, as vLLM and SGLang
/// place them); in inference without it, tp.
int defaultExpertTp(Mode mode, int tp, int ep);

/// Parses a plan string; unknown keys and bad values are BadInput naming the key.
/// Keys: tp pp ep etp dp cp sp zero recompute mb (micro_batch) gbs (global_batch)
/// m (micro_batches) vpp layers (e.g. 15/16/15/15) split (balanced|ends) weights kv grads
/// optimizer (dtypes: bf16 fp16 fp32 fp8; weights also "checkpoint").
Result<ParallelPlan> parsePlan(std::string_view text);

/// Prints a plan in the form parsePlan reads. Keys at their defaults are left out unless `full`.
std::string formatPlan(const ParallelPlan& plan, bool full = false);

/// "none", "selective", "full".
std::string recomputeName(Recompute recompute);
/// Parses a recompute name.
std::optional<Recompute> parseRecompute(std::string_view name);
/// "train", "infer".
std::string modeName(Mode mode);
/// Parses "train"/"training" or "infer"/"inference".
std::optional<Mode> parseMode(std::string_view name);
/// Short dtype name for plans and tables: "bf16", "fp8", "fp32".
std::string shortDtypeName(DType dtype);

} // namespace day0::plan
