#pragma once

// Internal to core/exec: the recurrent state of linear-attention and SSM layers as data. A layer
// that carries a state between steps (Gated DeltaNet, Mamba-2; any later one) calls
// storeRecurrentState after its update, where the serving kernels write the state back to
// their cache in its storage dtype, and recordRecurrentState to capture it under
// "<mixer>#state" and "<mixer>#conv_state" (numerics/state_anchor.h).

#include "base/result.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/precision.h"
#include "model/model_spec.h"
#include "numerics/tensor.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace day0::exec {

/// Parses a recurrent-state dtype (`--state-dtype`): fp32, bf16 or fp16 (and precisionName's
/// aliases: float32, bfloat16, ...); the error names the value and the choices.
Result<PrecisionMode> parseStateDtype(std::string_view text);

/// Whether `spec` has layers that carry a recurrent state (Gated DeltaNet, Mamba-2, Kimi Delta
/// Attention).
bool hasRecurrentState(const model::ModelSpec& spec);

/// Refuses, naming the option, a state dtype or a state capture the run cannot honour: a model
/// without recurrent layers, or a state dtype on the fp64 reference (which keeps its state in
/// fp64).
Result<void> checkRecurrentStateOptions(
    const model::ModelSpec& spec, const PrecisionPlan& plan, const CaptureOptions& capture);

namespace detail {

/// Rounds a layer's recurrent state (`count` values) to the plan's state dtype, in place: what
/// the kernels store after each step (no-op without a state dtype or with fp32).
template <typename T>
void storeRecurrentState(T* state, std::int64_t count, const PrecisionPlan& plan);

/// Records one step's state of the recurrent layer `module` ("model.layers.3.linear_attn"): the
/// state as "<module>#state" [1, stateShape...] and the conv window as "<module>#conv_state"
/// [1, convShape...] when the taps want them (a run concatenates the steps' rows).
template <typename T>
void recordRecurrentState(Taps<T>& taps, const std::string& module, const T* state,
    const numerics::Shape& stateShape, const T* conv, const numerics::Shape& convShape);

} // namespace detail

} // namespace day0::exec
