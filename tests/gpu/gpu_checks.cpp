// The GPU checks of the CUDA backend (tests/gpu/run_all.sh runs them; CTest runs them with
// --quick and counts exit 77 as skipped): every backend operator against the CPU reference in
// fp32 and in emulated bf16/fp8, the device tap statistics, a CUPTI timeline holding the expected
// kernels, and the figures: RMSNorm bandwidth against a device-to-device copy, attention prefill
// against cuBLAS bf16 GEMM FLOP/s, all measured in this run.
#include "extend/plugin_registry.h"
#include "gpu_bench.h"
#include "gpu_op_checks.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>
#include <string>

using namespace day0;

int main(int argc, char** argv)
{
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        quick = quick || std::strcmp(argv[i], "--quick") == 0;
    }
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
        fmt::print("SKIP: no CUDA device: {}\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports no GPU");
        return 77;
    }
    gpu::Report report;
    extend::PluginRegistry registry;
    auto backend = extend::createBackend(registry, "cuda");
    if (!backend) {
        fmt::print("FAIL cuda plugin: {}\n", backend.error().message);
        return 1;
    }
    fmt::print("device: {}\n", (*backend)->device());
    gpu::runOpChecks(**backend, report);
    gpu::runTapCheck(report);
    gpu::runCuptiCheck(registry, **backend, report);
    gpu::runBenchmarks(quick, report);
    return report.summarize();
}
