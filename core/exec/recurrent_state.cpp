// The recurrent state as data: its storage dtype and its captures.
//
// Where the dtype applies follows vLLM, which keeps two dtypes per recurrent layer
// (model_executor/layers/mamba/mamba_utils.py, MambaStateDtypeCalculator._mamba_state_dtype and
// gated_delta_net_state_dtype): the conv window in mamba_cache_dtype ("auto": the model dtype)
// and the temporal state in mamba_ssm_cache_dtype ("auto": the conv window's; Qwen3.5 and
// Nemotron-H checkpoints ask for float32 through mamba_ssm_dtype / mamba_ssm_cache_dtype).
// The kernels compute each update in fp32 from the stored state and store the result back in
// the state's dtype once per call: the Gated DeltaNet prefill writes chunk_gated_delta_rule's
// final state with `.to(ssm_state.dtype)` and the decode kernel
// (fused_recurrent_gated_delta_rule, FLA's ops/fused_recurrent.py) stores its state in place in
// that dtype; Mamba-2 (layers/mamba/mamba_mixer2.py) writes the chunked scan's final states
// into ssm_state and its decode's selective_state_update stores the state in the cache's
// dtype. So the engine rounds the state once after each step; the conv window already holds
// the activation dtype's values (the in_proj outputs), as with mamba_cache_dtype "auto".
#include "exec/recurrent_state.h"

#include "numerics/state_anchor.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <type_traits>

namespace day0::exec {

Result<PrecisionMode> parseStateDtype(std::string_view text)
{
    auto mode = parsePrecision(text);
    if (!mode
        || (*mode != PrecisionMode::F32 && *mode != PrecisionMode::BF16
            && *mode != PrecisionMode::F16)) {
        return Error::badInput(fmt::format(
            "--state-dtype '{}': the recurrent state is stored in fp32, bf16 or fp16 (vLLM's "
            "mamba_ssm_cache_dtype float32, bfloat16, float16)",
            text));
    }
    return *mode;
}

bool hasRecurrentState(const model::ModelSpec& spec)
{
    return std::any_of(spec.layers.begin(), spec.layers.end(), [](const model::LayerSpec& l) {
        return l.mixer == model::MixerKind::GatedDeltaNet || l.mixer == model::MixerKind::Mamba2
            || l.mixer == model::MixerKind::KimiDelta;
    });
}

Result<void> checkRecurrentStateOptions(
    const model::ModelSpec& spec, const PrecisionPlan& plan, const CaptureOptions& capture)
{
    if ((plan.stateMode || capture.state) && !hasRecurrentState(spec)) {
        return Error::badInput(
            fmt::format("{}: {} has no recurrent layers (Gated DeltaNet, "
                        "Mamba-2, Kimi Delta Attention) whose state the run could {}",
                plan.stateMode ? "--state-dtype" : "--capture-state",
                spec.name.empty() ? spec.modelType : spec.name,
                plan.stateMode ? "store in another dtype" : "capture"));
    }
    if (plan.stateMode && plan.isF64()) {
        return Error::badInput(fmt::format("--state-dtype {}: the fp64 reference keeps its "
                                           "recurrent state in fp64; give it to the fp32 or "
                                           "emulated target",
            precisionName(*plan.stateMode)));
    }
    // vLLM keeps Kimi Delta Attention's state in float32 whatever the cache dtypes
    // (MambaStateDtypeCalculator.kda_state_dtype): no serving stack stores it narrower.
    const bool kda = std::any_of(spec.layers.begin(), spec.layers.end(),
        [](const model::LayerSpec& l) { return l.mixer == model::MixerKind::KimiDelta; });
    if (kda && plan.stateMode && *plan.stateMode != PrecisionMode::F32) {
        return Error::badInput(fmt::format("--state-dtype {}: Kimi Delta Attention keeps its "
                                           "recurrent state in fp32 (vLLM's kda_state_dtype)",
            precisionName(*plan.stateMode)));
    }
    return success();
}

namespace detail {

template <typename T>
void storeRecurrentState(T* state, std::int64_t count, const PrecisionPlan& plan)
{
    if (!plan.stateMode) {
        return;
    }
    if constexpr (std::is_same_v<T, float>) {
        // fp32 is the float compute type itself: storing it changes nothing.
        roundActivations(std::span<float>(state, std::size_t(count)), *plan.stateMode);
    } else {
        // checkRecurrentStateOptions refuses a state dtype on the fp64 reference.
        (void)state;
        (void)count;
    }
}

template <typename T>
void recordRecurrentState(Taps<T>& taps, const std::string& module, const T* state,
    const numerics::Shape& stateShape, const T* conv, const numerics::Shape& convShape)
{
    const auto withStep = [](const numerics::Shape& shape) {
        numerics::Shape s { 1 };
        s.insert(s.end(), shape.begin(), shape.end());
        return s;
    };
    const std::string stateName = module + std::string(numerics::kStateSuffix);
    if (taps.wants(stateName)) {
        taps.record(stateName, state, withStep(stateShape));
    }
    const std::string convName = module + std::string(numerics::kConvStateSuffix);
    if (conv != nullptr && taps.wants(convName)) {
        taps.record(convName, conv, withStep(convShape));
    }
}

template void storeRecurrentState<float>(float*, std::int64_t, const PrecisionPlan&);
template void storeRecurrentState<double>(double*, std::int64_t, const PrecisionPlan&);
template void recordRecurrentState<float>(Taps<float>&, const std::string&, const float*,
    const numerics::Shape&, const float*, const numerics::Shape&);
template void recordRecurrentState<double>(Taps<double>&, const std::string&, const double*,
    const numerics::Shape&, const double*, const numerics::Shape&);

} // namespace detail

} // namespace day0::exec
