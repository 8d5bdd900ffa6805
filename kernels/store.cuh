#pragma once

// Loads and stores of the three activation formats, for the kernels of this folder.

#include "day0_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace day0::kernels::detail {

template <typename T> __device__ __forceinline__ float load(const T* p, std::int64_t i);
template <> __device__ __forceinline__ float load<float>(const float* p, std::int64_t i)
{
    return p[i];
}
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p, std::int64_t i)
{
    return __bfloat162float(p[i]);
}
template <> __device__ __forceinline__ float load<__half>(const __half* p, std::int64_t i)
{
    return __half2float(p[i]);
}

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v)
{
    return __float2half_rn(v);
}

/// v rounded to T's precision and back.
template <typename T> __device__ __forceinline__ float roundTo(float v)
{
    return static_cast<float>(fromFloat<T>(v));
}
template <> __device__ __forceinline__ float roundTo<float>(float v) { return v; }
template <> __device__ __forceinline__ float roundTo<__nv_bfloat16>(float v)
{
    return __bfloat162float(__float2bfloat16_rn(v));
}
template <> __device__ __forceinline__ float roundTo<__half>(float v)
{
    return __half2float(__float2half_rn(v));
}

/// Calls f(T*) with a null pointer of the store's element type.
template <typename F> cudaError_t dispatch(Store store, F&& f)
{
    switch (store) {
    case Store::F32:
        return f(static_cast<float*>(nullptr));
    case Store::BF16:
        return f(static_cast<__nv_bfloat16*>(nullptr));
    case Store::F16:
        return f(static_cast<__half*>(nullptr));
    }
    return cudaErrorInvalidValue;
}

inline unsigned gridFor(std::int64_t n, int block)
{
    const std::int64_t blocks = (n + block - 1) / block;
    return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks < 1 ? 1 : blocks) : 65535 * 16);
}

} // namespace day0::kernels::detail
