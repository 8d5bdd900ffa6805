#pragma once

// The backward pass of the CPU reference (issue #25): the next-token cross-entropy of a model on
// a token sequence and its gradient with respect to every parameter and, on request, every
// anchor's activation, in fp64 (double) or fp32 (float), each operator's backward written by
// hand (backward_ops.h). The training loop (core/train) calls lossAndGradients() with its own
// parameters; `day0 run --grad` writes the result as a dump.
//
// Naming (DESIGN.md §3): a gradient is captured as "<name>#grad", where <name> is either
//  - an anchor (an HF module path, "model.layers.3.self_attn", "lm_head"): the gradient of the
//    loss with respect to that module's output, shaped as the forward capture [tokens, ...]; or
//  - a parameter (an HF parameter name, "model.layers.3.self_attn.q_proj.weight"): the
//    gradient with respect to that weight, shaped as the weight.
// A parameter name ends in ".weight" or ".bias" (gpt-oss adds "self_attn.sinks" and its fused
// "experts.gate_up_proj[_bias]" / "experts.down_proj[_bias]", Gemma-4 its fused experts and
// "router.scale" / "router.per_expert_scale"), which no anchor does
// (numerics/gradient_anchor.h). With tied embeddings there is no lm_head.weight: the head's
// gradient joins model.embed_tokens.weight's.
// Routed experts that receive no token have a zero gradient, present, not missing. Tensors that
// no gradient reaches by construction (DeepSeek's e_score_correction_bias, which only ranks the
// experts, and Gemma-4's layer_scalar, both buffers in HF) have none.

#include "base/progress.h"
#include "base/result.h"
#include "exec/precision.h"
#include "model/model_spec.h"
#include "numerics/dump.h"
#include "numerics/gradient_anchor.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace day0::exec {

class Engine;

/// The suffix of a gradient capture ("<anchor>#grad", "<parameter>#grad").
inline constexpr std::string_view kGradSuffix = numerics::kGradientSuffix;

/// What a gradient pass computes.
struct GradientOptions {
    bool fp64 = true; ///< double arithmetic (the reference); false: float (fp32)
    bool activations = false; ///< also every anchor's activation gradient
    /// Counts the layers' forwards and backwards (2 × layers, stage "forward" / "backward");
    /// null: none.
    Progress* progress = nullptr;
    /// Tensor parallelism (Megatron): when set, `spec` describes this rank's share (its local
    /// query and KV heads, MLP and routed-expert widths, the weights sliced to match:
    /// q/k/v/gate/up by rows, o/down by columns) and the pass sums, in place over the TP group
    /// by calling it, each row-parallel product in the forward (o_proj, down_proj, the combined
    /// experts; the o_proj bias is added once, after the sum), each column-parallel block's
    /// input gradient in the backward (q/k/v, gate/up, the experts' with the combine weights'
    /// gradients, before the router's share joins) and, at the end, the gradients of the
    /// per-head q/k norm weights (each rank saw only its heads). DeepSeek's MLA splits by heads
    /// (q_b_proj or q_proj and kv_b_proj by rows, o_proj by columns; q_a/kv_a and their norms
    /// replicated, the input gradients of the head-split blocks summed before they reach them)
    /// and its shared experts as a dense MLP. Everything else (embeddings, norms, router, head)
    /// is replicated and its gradient comes out the same on every rank. `count` elements of
    /// `type` (F64 or F32) at `data`; an error ends the pass.
    std::function<Result<void>(void* data, std::int64_t count, DType type)> tpSum;
    /// Inject mode, the backward's own-versus-inherited error (the forward's `--inject` turned
    /// round): a reference gradient dump (gradientDump) of the same model, ids and targets. The
    /// gradient flows from the loss down, so each module's output gradient inherits from the
    /// module after it; at every boundary the backward crosses ("lm_head#grad", "model.norm#grad",
    /// each "model.layers.L#grad", "model.embed_tokens#grad") the gradient is recorded as
    /// computed, then replaced by the reference's before the next module's backward reads it.
    /// What a module's backward passes on then carries its own error only: "model.layers.L#grad"
    /// is layer L+1's (the final norm's for the last layer), "model.embed_tokens#grad" layer
    /// 0's. The saved forward activations stay this pass's own. Null: no injection.
    const numerics::Dump* inject = nullptr;
    /// Emulated low precision in single layers' backward: the activation gradients these decoder
    /// layers' backward passes on (their sub-modules' and their input's) are rounded to
    /// `roundedTo`. Weight gradients and every other layer keep the pass's arithmetic.
    std::vector<int> roundedLayers;
    DType roundedTo = DType::BF16; ///< the format of roundedLayers
    /// Emulated low-precision compute (bf16-mixed training, `day0 run --grad --precision
    /// bf16`): BF16 or F16, with fp64 false; F32 (the default): none. The recipe is Megatron-LM's
    /// bf16 training on its bf16 copy of the fp32 master weights:
    ///  - every weight is rounded to the format (Megatron's Float16Module copy; the trainer
    ///    passes weights already rounded, so this is exact there);
    ///  - the forward rounds where the engine's emulated forward rounds (exec/emulated_ops.h,
    ///    the same functions): embedding rows; each projection's input and output around an
    ///    fp32-accumulated GEMM; RMSNorm normalised in fp32, rounded, times the weight, rounded;
    ///    RoPE as HF's eager rotary; attention scores, probabilities and context; SwiGLU's
    ///    activation and product; every residual sum; the logits, whose cross-entropy is then
    ///    taken in double (Megatron's fp32 cross-entropy);
    ///  - the backward rounds every activation gradient an op passes on: the logits', each
    ///    projection's input gradient (fp32-accumulated; where q/k/v or gate/up read the same
    ///    input, their sum once, as Megatron's fused linear_qkv and linear_fc1 compute it),
    ///    SwiGLU's gate and up gradients, attention's q/k/v gradients (fp32 inside, as a fused
    ///    attention kernel), RoPE's and the norms' input gradients, each residual sum;
    ///  - weight gradients are fp32-accumulated GEMMs kept in fp32 (Megatron's
    ///    gradient_accumulation_fusion into its fp32 main_grad), unrounded.
    /// Mixture-of-experts as the engine's: a softmax router's logits rounded (a sigmoid one in
    /// fp32), the routing taken from them in double, each expert's output gradient (its combine
    /// weight times the block's) rounded, the softmax router's logit gradient rounded.
    /// DeepSeek's multi-head latent attention (DeepSeek-V3, Kimi-K2) as the engine's emulated
    /// MLA: q_a/q_b (or q_proj), kv_a_proj_with_mqa and kv_b_proj rounded as projections, the
    /// q and kv latent norms as norms, RoPE on the rope lanes and the shared rope key as HF's
    /// eager rotary, scores, probabilities and context rounded; in the backward o_proj's,
    /// q_b_proj's and kv_b_proj's input gradients (after their tensor-parallel sums), the q/k/v
    /// gradients, the shared rope key's gradient (summed over every head, then rounded once),
    /// RoPE's and the latent norms' input gradients rounded, q_a's and kv_a's input gradients
    /// summed once (as a fused down projection). Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE and
    /// DeepSeek-V3/Kimi-K2; what the backward itself lacks (backwardUnsupported: the DSA
    /// indexer, the MLA output gate, MLA without RoPE, ...) stays refused by name.
    PrecisionMode emulated = PrecisionMode::F32;
    /// Vocab-parallel embedding and head under tensor parallelism (Megatron's
    /// VocabParallelEmbedding, the column-parallel lm_head and vocab_parallel_cross_entropy):
    /// when not 0, `spec.vocabSize` is this rank's rows [vocabStart, vocabStart +
    /// spec.vocabSize) of model.embed_tokens.weight (and lm_head.weight) out of `vocabTotal`
    /// ids. The embedding looks up the ids whose rows the rank holds (zeros for the others) and
    /// the group sums the rows (tpSum); the head computes the rank's logits only (the result's
    /// `logits` are [tokens, spec.vocabSize], this rank's columns); the cross-entropy takes each
    /// row's maximum over the group (tpMax), then sums its exponentials and the target's logit
    /// over it (tpSum), so the loss comes out whole on every rank; the head's input gradient, a
    /// partial sum, is summed before the final norm's backward; each rank's embedding (and head)
    /// gradient covers its own rows. Needs tpSum and tpMax. 0: the vocabulary is whole.
    std::int64_t vocabTotal = 0;
    std::int64_t vocabStart = 0; ///< the first id of this rank's rows (with vocabTotal)
    /// The maximum in place over the TP group (the vocab-parallel cross-entropy's), as tpSum.
    std::function<Result<void>(void* data, std::int64_t count, DType type)> tpMax;
    /// The zero-centred RMSNorms' weights (Qwen3-Next's and Qwen3.5's, whose HF norms scale by
    /// 1 + w; exec/forward.h zeroCentredNorm) come as the engine keeps them, 1 + w
    /// (Engine::weightTable()); false: as the checkpoint stores them, w, and the pass adds the
    /// 1. The gradient is the same either way (∂(1 + w)/∂w = 1).
    bool engineNorms = false;
};

/// The loss and its gradients for one sequence.
struct GradientResult {
    double loss = 0.0; ///< mean cross-entropy (nats) over the counted positions
    std::int64_t counted = 0; ///< positions whose target is ≥ 0
    /// Bytes the forward kept for the backward: every layer's saved tensors, the final norm's
    /// input and output and the logits (the step's activation memory, as a trainer holds it).
    std::int64_t keptBytes = 0;
    numerics::Tensor logits; ///< [tokens, vocab], F64 or F32
    /// ∂loss/∂parameter by the name of the weight given (no suffix), shaped as it, F64 or F32:
    /// the HF parameter names, but for packed experts (gpt-oss), which the engine names and
    /// trains one by one (checkpointGradients gives them the checkpoint's fused names).
    std::map<std::string, numerics::Tensor> parameters;
    /// "<anchor>#grad" → ∂loss/∂(module output), with options.activations, in the order the
    /// backward reaches them: from "lm_head#grad" down to "model.embed_tokens#grad".
    std::vector<std::pair<std::string, numerics::Tensor>> activations;
    /// The forward's routing of each MoE layer as a forward dump names it: `<router>` (its
    /// logits [tokens, experts]), `<router>#score` (a sigmoid router's σ(logit) + bias) and
    /// `<router>#topk` (the chosen experts [tokens, k], I64), so that a comparison of gradient
    /// dumps finds the tokens whose experts flipped (numerics/gradient_compare.h).
    std::vector<std::pair<std::string, numerics::Tensor>> routing;
};

/// What the backward lacks for `spec`, one line each naming the family or operator; empty when
/// lossAndGradients() supports it.
std::vector<std::string> backwardUnsupported(const model::ModelSpec& spec);

/// What the emulated-precision backward (GradientOptions::emulated) lacks for `spec` beyond
/// backwardUnsupported(), one line each naming the operator; empty when it covers it (today it
/// covers everything backwardUnsupported() admits, MLA included).
std::vector<std::string> emulatedBackwardUnsupported(const model::ModelSpec& spec);

/// Tensors no gradient reaches by construction, which a gradient pass and a trainer hold fixed:
/// DeepSeek's e_score_correction_bias (it only ranks the experts) and Gemma-4's layer_scalar
/// (both buffers in HF, not parameters).
bool untrainableParameter(const std::string& name);

/// HF's causal-LM labels: position i predicts ids[i + 1]; the last position has no target (−1).
std::vector<std::int64_t> nextTokenTargets(std::span<const std::int64_t> ids);

/// The loss of `spec` with parameters `weights` (HF names; F32/F64/BF16 are read in the
/// compute type, a tied lm_head may be absent) on `ids` against `targets` (one per id, a
/// negative target is not counted), and its gradients. Errors: Unsupported naming what
/// backwardUnsupported() lists, BadInput naming a missing or misshapen weight, an id outside the
/// vocabulary or a length mismatch; Cancelled when `stop` is requested.
Result<GradientResult> lossAndGradients(const model::ModelSpec& spec,
    const std::map<std::string, numerics::Tensor>& weights, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, const GradientOptions& options, std::stop_token stop);

/// lossAndGradients() over an engine's loaded weights, in the engine's arithmetic (fp64 or fp32).
Result<GradientResult> lossAndGradients(const Engine& engine, std::span<const std::int64_t> ids,
    std::span<const std::int64_t> targets, bool activations, std::stop_token stop,
    Progress* progress = nullptr);

/// `parameters` (GradientResult::parameters) under the checkpoint's names: gpt-oss's packed
/// experts, which the pass computes one by one under the engine's canonical names
/// ("model.layers.L.mlp.experts.E.gate_proj.weight" [I, H], "...up_proj.bias" [I],
/// "...down_proj.weight" [H, I], ...), gathered into HF's fused parameters
/// "model.layers.L.mlp.experts.gate_up_proj" [E, H, 2I] (gate at even, up at odd columns),
/// "...gate_up_proj_bias" [E, 2I], "...down_proj" [E, I, H] and "...down_proj_bias" [E, H]
/// (an expert that received no token is a zero slice); Gemma-4's experts likewise into
/// "model.layers.L.experts.gate_up_proj" [E, 2I, H] (gate the first I rows) and
/// "...experts.down_proj" [E, H, I]; every other gradient as it is.
std::map<std::string, numerics::Tensor> checkpointGradients(
    const model::ModelSpec& spec, const std::map<std::string, numerics::Tensor>& parameters);

/// A dump of a gradient pass: the logits as "lm_head", every activation gradient
/// "<anchor>#grad" and every parameter gradient "<parameter>#grad" under the checkpoint's names
/// (checkpointGradients); dump.json's extra holds "loss", "counted", "targets" and
/// "gradients": true.
numerics::Dump gradientDump(const model::ModelSpec& spec, const GradientResult& result,
    std::span<const std::int64_t> ids, std::span<const std::int64_t> targets, bool fp64);

} // namespace day0::exec
