// Flash-style causal attention for prefill and decode: a block serves kWarps (query, head) items
// that share one KV head (GQA: the query heads of a group, then the next query), walks the keys
// in tiles staged in shared memory and keeps an online softmax per item, so scores never reach
// global memory. q/k and v widths may differ (MLA).
#include "store.cuh"

#include <cfloat>

namespace day0::kernels {

using detail::dispatch;
using detail::load;
using detail::roundTo;

namespace {

constexpr int kWarps = 4;
constexpr int kTile = 32; // keys per tile: one per lane when scoring
constexpr int kMaxPerLane = int(kMaxAttentionDim / 32);

template <typename T>
__global__ void attentionKernel(const T* q, const T* k, const T* v, T* out, AttentionParams p)
{
    extern __shared__ float shared[];
    const std::int64_t group = p.heads / p.kvHeads;
    const std::int64_t items = p.queries * group;
    const std::int64_t kvHead = blockIdx.y;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const std::int64_t item = std::int64_t(blockIdx.x) * kWarps + warp;
    const bool active = item < items;
    const std::int64_t query = active ? item / group : 0;
    const std::int64_t head = kvHead * group + (active ? item % group : 0);
    // Keys this item may see: [first, last].
    const std::int64_t position = p.keys - p.queries + query;
    const std::int64_t last = p.causal ? position : p.keys - 1;
    const std::int64_t first = p.window > 0 ? max(std::int64_t(0), position - p.window + 1) : 0;

    const int kPitch = int(p.headDim) + 1; // padding: lane j reads row j without bank conflicts
    float* sQ = shared; // [kWarps, headDim]
    float* sK = sQ + kWarps * p.headDim; // [kTile, kPitch]
    float* sV = sK + kTile * kPitch; // [kTile, valueDim]
    for (std::int64_t d = lane; d < p.headDim; d += 32) {
        sQ[warp * p.headDim + d] = active ? load(q, query * p.qStride + head * p.headDim + d) : 0.f;
    }

    // The block's key range: the union of its items' ranges.
    const std::int64_t firstItem = std::int64_t(blockIdx.x) * kWarps;
    const std::int64_t lastItem = min(firstItem + kWarps, items) - 1;
    const std::int64_t blockLast = p.causal ? p.keys - p.queries + lastItem / group : p.keys - 1;
    const std::int64_t blockFirst = p.window > 0
        ? max(std::int64_t(0), p.keys - p.queries + firstItem / group - p.window + 1)
        : 0;

    float acc[kMaxPerLane];
    for (int i = 0; i < kMaxPerLane; ++i) {
        acc[i] = 0.0f;
    }
    float runningMax = -FLT_MAX;
    float runningSum = 0.0f;

    for (std::int64_t tile = blockFirst - blockFirst % kTile; tile <= blockLast; tile += kTile) {
        __syncthreads();
        for (std::int64_t e = threadIdx.x; e < std::int64_t(kTile) * p.headDim; e += blockDim.x) {
            const std::int64_t j = e / p.headDim;
            const std::int64_t d = e % p.headDim;
            const std::int64_t key = tile + j;
            sK[j * kPitch + d]
                = key < p.keys ? load(k, key * p.kStride + kvHead * p.headDim + d) : 0.f;
        }
        for (std::int64_t e = threadIdx.x; e < std::int64_t(kTile) * p.valueDim; e += blockDim.x) {
            const std::int64_t j = e / p.valueDim;
            const std::int64_t d = e % p.valueDim;
            const std::int64_t key = tile + j;
            sV[j * p.valueDim + d]
                = key < p.keys ? load(v, key * p.vStride + kvHead * p.valueDim + d) : 0.f;
        }
        __syncthreads();
        if (!active || tile > last || tile + kTile <= first) {
            continue;
        }
        // Lane j scores key tile + j.
        const std::int64_t key = tile + lane;
        float score = -FLT_MAX;
        if (key >= first && key <= last) {
            float dot = 0.0f;
            for (std::int64_t d = 0; d < p.headDim; ++d) {
                dot += sQ[warp * p.headDim + d] * sK[lane * kPitch + d];
            }
            // The reference stores q·kᵀ·scale in the compute dtype before the softmax.
            score = roundTo<T>(dot * p.scale) * 1.4426950408889634f;
        }
        float tileMax = score;
        for (int o = 16; o > 0; o >>= 1) {
            tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, o));
        }
        const float newMax = fmaxf(runningMax, tileMax);
        const float correction = exp2f(runningMax - newMax);
        const float prob = score == -FLT_MAX ? 0.0f : exp2f(score - newMax);
        float tileSum = prob;
        for (int o = 16; o > 0; o >>= 1) {
            tileSum += __shfl_xor_sync(0xffffffffu, tileSum, o);
        }
        runningSum = runningSum * correction + tileSum;
        runningMax = newMax;
        for (int i = 0; i < kMaxPerLane && i * 32 < p.valueDim; ++i) {
            acc[i] *= correction;
        }
        for (int j = 0; j < kTile; ++j) {
            const float pj = __shfl_sync(0xffffffffu, prob, j);
            if (pj == 0.0f) {
                continue;
            }
            // P is fed to the P·V product in the activation dtype (FlashAttention does too).
            const float pr = roundTo<T>(pj);
            for (int i = 0; i < kMaxPerLane; ++i) {
                const std::int64_t d = std::int64_t(i) * 32 + lane;
                if (d >= p.valueDim) {
                    break;
                }
                acc[i] += pr * sV[j * p.valueDim + d];
            }
        }
    }
    if (!active) {
        return;
    }
    const float inv = runningSum > 0.0f ? 1.0f / runningSum : 0.0f;
    for (int i = 0; i < kMaxPerLane; ++i) {
        const std::int64_t d = std::int64_t(i) * 32 + lane;
        if (d >= p.valueDim) {
            break;
        }
        out[(query * p.heads + head) * p.valueDim + d] = detail::fromFloat<T>(acc[i] * inv);
    }
}

} // namespace

cudaError_t attention(const void* q, const void* k, const void* v, void* out, Store store,
    const AttentionParams& p, cudaStream_t stream)
{
    if (p.queries == 0) {
        return cudaSuccess;
    }
    if (p.kvHeads <= 0 || p.heads % p.kvHeads != 0 || p.headDim > kMaxAttentionDim
        || p.valueDim > kMaxAttentionDim || p.queries > p.keys) {
        return cudaErrorInvalidValue;
    }
    const std::int64_t items = p.queries * (p.heads / p.kvHeads);
    const dim3 grid(unsigned((items + kWarps - 1) / kWarps), unsigned(p.kvHeads));
    const std::size_t shared
        = sizeof(float) * (kWarps * p.headDim + kTile * (p.headDim + 1) + kTile * p.valueDim);
    return dispatch(store, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        auto kernel = attentionKernel<T>;
        if (shared > 48 * 1024) {
            const cudaError_t e = cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
            if (e != cudaSuccess) {
                return e;
            }
        }
        kernel<<<grid, kWarps * 32, shared, stream>>>(static_cast<const T*>(q),
            static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(out), p);
        return cudaGetLastError();
    });
}

} // namespace day0::kernels
