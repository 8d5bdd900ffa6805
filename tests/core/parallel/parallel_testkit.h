#pragma once

// Shared by the in-process proof (parallel_test.cpp) and the mpirun one (tests/integration):
// shrunk models of three architectures, the plan matrix, and the comparison against the
// single-rank engine.

#include "base/result.h"
#include "checkpoint/sharding.h"
#include "exec/weight_source.h"
#include "model/model_spec.h"
#include "parallel/run.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace day0::test {

/// A shrunk checkpoint on disk, opened.
struct ShrunkModel {
    std::string name; ///< the bundled config it was shrunk from
    std::filesystem::path dir;
    model::ModelSpec spec;
    std::unique_ptr<exec::WeightSource> weights;
    std::string checkpointId;
};

/// Shrinks bundled `config` ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3") into `dir` with
/// sizes every plan of the matrix divides (2 layers, 4 heads, 8 experts, vocab 250) and opens it.
Result<ShrunkModel> makeShrunkModel(
    const std::string& config, const std::filesystem::path& dir, std::uint64_t seed = 7);

/// A shrunk recurrent hybrid for the TP / PP proof of its Gated DeltaNet or Mamba-2 layers
/// (hidden 64, 4 attention heads, 2 linear-attention key heads or 2 Mamba-2 groups of 8 heads,
/// so tp=2 splits every head kind):
/// - "qwen3.5-27b": 2 layers, the first Gated DeltaNet and the first full attention layer of
///   the config (shrink keeps one layer of each kind);
/// - "qwen3-next-80b-a3b": 4 layers (3 Gated DeltaNet, 1 full attention; MoE in each), which
///   pp=2 splits at the boundary with stage layer counts 3/1;
/// - "nemotron-h": nemotron-3-nano-30b with hybrid_override_pattern "MM*-" (Mamba-2, Mamba-2,
///   attention, relu² MLP; no MoE layer);
/// - "nemotron-3-nano-30b": 4 layers M, E, M, * (its relu² MoE beside the Mamba-2 layers);
/// - "nemotron-3-super": nemotron-3-super-120b-fp8 unquantised, 4 layers of its pattern (its
///   latent MoE: experts between fc1_latent_proj and fc2_latent_proj).
/// - "kimi-linear-48b-a3b": 4 layers (3 Kimi Delta Attention with 2 heads, the first with a
///   dense MLP, then one MLA without RoPE; MoE in the last three), which pp=2 splits at the
///   KDA / MLA boundary with stage layer counts 3/1.
/// - "gemma-4-e2b": the E2B text decoder in 6 layers (sliding ×3, full, then KV-shared sliding
///   and full layers reading layers 2 and 3, with double-wide MLPs), per-layer input
///   embeddings, window 4, one KV head.
/// - "gemma-4-26b-a4b": 6 layers (five sliding, one full with attention_k_eq_v), the MoE block
///   (8 fused experts) beside each dense MLP.
/// - "minimax-m3": 4 layers (three dense full-attention layers, then an MSA layer with MoE),
///   one KV head (replicated over TP ranks); "minimax-m3-kv2" the same with 2 KV heads and 2
///   index heads (one KV group per TP rank).
/// - "kimi-linear-k3-additions": the Kimi-Linear shrink with Kimi-K3's latent MoE (with its
///   norm), MLA output gate, KDA safe gate and full-rank output gate switched on.
/// - "deepseek-v4-flash": unquantised, 4 blocks (sliding and hash-routed, compressed-sparse
///   with the indexer and hash-routed, heavily compressed, compressed-sparse), 4 heads in 2
///   output groups, 4 hyper-connection streams, window 4, index top-k 2;
///   "deepseek-v4-flash-released" the same in its released format (block FP8 with F8_E8M0
///   `.scale` tensors, FP4 experts).
/// With pp=2 (balanced, or 3/1 for Qwen3-Next) the first stage of the first three ends on a
/// recurrent layer and the second starts with attention.
Result<ShrunkModel> makeShrunkHybrid(
    const std::string& name, const std::filesystem::path& dir, std::uint64_t seed = 7);

/// One plan of the proof matrix.
struct MatrixPlan {
    checkpoint::ShardLayout layout;
    int microBatches = 1;
    [[nodiscard]] std::string label() const;
};

/// Every valid plan with tp ∈ {1,2,4}, pp ∈ {1,2}, ep ∈ {1,2,4} for `spec` on up to `maxWorld`
/// ranks: dp fills a world of 4 where tp × pp ≤ 4; ep > 1 only for MoE models and only where
/// ep divides dp × tp; pp = 2 runs two micro-batches; every plan with tp > 1 also with sequence
/// parallelism.
std::vector<MatrixPlan> matrixPlans(const model::ModelSpec& spec, int maxWorld);

/// The prompts of a plan's sequences (different lengths and tokens per sequence).
std::vector<std::vector<std::int64_t>> matrixPrompts(int sequences, std::int64_t vocab);

/// Greedy tokens per sequence in the matrix.
inline constexpr std::int64_t kMatrixTokens = 3;

/// This test process's scratch folder `<tmp>/day0-<name>-<pid>`, made on first use.
std::filesystem::path processScratch(const std::string& name);

/// makeShrunkModel / makeShrunkHybrid of `name` under `scratch`, made once per process and kept.
/// A model that cannot be made throws std::runtime_error with the reason (the test fails with it).
const ShrunkModel& cachedShrunkModel(const std::string& name, const std::filesystem::path& scratch);
const ShrunkModel& cachedShrunkHybrid(
    const std::string& name, const std::filesystem::path& scratch);

/// A plan of the given degrees; two micro-batches when pp > 1.
MatrixPlan planOf(int tp, int pp, int ep = 1, int dp = 1, bool sp = false);

/// The options of a run of plan `p` on `m`: `prompts` (the matrix prompts for dp × micro-batches
/// sequences when empty) and `newTokens` greedy tokens each.
parallel::ParallelRunOptions runOptions(const ShrunkModel& m, const MatrixPlan& p,
    std::vector<std::vector<std::int64_t>> prompts = {}, std::int64_t newTokens = kMatrixTokens);

/// Runs the single-rank fp32 engine on every prompt and compares: max over sequences of
/// max|parallel − single| / max|single| over all logits, and the generated tokens. Fails (with
/// the sequence and both token lists) when tokens differ.
Result<double> compareWithSingleRank(const ShrunkModel& model,
    const std::vector<parallel::SequenceResult>& sequences, std::int64_t newTokens);

/// The single rank's own fp32 rounding on the same sequences: max over them of
/// max|fp32 − fp64| / max|fp64| over all logits of the engine's two precisions.
Result<double> singleRankFp32Floor(const ShrunkModel& model,
    const std::vector<parallel::SequenceResult>& sequences, std::int64_t newTokens);

/// The weights of a model, except that one tensor fails to read (delay 0) or reads only after
/// `delaySeconds` (a hanging rank).
class FaultyWeights : public exec::WeightSource {
public:
    FaultyWeights(const exec::WeightSource& inner, std::string tensor, double delaySeconds);
    [[nodiscard]] bool has(const std::string& name) const override;
    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override;
    [[nodiscard]] std::vector<std::string> names() const override;
    [[nodiscard]] std::string describe() const override { return "faulty"; }

private:
    const exec::WeightSource& m_inner;
    std::string m_tensor;
    double m_delay;
};

} // namespace day0::test
