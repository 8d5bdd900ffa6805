#include "gpu_bench.h"

#include "day0_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <functional>

namespace day0::gpu {

namespace {

/// Mean seconds of `run` over `reps` after two warm-up calls, timed with CUDA events.
double timeIt(const std::function<void()>& run, int reps)
{
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    run();
    run();
    cudaEventRecord(start);
    for (int i = 0; i < reps; ++i) {
        run();
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return double(ms) / 1000.0 / reps;
}

} // namespace

void runBenchmarks(bool quick, Report& report)
{
    const int reps = quick ? 3 : 20;
    // RMSNorm over bf16 [rows, 8192] against copying the same bytes device to device; both
    // move 2 × bytes (read + write).
    const std::int64_t dim = 8192;
    const std::int64_t rows = quick ? 1024 : 16384;
    const std::size_t bytes = std::size_t(rows * dim) * 2;
    void* a = nullptr;
    void* b = nullptr;
    void* w = nullptr;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess
        || cudaMalloc(&w, dim * 2) != cudaSuccess) {
        report.check("benchmarks", false, "cudaMalloc failed");
        return;
    }
    cudaMemset(a, 0x3f, bytes);
    cudaMemset(w, 0x3f, dim * 2);
    const double copy
        = timeIt([&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr); }, reps);
    cudaError_t normStatus = cudaSuccess;
    const double norm = timeIt(
        [&] {
            normStatus = kernels::rmsNorm(
                a, nullptr, w, b, nullptr, kernels::Store::BF16, rows, dim, 1e-6f, nullptr);
        },
        reps);
    const double copyBandwidth = 2.0 * double(bytes) / copy;
    const double normBandwidth = 2.0 * double(bytes) / norm;
    const double ratio = normBandwidth / copyBandwidth;
    report.figure("device-to-device copy", fmt::format("{:.0f} GB/s", copyBandwidth / 1e9));
    report.figure("RMSNorm bf16 [" + std::to_string(rows) + ", 8192]",
        fmt::format("{:.0f} GB/s = {:.2f}× the copy", normBandwidth / 1e9, ratio));
    if (!quick) {
        report.check("RMSNorm bandwidth ≥ 0.80 × device-to-device copy",
            normStatus == cudaSuccess && ratio >= 0.80, fmt::format("{:.2f}×", ratio));
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(w);

    // cuBLAS bf16 GEMM (fp32 accumulation), the FLOP/s baseline.
    const int n = quick ? 2048 : 8192;
    void* ga = nullptr;
    void* gb = nullptr;
    void* gc = nullptr;
    cudaMalloc(&ga, std::size_t(n) * n * 2);
    cudaMalloc(&gb, std::size_t(n) * n * 2);
    cudaMalloc(&gc, std::size_t(n) * n * 2);
    cudaMemset(ga, 0x3c, std::size_t(n) * n * 2);
    cudaMemset(gb, 0x3c, std::size_t(n) * n * 2);
    cublasHandle_t handle = nullptr;
    cublasCreate(&handle);
    const float alpha = 1.0f;
    const float beta = 0.0f;
    cublasStatus_t gemmStatus = CUBLAS_STATUS_SUCCESS;
    const double gemm = timeIt(
        [&] {
            gemmStatus = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, ga,
                CUDA_R_16BF, n, gb, CUDA_R_16BF, n, &beta, gc, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT);
        },
        reps);
    const double gemmFlops = 2.0 * double(n) * n * n / gemm;
    report.check("cuBLAS bf16 GEMM runs", gemmStatus == CUBLAS_STATUS_SUCCESS,
        cublasGetStatusString(gemmStatus));
    report.figure(fmt::format("cuBLAS bf16 GEMM {}³ (TN, fp32 accumulate)", n),
        fmt::format("{:.1f} TFLOP/s (baseline 1.00)", gemmFlops / 1e12));
    cublasDestroy(handle);
    cudaFree(ga);
    cudaFree(gb);
    cudaFree(gc);

    // Causal attention prefill, GQA 32/8 heads of 128: 4·S²·H·d / 2 FLOPs (causal half).
    const std::int64_t seq = quick ? 1024 : 4096;
    kernels::AttentionParams p;
    p.queries = seq;
    p.keys = seq;
    p.heads = 32;
    p.kvHeads = 8;
    p.headDim = 128;
    p.valueDim = 128;
    p.qStride = p.heads * p.headDim;
    p.kStride = p.kvHeads * p.headDim;
    p.vStride = p.kvHeads * p.valueDim;
    p.scale = 0.08838834764831845f;
    void* q = nullptr;
    void* k = nullptr;
    void* v = nullptr;
    void* o = nullptr;
    cudaMalloc(&q, std::size_t(seq * p.qStride) * 2);
    cudaMalloc(&k, std::size_t(seq * p.kStride) * 2);
    cudaMalloc(&v, std::size_t(seq * p.vStride) * 2);
    cudaMalloc(&o, std::size_t(seq * p.heads * p.valueDim) * 2);
    cudaMemset(q, 0x3c, std::size_t(seq * p.qStride) * 2);
    cudaMemset(k, 0x3c, std::size_t(seq * p.kStride) * 2);
    cudaMemset(v, 0x3c, std::size_t(seq * p.vStride) * 2);
    cudaError_t attnStatus = cudaSuccess;
    const double attn = timeIt(
        [&] { attnStatus = kernels::attention(q, k, v, o, kernels::Store::BF16, p, nullptr); },
        quick ? 2 : 5);
    const double attnFlops = 2.0 * double(seq) * seq * p.heads * p.headDim / attn;
    report.check(
        "attention prefill runs", attnStatus == cudaSuccess, cudaGetErrorString(attnStatus));
    report.figure(fmt::format("attention prefill bf16 S={} H=32/8 d=128 causal", seq),
        fmt::format(
            "{:.2f} TFLOP/s = {:.3f}× cuBLAS bf16 GEMM", attnFlops / 1e12, attnFlops / gemmFlops));
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
}

} // namespace day0::gpu
