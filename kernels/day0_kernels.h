#pragma once

// Host-callable launchers of the CUDA kernels used by plugins/cuda. Every launcher enqueues on
// `stream` and returns the launch status; device pointers throughout. Activations are stored as
// float, bf16 or fp16 (`Store`) and computed in fp32 (the router in fp64), as the HF/PyTorch
// kernels of those dtypes do.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace day0::kernels {

/// Storage format of activations on the device.
enum class Store { F32, BF16, F16 };

/// Bytes per element of a store.
inline std::size_t storeBytes(Store s) { return s == Store::F32 ? 4 : 2; }

/// out[n] (store) <- in[n] (float), rounded to nearest even.
cudaError_t convertFromFloat(
    const float* in, void* out, Store store, std::int64_t n, cudaStream_t stream);
/// out[n] (float) <- in[n] (store), exact.
cudaError_t convertToFloat(
    const void* in, Store store, float* out, std::int64_t n, cudaStream_t stream);
/// out[n] <- fp8(in[n] / scale), e4m3 (saturating to ±448) or e5m2, rounded to nearest even.
cudaError_t quantizeFp8(const float* in, std::uint8_t* out, std::int64_t n, float scale, bool e5m2,
    cudaStream_t stream);
/// out[rows, cols] = e4m3(bytes) · scales[r / block, c / block] (DeepSeek-V3 weight_scale_inv).
cudaError_t dequantFp8Block(const std::uint8_t* bytes, const float* scales, std::int64_t rows,
    std::int64_t cols, std::int64_t block, float* out, cudaStream_t stream);

/// out[i, :] = table[ids[i], :]; an id outside [0, vocab) writes zeros and its position + 1 into
/// `*badIndex` (which the caller zeroes).
cudaError_t embedding(const std::int64_t* ids, std::int64_t count, const void* table, Store store,
    std::int64_t vocab, std::int64_t dim, void* out, int* badIndex, cudaStream_t stream);

/// y = round(round(s / rms(s)) · w) with s = round(x + residual) when residual is given (then
/// also stored into residualOut); in F32 y = s / rms(s) · w. One block per row.
cudaError_t rmsNorm(const void* x, const void* residual, const void* w, void* y, void* residualOut,
    Store store, std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream);

/// gate <- round(round(act(gate)) · up); act: 0 silu, 1 gelu (erf), 2 gelu tanh, 3 quick gelu,
/// 4 relu (exec::Activation order).
cudaError_t gatedActivation(
    void* gate, const void* up, Store store, std::int64_t n, int act, cudaStream_t stream);

/// Rotary embedding of x[tokens, heads, headDim] in place; angles in fp64 as the reference.
struct RopeParams {
    std::int64_t tokens = 0;
    std::int64_t heads = 0;
    std::int64_t headDim = 0;
    std::int64_t pairs = 0; ///< rotaryDim / 2
    bool interleaved = false; ///< pairs (2i, 2i+1) instead of (i, i + pairs)
    double scaling = 1.0; ///< YaRN attention scaling of cos and sin
    const double* invFreq = nullptr; ///< [pairs]
    const std::int64_t* positions = nullptr; ///< [tokens]
    const int* pairComponent = nullptr; ///< M-RoPE: [pairs] rows of positions3, else null
    const std::int64_t* positions3 = nullptr; ///< M-RoPE: [3, tokens]
};
cudaError_t rope(void* x, Store store, const RopeParams& p, cudaStream_t stream);

/// Causal attention with GQA/MQA, sliding window and different q/k and v widths (MLA), tiled
/// over keys with an online softmax (flash-style): scores and the running sums in fp32, the
/// probabilities rounded to the store before the P·V product as FlashAttention does.
struct AttentionParams {
    std::int64_t queries = 0;
    std::int64_t keys = 0;
    std::int64_t heads = 0;
    std::int64_t kvHeads = 0;
    std::int64_t headDim = 0;
    std::int64_t valueDim = 0;
    std::int64_t qStride = 0;
    std::int64_t kStride = 0;
    std::int64_t vStride = 0;
    float scale = 1.0f;
    bool causal = true;
    std::int64_t window = 0;
};
/// Largest q/k and v width the attention kernel takes.
inline constexpr std::int64_t kMaxAttentionDim = 1024;
cudaError_t attention(const void* q, const void* k, const void* v, void* out, Store store,
    const AttentionParams& p, cudaStream_t stream);

/// Top-k routing, in fp64 from fp32 logits (exec::route semantics, ties to the lower index).
/// Group-limited routing takes at most kMaxGroups groups.
struct RouterParams {
    std::int64_t tokens = 0;
    std::int64_t experts = 0;
    std::int64_t topK = 0;
    bool sigmoid = false;
    bool normTopk = false;
    double scaling = 1.0;
    std::int64_t groups = 1;
    std::int64_t topkGroup = 1;
};
/// Largest expert count and top-k of the router kernel.
inline constexpr std::int64_t kMaxExperts = 1024;
inline constexpr std::int64_t kMaxTopK = 32;
inline constexpr std::int64_t kMaxGroups = 64;
cudaError_t route(const float* logits, const float* bias, const RouterParams& p,
    std::int32_t* experts, double* weights, cudaStream_t stream);

/// Groups x[tokens, dim] rows by expert: offsets[numExperts + 1] (zeroed by the launcher),
/// sourceRow[tokens·k] and permuted[tokens·k, dim]; token order inside an expert is kept.
cudaError_t permuteTokens(const float* x, const std::int32_t* experts, std::int64_t tokens,
    std::int64_t k, std::int64_t dim, std::int64_t numExperts, std::int32_t* offsets,
    std::int32_t* sourceRow, float* permuted, cudaStream_t stream);

/// Partial statistics of one block of a tap.
struct TapPartial {
    double sum = 0.0;
    double sumSquares = 0.0;
    float min = 0.0f;
    float max = 0.0f;
    unsigned long long finite = 0;
    unsigned long long nan = 0;
    unsigned long long inf = 0;
};
/// Blocks the tap statistics use: `partials` holds this many entries.
inline constexpr int kTapBlocks = 128;
cudaError_t tapStatistics(
    const void* x, Store store, std::int64_t n, TapPartial* partials, cudaStream_t stream);

} // namespace day0::kernels
