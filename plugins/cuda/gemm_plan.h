#pragma once

#include "exec/precision.h"

#include <cstdint>
#include <string>

namespace day0::cuda {

/// How a Linear runs on cuBLAS for a precision mode.
enum class GemmPath {
    F32, ///< fp32 inputs, fp32 compute (pedantic: no TF32)
    BF16, ///< bf16 inputs and output, fp32 accumulation
    F16, ///< fp16 inputs and output, fp32 accumulation
    Fp8, ///< cuBLASLt fp8 (e4m3/e5m2) inputs with per-tensor scales, bf16 output, fp32 accum
    F32OnRounded, ///< fp32 GEMM on inputs rounded on the host to the emulated format
                  ///< (block-scaled fp8, int8 weights, fp8 shapes cuBLASLt refuses)
};

/// The cuBLAS path of a Linear: the fp8 tensor-core path needs e4m3, per-tensor scaling, sm_89 or
/// newer and the reduction and output widths multiples of 16 (cuBLASLt's fp8 alignment).
struct GemmPlan {
    GemmPath path = GemmPath::F32;
    bool e5m2 = false; ///< Fp8: the e5m2 format
    bool roundInputOnHost = false; ///< x rounded as a GEMM input on the host before upload
    bool roundOutputToBf16 = false; ///< the output is stored as bf16 (low-precision modes)
};

/// Chooses the path for `mode` on a device of compute capability `smMajor`.`smMinor`.
GemmPlan planGemm(exec::PrecisionMode mode, exec::Fp8Scaling scaling, std::int64_t in,
    std::int64_t out, int smMajor, int smMinor);

/// "native (cuBLAS bf16, fp32 accumulate)", as opcheck prints it.
std::string describeGemm(const GemmPlan& plan);

} // namespace day0::cuda
