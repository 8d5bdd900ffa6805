#pragma once

#include "gpu_op_checks.h"

namespace day0::gpu {

/// RMSNorm bandwidth against a device-to-device copy (must reach 80%), cuBLAS bf16 GEMM FLOP/s
/// and attention prefill as a fraction of it; smaller sizes and no threshold with `quick`.
void runBenchmarks(bool quick, Report& report);

} // namespace day0::gpu
