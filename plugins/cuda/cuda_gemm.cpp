// The Linear of the CUDA backend: cuBLAS GEMMs in fp32, bf16 and fp16 and cuBLASLt fp8 with
// per-tensor scales, all with fp32 accumulation; row-major y[rows, out] = x[rows, in] · w[out, in]ᵀ
// is the column-major "TN" product yᵀ = op(W)ᵀ · xᵀ.
#include "cuda_handles.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace day0::cuda {

using exec::PrecisionMode;
using kernels::Store;

Error cublasError(cublasStatus_t status, const char* what)
{
    return Error::internal(fmt::format("{} failed: {}", what, cublasGetStatusString(status)));
}

Result<std::unique_ptr<CudaBackend::Handles>> CudaBackend::Handles::create(cudaStream_t stream)
{
    auto h = std::make_unique<Handles>();
    if (const auto s = cublasCreate(&h->blas); s != CUBLAS_STATUS_SUCCESS) {
        return cublasError(s, "cublasCreate");
    }
    if (const auto s = cublasSetStream(h->blas, stream); s != CUBLAS_STATUS_SUCCESS) {
        return cublasError(s, "cublasSetStream");
    }
    // Default math: tensor cores for bf16/fp16, and no TF32 for fp32 (CUBLAS_COMPUTE_32F), so an
    // fp32 plan means fp32 products.
    if (const auto s = cublasSetMathMode(h->blas, CUBLAS_DEFAULT_MATH);
        s != CUBLAS_STATUS_SUCCESS) {
        return cublasError(s, "cublasSetMathMode");
    }
    if (const auto s = cublasLtCreate(&h->lt); s != CUBLAS_STATUS_SUCCESS) {
        return cublasError(s, "cublasLtCreate");
    }
    if (const auto e = cudaMalloc(&h->workspace, h->workspaceBytes); e != cudaSuccess) {
        return Error::unsupported(
            fmt::format("cudaMalloc of the cuBLASLt workspace failed: {}", cudaGetErrorString(e)));
    }
    return h;
}

CudaBackend::Handles::~Handles()
{
    if (workspace) {
        cudaFree(workspace);
    }
    if (lt) {
        cublasLtDestroy(lt);
    }
    if (blas) {
        cublasDestroy(blas);
    }
}

Result<void> CudaBackend::linear(const float* x, const float* w, float* y, std::int64_t rows,
    std::int64_t in, std::int64_t out, PrecisionMode mode, exec::Fp8Scaling scaling)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    const GemmPlan plan = planGemm(mode, scaling, in, out, m_smMajor, m_smMinor);
    if (plan.path == GemmPath::Fp8) {
        return linearFp8(x, w, y, rows, in, out, plan.e5m2);
    }
    std::vector<float> rounded;
    const float* xp = x;
    if (plan.roundInputOnHost) {
        // The same rounding the CPU emulation applies, so the GEMM itself is what is compared.
        rounded.assign(x, x + rows * in);
        exec::roundGemmInput(rounded, rows, in, mode, scaling, false);
        xp = rounded.data();
    }
    Store store = Store::F32;
    cudaDataType_t type = CUDA_R_32F;
    if (plan.path == GemmPath::BF16) {
        store = Store::BF16;
        type = CUDA_R_16BF;
    } else if (plan.path == GemmPath::F16) {
        store = Store::F16;
        type = CUDA_R_16F;
    }
    auto dX = upload(xp, rows * in, store);
    auto dW = weightOnDevice(w, out * in, store);
    if (!dW) {
        return dW.error();
    }
    auto dY = alloc(kernels::storeBytes(store) * std::size_t(rows * out));
    for (const auto* r : { &dX, &dY }) {
        if (!*r) {
            return r->error();
        }
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const auto status = cublasGemmEx(m_handles->blas, CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(rows),
        int(in), &alpha, dW->p, type, int(in), dX->get(), type, int(in), &beta, dY->get(), type,
        int(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) {
        return cublasError(status, "cublasGemmEx");
    }
    DAY0_TRY(download(dY->get(), rows * out, store, y));
    if (plan.roundOutputToBf16) {
        exec::roundActivations({ y, std::size_t(rows * out) }, mode);
    }
    return success();
}

namespace {

/// Destroys cuBLASLt descriptors on every path out.
struct LtDescriptors {
    cublasLtMatmulDesc_t matmul = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~LtDescriptors()
    {
        if (preference) {
            cublasLtMatmulPreferenceDestroy(preference);
        }
        for (auto* layout : { a, b, d }) {
            if (layout) {
                cublasLtMatrixLayoutDestroy(layout);
            }
        }
        if (matmul) {
            cublasLtMatmulDescDestroy(matmul);
        }
    }
};

float amaxOf(const float* v, std::int64_t n)
{
    float m = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
        m = std::max(m, std::fabs(v[i]));
    }
    return m;
}

} // namespace

Result<void> CudaBackend::linearFp8(const float* x, const float* w, float* y, std::int64_t rows,
    std::int64_t in, std::int64_t out, bool e5m2)
{
    // Per-tensor scales as the emulation computes them: amax / the format's largest finite.
    const float maxFinite = e5m2 ? 57344.0f : 448.0f;
    const float xAmax = amaxOf(x, rows * in);
    const float wAmax = amaxOf(w, out * in);
    const float scales[2]
        = { wAmax > 0.0f ? wAmax / maxFinite : 1.0f, xAmax > 0.0f ? xAmax / maxFinite : 1.0f };
    auto fX = uploadBytes(x, sizeof(float) * std::size_t(rows * in));
    auto fW = uploadBytes(w, sizeof(float) * std::size_t(out * in));
    auto qX = alloc(std::size_t(rows * in));
    auto qW = alloc(std::size_t(out * in));
    auto dScales = uploadBytes(scales, sizeof scales);
    auto dY = alloc(sizeof(std::uint16_t) * std::size_t(rows * out));
    for (const auto* r : { &fX, &fW, &qX, &qW, &dScales, &dY }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(check(kernels::quantizeFp8(fX->get<float>(), qX->get<std::uint8_t>(), rows * in,
                       scales[1], e5m2, m_stream),
        "quantizeFp8 (x)"));
    DAY0_TRY(check(kernels::quantizeFp8(fW->get<float>(), qW->get<std::uint8_t>(), out * in,
                       scales[0], e5m2, m_stream),
        "quantizeFp8 (w)"));
    const cudaDataType_t f8 = e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    LtDescriptors lt;
    const auto call = [](cublasStatus_t s, const char* what) -> Result<void> {
        if (s != CUBLAS_STATUS_SUCCESS) {
            return cublasError(s, what);
        }
        return success();
    };
    DAY0_TRY(call(cublasLtMatmulDescCreate(&lt.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate"));
    const cublasOperation_t transA = CUBLAS_OP_T;
    const cublasOperation_t transB = CUBLAS_OP_N;
    const float* aScale = dScales->get<float>();
    const float* bScale = dScales->get<float>() + 1;
    DAY0_TRY(call(cublasLtMatmulDescSetAttribute(
                      lt.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA),
        "cublasLtMatmulDescSetAttribute(TRANSA)"));
    DAY0_TRY(call(cublasLtMatmulDescSetAttribute(
                      lt.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB),
        "cublasLtMatmulDescSetAttribute(TRANSB)"));
    DAY0_TRY(call(cublasLtMatmulDescSetAttribute(
                      lt.matmul, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &aScale, sizeof aScale),
        "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)"));
    DAY0_TRY(call(cublasLtMatmulDescSetAttribute(
                      lt.matmul, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bScale, sizeof bScale),
        "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)"));
    DAY0_TRY(call(cublasLtMatrixLayoutCreate(&lt.a, f8, std::uint64_t(in), std::uint64_t(out), in),
        "cublasLtMatrixLayoutCreate(A)"));
    DAY0_TRY(call(cublasLtMatrixLayoutCreate(&lt.b, f8, std::uint64_t(in), std::uint64_t(rows), in),
        "cublasLtMatrixLayoutCreate(B)"));
    DAY0_TRY(call(cublasLtMatrixLayoutCreate(
                      &lt.d, CUDA_R_16BF, std::uint64_t(out), std::uint64_t(rows), out),
        "cublasLtMatrixLayoutCreate(D)"));
    DAY0_TRY(
        call(cublasLtMatmulPreferenceCreate(&lt.preference), "cublasLtMatmulPreferenceCreate"));
    DAY0_TRY(call(cublasLtMatmulPreferenceSetAttribute(lt.preference,
                      CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &m_handles->workspaceBytes,
                      sizeof m_handles->workspaceBytes),
        "cublasLtMatmulPreferenceSetAttribute"));
    cublasLtMatmulHeuristicResult_t heuristic {};
    int found = 0;
    DAY0_TRY(call(cublasLtMatmulAlgoGetHeuristic(m_handles->lt, lt.matmul, lt.a, lt.b, lt.d, lt.d,
                      lt.preference, 1, &heuristic, &found),
        "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0) {
        return Error::unsupported(
            fmt::format("cuBLASLt has no fp8 algorithm for [{}, {}] · [{}, {}]ᵀ on this device",
                rows, in, out, in));
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    DAY0_TRY(call(cublasLtMatmul(m_handles->lt, lt.matmul, &alpha, qW->get(), lt.a, qX->get(), lt.b,
                      &beta, dY->get(), lt.d, dY->get(), lt.d, &heuristic.algo,
                      m_handles->workspace, m_handles->workspaceBytes, m_stream),
        "cublasLtMatmul (fp8)"));
    return download(dY->get(), rows * out, Store::BF16, y);
}

} // namespace day0::cuda
