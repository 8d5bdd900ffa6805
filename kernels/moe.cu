// MoE routing (softmax, and sigmoid + correction bias with group-limited selection) and the
// permutation of tokens into expert order.
#include "day0_kernels.h"

namespace day0::kernels {

namespace {

/// Index of the largest value among the unmasked ones; ties go to the lower index.
__device__ int argmaxUnmasked(const double* v, const bool* masked, int n)
{
    int best = -1;
    for (int i = 0; i < n; ++i) {
        if (!masked[i] && (best < 0 || v[i] > v[best])) {
            best = i;
        }
    }
    return best;
}

/// One block per token, its scores in shared memory (a thread's local arrays of up to 1024
/// experts would make the driver reserve local memory for every resident thread). The selection
/// is serial in thread 0: a few hundred experts × top-8 is negligible next to the GEMMs around
/// it, and serial order gives exactly the reference's tie-breaking.
__global__ void routeKernel(
    const float* logits, const float* bias, RouterParams p, std::int32_t* experts, double* weights)
{
    __shared__ double scores[kMaxExperts];
    __shared__ double choice[kMaxExperts];
    __shared__ bool masked[kMaxExperts];
    __shared__ double groupScore[kMaxGroups];
    __shared__ bool groupTaken[kMaxGroups];
    const std::int64_t t = blockIdx.x;
    const int e = int(p.experts);
    const float* row = logits + t * p.experts;
    for (int i = threadIdx.x; i < e; i += blockDim.x) {
        if (p.sigmoid) {
            scores[i] = 1.0 / (1.0 + exp(-double(row[i])));
            choice[i] = scores[i] + (bias != nullptr ? double(bias[i]) : 0.0);
        }
        masked[i] = false;
    }
    __syncthreads();
    if (threadIdx.x != 0) {
        return;
    }
    if (!p.sigmoid) {
        double m = row[0];
        for (int i = 1; i < e; ++i) {
            m = fmax(m, double(row[i]));
        }
        double sum = 0.0;
        for (int i = 0; i < e; ++i) {
            scores[i] = exp(double(row[i]) - m);
            sum += scores[i];
        }
        for (int i = 0; i < e; ++i) {
            scores[i] /= sum;
            choice[i] = scores[i];
        }
    }
    if (p.groups > 1) {
        const int groups = int(p.groups);
        const int perGroup = e / groups;
        for (int g = 0; g < groups; ++g) {
            const double* members = choice + g * perGroup;
            // Softmax (DeepSeek-V2): the best expert; sigmoid (V3): the sum of the best two.
            int best = 0;
            for (int i = 1; i < perGroup; ++i) {
                best = members[i] > members[best] ? i : best;
            }
            double score = members[best];
            if (p.sigmoid && perGroup > 1) {
                int second = best == 0 ? 1 : 0;
                for (int i = 0; i < perGroup; ++i) {
                    if (i != best && members[i] > members[second]) {
                        second = i;
                    }
                }
                score += members[second];
            }
            groupScore[g] = score;
            groupTaken[g] = false;
        }
        for (int n = 0; n < int(p.topkGroup) && n < groups; ++n) {
            groupTaken[argmaxUnmasked(groupScore, groupTaken, groups)] = true;
        }
        for (int g = 0; g < groups; ++g) {
            if (!groupTaken[g]) {
                for (int i = g * perGroup; i < (g + 1) * perGroup; ++i) {
                    choice[i] = 0.0;
                }
            }
        }
    }
    int chosen[kMaxTopK];
    double sum = 0.0;
    for (int j = 0; j < int(p.topK); ++j) {
        chosen[j] = argmaxUnmasked(choice, masked, e);
        masked[chosen[j]] = true;
        sum += scores[chosen[j]];
    }
    const double denominator = p.sigmoid ? sum + 1e-20 : sum;
    for (int j = 0; j < int(p.topK); ++j) {
        double w = scores[chosen[j]];
        if (p.normTopk) {
            w /= denominator;
        }
        experts[t * p.topK + j] = chosen[j];
        weights[t * p.topK + j] = w * p.scaling;
    }
}

__global__ void countKernel(const std::int32_t* experts, std::int64_t n, std::int32_t* offsets)
{
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        atomicAdd(offsets + experts[i] + 1, 1);
    }
}

/// Exclusive scan of the counts into offsets (one block; experts are few).
__global__ void scanKernel(std::int32_t* offsets, std::int64_t numExperts)
{
    if (threadIdx.x == 0) {
        for (std::int64_t e = 0; e < numExperts; ++e) {
            offsets[e + 1] += offsets[e];
        }
    }
}

/// One thread per expert walks the assignments in token order, so the permutation is stable and
/// deterministic; then the rows are copied in parallel.
__global__ void slotKernel(const std::int32_t* experts, std::int64_t n, std::int64_t numExperts,
    const std::int32_t* offsets, std::int64_t k, std::int32_t* sourceRow)
{
    const std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    if (e >= numExperts) {
        return;
    }
    std::int32_t next = offsets[e];
    for (std::int64_t i = 0; i < n; ++i) {
        if (experts[i] == e) {
            sourceRow[next++] = std::int32_t(i / k);
        }
    }
}

__global__ void gatherKernel(
    const float* x, const std::int32_t* sourceRow, std::int64_t dim, float* permuted)
{
    const std::int64_t row = blockIdx.x;
    const std::int64_t src = sourceRow[row];
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        permuted[row * dim + i] = x[src * dim + i];
    }
}

} // namespace

cudaError_t route(const float* logits, const float* bias, const RouterParams& p,
    std::int32_t* experts, double* weights, cudaStream_t stream)
{
    if (p.experts <= 0 || p.experts > kMaxExperts || p.topK <= 0 || p.topK > kMaxTopK
        || p.topK > p.experts || p.groups <= 0 || p.groups > kMaxGroups
        || p.experts % p.groups != 0) {
        return cudaErrorInvalidValue;
    }
    if (p.tokens == 0) {
        return cudaSuccess;
    }
    routeKernel<<<unsigned(p.tokens), 32, 0, stream>>>(logits, bias, p, experts, weights);
    return cudaGetLastError();
}

cudaError_t permuteTokens(const float* x, const std::int32_t* experts, std::int64_t tokens,
    std::int64_t k, std::int64_t dim, std::int64_t numExperts, std::int32_t* offsets,
    std::int32_t* sourceRow, float* permuted, cudaStream_t stream)
{
    const std::int64_t n = tokens * k;
    cudaError_t status
        = cudaMemsetAsync(offsets, 0, sizeof(std::int32_t) * (numExperts + 1), stream);
    if (status != cudaSuccess || n == 0) {
        return status;
    }
    countKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(experts, n, offsets);
    scanKernel<<<1, 32, 0, stream>>>(offsets, numExperts);
    slotKernel<<<unsigned((numExperts + 127) / 128), 128, 0, stream>>>(
        experts, n, numExperts, offsets, k, sourceRow);
    gatherKernel<<<unsigned(n), 256, 0, stream>>>(x, sourceRow, dim, permuted);
    return cudaGetLastError();
}

} // namespace day0::kernels
