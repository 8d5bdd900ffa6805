// Conversions, embedding, RMSNorm (+ residual), gated activations, RoPE, FP8 (de)quantisation
// and the statistics of taps.
#include "store.cuh"

#include <cuda_fp8.h>

#include <cfloat>

namespace day0::kernels {

using detail::dispatch;
using detail::gridFor;
using detail::load;
using detail::roundTo;

namespace {

template <typename T> __global__ void fromFloatKernel(const float* in, T* out, std::int64_t n)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        out[i] = detail::fromFloat<T>(in[i]);
    }
}

template <typename T> __global__ void toFloatKernel(const T* in, float* out, std::int64_t n)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        out[i] = load(in, i);
    }
}

__global__ void quantizeFp8Kernel(
    const float* in, std::uint8_t* out, std::int64_t n, float scale, bool e5m2)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const float v = in[i] / scale;
        out[i] = e5m2 ? __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2)
                      : __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    }
}

__global__ void dequantFp8BlockKernel(const std::uint8_t* bytes, const float* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t block, float* out)
{
    const std::int64_t blockCols = (cols + block - 1) / block;
    const std::int64_t n = rows * cols;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const std::int64_t r = i / cols;
        const std::int64_t c = i % cols;
        const __half_raw h = __nv_cvt_fp8_to_halfraw(bytes[i], __NV_E4M3);
        out[i] = __half2float(__half(h)) * scales[(r / block) * blockCols + c / block];
    }
}

template <typename T>
__global__ void embeddingKernel(const std::int64_t* ids, std::int64_t count, const T* table,
    std::int64_t vocab, std::int64_t dim, T* out, int* badIndex)
{
    const std::int64_t row = blockIdx.x;
    if (row >= count) {
        return;
    }
    const std::int64_t id = ids[row];
    const bool bad = id < 0 || id >= vocab;
    if (bad && threadIdx.x == 0) {
        atomicCAS(badIndex, 0, int(row + 1));
    }
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        out[row * dim + i] = bad ? detail::fromFloat<T>(0.0f) : table[id * dim + i];
    }
}

__device__ __forceinline__ float warpSum(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float blockSum(float v)
{
    __shared__ float partial[32];
    v = warpSum(v);
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    const int warps = blockDim.x / 32;
    v = threadIdx.x < warps ? partial[threadIdx.x] : 0.0f;
    if (warp == 0) {
        v = warpSum(v);
        if (threadIdx.x == 0) {
            partial[0] = v;
        }
    }
    __syncthreads();
    const float total = partial[0];
    __syncthreads();
    return total;
}

template <typename T, bool Emulated>
__global__ void rmsNormKernel(
    const T* x, const T* residual, const T* w, T* y, T* residualOut, std::int64_t dim, float eps)
{
    const std::int64_t row = blockIdx.x;
    const T* xr = x + row * dim;
    T* yr = y + row * dim;
    // The residual sum is stored (rounded) before the norm reads it back, as a separate add
    // kernel would: fusing saves the round trip through memory, not the rounding.
    float squares = 0.0f;
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = load(xr, i);
        if (residual != nullptr) {
            v = roundTo<T>(v + load(residual + row * dim, i));
            residualOut[row * dim + i] = detail::fromFloat<T>(v);
        }
        squares += v * v;
    }
    const float inv = rsqrtf(blockSum(squares) / float(dim) + eps);
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = residual != nullptr ? load(residualOut + row * dim, i) : load(xr, i);
        const float weight = w != nullptr ? load(w, i) : 1.0f;
        if constexpr (Emulated) {
            yr[i] = detail::fromFloat<T>(roundTo<T>(v * inv) * weight);
        } else {
            yr[i] = detail::fromFloat<T>(v * inv * weight);
        }
    }
}

/// The bandwidth path: the row is read once with 16-byte loads into shared memory (as stored),
/// so the normalisation pass reads shared memory instead of global memory a second time.
template <typename T, bool Emulated>
__global__ void rmsNormVectorKernel(
    const T* x, const T* residual, const T* w, T* y, T* residualOut, std::int64_t dim, float eps)
{
    extern __shared__ uint4 rowCache[];
    constexpr int kPerVec = int(sizeof(uint4) / sizeof(T));
    const std::int64_t row = blockIdx.x;
    const std::int64_t vecs = dim / kPerVec;
    const auto* xv = reinterpret_cast<const uint4*>(x + row * dim);
    const auto* rv
        = residual != nullptr ? reinterpret_cast<const uint4*>(residual + row * dim) : nullptr;
    auto* sumv
        = residualOut != nullptr ? reinterpret_cast<uint4*>(residualOut + row * dim) : nullptr;
    float squares = 0.0f;
    for (std::int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
        uint4 packed = xv[i];
        T* e = reinterpret_cast<T*>(&packed);
        if (rv != nullptr) {
            uint4 other = rv[i];
            const T* o = reinterpret_cast<const T*>(&other);
            for (int j = 0; j < kPerVec; ++j) {
                e[j] = detail::fromFloat<T>(load(e, j) + load(o, j));
            }
            sumv[i] = packed;
        }
        for (int j = 0; j < kPerVec; ++j) {
            const float v = load(e, j);
            squares += v * v;
        }
        rowCache[i] = packed;
    }
    const float inv = rsqrtf(blockSum(squares) / float(dim) + eps);
    auto* yv = reinterpret_cast<uint4*>(y + row * dim);
    const auto* wv = reinterpret_cast<const uint4*>(w);
    for (std::int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
        uint4 packed = rowCache[i];
        T* e = reinterpret_cast<T*>(&packed);
        uint4 weights = wv != nullptr ? wv[i] : uint4 {};
        const T* wt = reinterpret_cast<const T*>(&weights);
        for (int j = 0; j < kPerVec; ++j) {
            const float weight = wv != nullptr ? load(wt, j) : 1.0f;
            const float v = load(e, j);
            if constexpr (Emulated) {
                e[j] = detail::fromFloat<T>(roundTo<T>(v * inv) * weight);
            } else {
                e[j] = detail::fromFloat<T>(v * inv * weight);
            }
        }
        yv[i] = packed;
    }
}

bool aligned16(const void* p)
{
    return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

__device__ __forceinline__ float activate(float x, int act)
{
    switch (act) {
    case 0:
        return x / (1.0f + expf(-x));
    case 1:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case 2:
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case 3:
        return x / (1.0f + expf(-1.702f * x));
    default:
        return x > 0.0f ? x : 0.0f;
    }
}

template <typename T>
__global__ void gatedActivationKernel(T* gate, const T* up, std::int64_t n, int act)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const float a = roundTo<T>(activate(load(gate, i), act));
        gate[i] = detail::fromFloat<T>(a * load(up, i));
    }
}

template <typename T> __global__ void ropeKernel(T* x, RopeParams p)
{
    // One block per token, threads over (head, pair).
    const std::int64_t t = blockIdx.x;
    const std::int64_t work = p.heads * p.pairs;
    for (std::int64_t j = threadIdx.x; j < work; j += blockDim.x) {
        const std::int64_t h = j / p.pairs;
        const std::int64_t i = j % p.pairs;
        std::int64_t pos = p.positions[t];
        if (p.pairComponent != nullptr) {
            pos = p.positions3[p.pairComponent[i] * p.tokens + t];
        }
        double s = 0.0;
        double c = 0.0;
        sincos(double(pos) * p.invFreq[i], &s, &c);
        // The reference keeps cos/sin in the compute type (float) before rotating.
        const float cf = float(c * p.scaling);
        const float sf = float(s * p.scaling);
        T* v = x + (t * p.heads + h) * p.headDim;
        const std::int64_t a = p.interleaved ? 2 * i : i;
        const std::int64_t b = p.interleaved ? 2 * i + 1 : i + p.pairs;
        const float va = load(v, a);
        const float vb = load(v, b);
        v[a] = detail::fromFloat<T>(va * cf - vb * sf);
        v[b] = detail::fromFloat<T>(vb * cf + va * sf);
    }
}

template <typename T> __global__ void tapKernel(const T* x, std::int64_t n, TapPartial* partials)
{
    double sum = 0.0;
    double squares = 0.0;
    float lo = FLT_MAX;
    float hi = -FLT_MAX;
    unsigned long long finite = 0;
    unsigned long long nans = 0;
    unsigned long long infs = 0;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const float v = load(x, i);
        if (isnan(v)) {
            ++nans;
        } else if (isinf(v)) {
            ++infs;
        } else {
            ++finite;
            sum += v;
            squares += double(v) * v;
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
    }
    __shared__ double sSum[256];
    __shared__ double sSq[256];
    __shared__ float sLo[256];
    __shared__ float sHi[256];
    __shared__ unsigned long long sCount[3][256];
    const int tid = threadIdx.x;
    sSum[tid] = sum;
    sSq[tid] = squares;
    sLo[tid] = lo;
    sHi[tid] = hi;
    sCount[0][tid] = finite;
    sCount[1][tid] = nans;
    sCount[2][tid] = infs;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sSum[tid] += sSum[tid + s];
            sSq[tid] += sSq[tid + s];
            sLo[tid] = fminf(sLo[tid], sLo[tid + s]);
            sHi[tid] = fmaxf(sHi[tid], sHi[tid + s]);
            for (int c = 0; c < 3; ++c) {
                sCount[c][tid] += sCount[c][tid + s];
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        TapPartial out;
        out.sum = sSum[0];
        out.sumSquares = sSq[0];
        out.min = sLo[0];
        out.max = sHi[0];
        out.finite = sCount[0][0];
        out.nan = sCount[1][0];
        out.inf = sCount[2][0];
        partials[blockIdx.x] = out;
    }
}

int normThreads(std::int64_t dim)
{
    int threads = 32;
    while (threads < 1024 && threads < dim) {
        threads *= 2;
    }
    return threads;
}

} // namespace

cudaError_t convertFromFloat(
    const float* in, void* out, Store store, std::int64_t n, cudaStream_t stream)
{
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        fromFloatKernel<<<gridFor(n, 256), 256, 0, stream>>>(in, static_cast<T*>(out), n);
        return cudaGetLastError();
    });
}

cudaError_t convertToFloat(
    const void* in, Store store, float* out, std::int64_t n, cudaStream_t stream)
{
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        toFloatKernel<<<gridFor(n, 256), 256, 0, stream>>>(static_cast<const T*>(in), out, n);
        return cudaGetLastError();
    });
}

cudaError_t quantizeFp8(
    const float* in, std::uint8_t* out, std::int64_t n, float scale, bool e5m2, cudaStream_t stream)
{
    quantizeFp8Kernel<<<gridFor(n, 256), 256, 0, stream>>>(in, out, n, scale, e5m2);
    return cudaGetLastError();
}

cudaError_t dequantFp8Block(const std::uint8_t* bytes, const float* scales, std::int64_t rows,
    std::int64_t cols, std::int64_t block, float* out, cudaStream_t stream)
{
    if (block <= 0) {
        return cudaErrorInvalidValue;
    }
    dequantFp8BlockKernel<<<gridFor(rows * cols, 256), 256, 0, stream>>>(
        bytes, scales, rows, cols, block, out);
    return cudaGetLastError();
}

cudaError_t embedding(const std::int64_t* ids, std::int64_t count, const void* table, Store store,
    std::int64_t vocab, std::int64_t dim, void* out, int* badIndex, cudaStream_t stream)
{
    if (count == 0) {
        return cudaSuccess;
    }
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        embeddingKernel<<<unsigned(count), 256, 0, stream>>>(
            ids, count, static_cast<const T*>(table), vocab, dim, static_cast<T*>(out), badIndex);
        return cudaGetLastError();
    });
}

cudaError_t rmsNorm(const void* x, const void* residual, const void* w, void* y, void* residualOut,
    Store store, std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream)
{
    if (rows == 0) {
        return cudaSuccess;
    }
    if (residual != nullptr && residualOut == nullptr) {
        return cudaErrorInvalidValue;
    }
    const int threads = normThreads(dim);
    const std::size_t rowBytes = std::size_t(dim) * storeBytes(store);
    const bool vector = rowBytes % 16 == 0 && rowBytes <= 48 * 1024 && aligned16(x)
        && aligned16(residual) && aligned16(w) && aligned16(y) && aligned16(residualOut);
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        if (vector) {
            const int vecThreads = normThreads(std::int64_t(rowBytes / 16));
            const auto* xt = static_cast<const T*>(x);
            const auto* rt = static_cast<const T*>(residual);
            const auto* wt = static_cast<const T*>(w);
            auto* yt = static_cast<T*>(y);
            auto* ot = static_cast<T*>(residualOut);
            if (store == Store::F32) {
                rmsNormVectorKernel<T, false><<<unsigned(rows), vecThreads, rowBytes, stream>>>(
                    xt, rt, wt, yt, ot, dim, eps);
            } else {
                rmsNormVectorKernel<T, true><<<unsigned(rows), vecThreads, rowBytes, stream>>>(
                    xt, rt, wt, yt, ot, dim, eps);
            }
            return cudaGetLastError();
        }
        if (store == Store::F32) {
            rmsNormKernel<T, false><<<unsigned(rows), threads, 0, stream>>>(
                static_cast<const T*>(x), static_cast<const T*>(residual), static_cast<const T*>(w),
                static_cast<T*>(y), static_cast<T*>(residualOut), dim, eps);
        } else {
            rmsNormKernel<T, true><<<unsigned(rows), threads, 0, stream>>>(static_cast<const T*>(x),
                static_cast<const T*>(residual), static_cast<const T*>(w), static_cast<T*>(y),
                static_cast<T*>(residualOut), dim, eps);
        }
        return cudaGetLastError();
    });
}

cudaError_t gatedActivation(
    void* gate, const void* up, Store store, std::int64_t n, int act, cudaStream_t stream)
{
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        gatedActivationKernel<<<gridFor(n, 256), 256, 0, stream>>>(
            static_cast<T*>(gate), static_cast<const T*>(up), n, act);
        return cudaGetLastError();
    });
}

cudaError_t rope(void* x, Store store, const RopeParams& p, cudaStream_t stream)
{
    if (p.tokens == 0 || p.pairs == 0) {
        return cudaSuccess;
    }
    if (2 * p.pairs > p.headDim) {
        return cudaErrorInvalidValue;
    }
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        ropeKernel<<<unsigned(p.tokens), 256, 0, stream>>>(static_cast<T*>(x), p);
        return cudaGetLastError();
    });
}

cudaError_t tapStatistics(
    const void* x, Store store, std::int64_t n, TapPartial* partials, cudaStream_t stream)
{
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        tapKernel<<<kTapBlocks, 256, 0, stream>>>(static_cast<const T*>(x), n, partials);
        return cudaGetLastError();
    });
}

} // namespace day0::kernels
