#include "gemm_plan.h"

namespace day0::cuda {

GemmPlan planGemm(exec::PrecisionMode mode, exec::Fp8Scaling scaling, std::int64_t in,
    std::int64_t out, int smMajor, int smMinor)
{
    using exec::PrecisionMode;
    GemmPlan plan;
    switch (mode) {
    case PrecisionMode::F64:
    case PrecisionMode::F32:
        plan.path = GemmPath::F32;
        return plan;
    case PrecisionMode::BF16:
        plan.path = GemmPath::BF16;
        return plan;
    case PrecisionMode::F16:
        plan.path = GemmPath::F16;
        return plan;
    case PrecisionMode::F8E4M3:
    case PrecisionMode::F8E5M2: {
        const bool fp8Device = smMajor > 8 || (smMajor == 8 && smMinor >= 9);
        const bool aligned = in % 16 == 0 && out % 16 == 0;
        plan.roundOutputToBf16 = true;
        // cuBLASLt multiplies e4m3 by e4m3 (or mixed with e5m2) but not e5m2 by e5m2, which is
        // what the emulated e5m2 mode stores both inputs in.
        if (scaling == exec::Fp8Scaling::PerTensor && fp8Device && aligned
            && mode == PrecisionMode::F8E4M3) {
            plan.path = GemmPath::Fp8;
            return plan;
        }
        plan.path = GemmPath::F32OnRounded;
        plan.roundInputOnHost = true;
        return plan;
    }
    case PrecisionMode::Int8:
    case PrecisionMode::Nvfp4:
    case PrecisionMode::Mxfp4:
    case PrecisionMode::Int4G128:
    case PrecisionMode::Int4G32:
        // Quantised on the host as the CPU emulation does (exec::roundGemmInput); cuBLAS runs
        // fp32 on the rounded inputs. A native FP4 GEMM needs Blackwell's block-scaled cuBLASLt.
        plan.path = GemmPath::F32OnRounded;
        plan.roundInputOnHost = true;
        plan.roundOutputToBf16 = true;
        return plan;
    }
    return plan;
}

std::string describeGemm(const GemmPlan& plan)
{
    switch (plan.path) {
    case GemmPath::F32:
        return "native (cuBLAS fp32)";
    case GemmPath::BF16:
        return "native (cuBLAS bf16, fp32 accumulate)";
    case GemmPath::F16:
        return "native (cuBLAS fp16, fp32 accumulate)";
    case GemmPath::Fp8:
        return plan.e5m2 ? "native (cuBLASLt fp8 e5m2, per-tensor scales, fp32 accumulate)"
                         : "native (cuBLASLt fp8 e4m3, per-tensor scales, fp32 accumulate)";
    case GemmPath::F32OnRounded:
        return "native (cuBLAS fp32 on host-rounded inputs)";
    }
    return "native";
}

} // namespace day0::cuda
