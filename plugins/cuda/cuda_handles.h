#pragma once

#include "base/result.h"
#include "cuda_backend.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <memory>

namespace day0::cuda {

/// The cuBLAS and cuBLASLt handles of a backend, bound to its stream, and the cuBLASLt
/// workspace.
struct CudaBackend::Handles {
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t lt = nullptr;
    void* workspace = nullptr;
    std::size_t workspaceBytes = std::size_t(32) << 20;

    static Result<std::unique_ptr<Handles>> create(cudaStream_t stream);
    ~Handles();
};

/// "CUBLAS_STATUS_NOT_SUPPORTED" etc. as an error naming the call.
Error cublasError(cublasStatus_t status, const char* what);

} // namespace day0::cuda
