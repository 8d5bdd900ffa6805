#include "cuda_backend.h"

#include "base/units.h"
#include "cuda_handles.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::cuda {

using exec::BackendOp;
using exec::PrecisionMode;
using kernels::Store;

std::optional<std::string> cudaUnavailableReason(int device)
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        return fmt::format("no CUDA device: cudaGetDeviceCount: {} ({})",
            cudaGetErrorString(status), cudaGetErrorName(status));
    }
    if (count == 0) {
        return std::string("no CUDA device: the driver reports no GPU");
    }
    if (device < 0 || device >= count) {
        return fmt::format(
            "no CUDA device: device {} asked for but only {} present", device, count);
    }
    return std::nullopt;
}

Store storeFor(PrecisionMode mode)
{
    switch (activationDType(mode)) {
    case DType::BF16:
        return Store::BF16;
    case DType::F16:
        return Store::F16;
    default:
        return Store::F32;
    }
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(
    int device, std::optional<std::size_t> weightCacheBytes)
{
    if (auto why = cudaUnavailableReason(device)) {
        return Error::unsupported(*why);
    }
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    b->m_device = device;
    DAY0_TRY(b->check(cudaSetDevice(device), "cudaSetDevice"));
    cudaDeviceProp props {};
    DAY0_TRY(b->check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties"));
    b->m_smMajor = props.major;
    b->m_smMinor = props.minor;
    b->m_description = fmt::format("{} (device {}, sm_{}{}, {:.1f} GiB)", props.name, device,
        props.major, props.minor, double(props.totalGlobalMem) / double(1ull << 30));
    DAY0_TRY(b->check(
        cudaStreamCreateWithFlags(&b->m_stream, cudaStreamNonBlocking), "cudaStreamCreate"));
    b->m_pool = std::make_unique<DevicePool>(
        [](std::size_t bytes) -> Result<void*> {
            void* p = nullptr;
            const cudaError_t status = cudaMalloc(&p, bytes);
            if (status != cudaSuccess) {
                return Error::unsupported(fmt::format("cudaMalloc of {} failed: {}",
                    formatBytes(Bytes(std::int64_t(bytes))), cudaGetErrorString(status)));
            }
            return p;
        },
        [](void* p) { cudaFree(p); });
    if (!weightCacheBytes) {
        std::size_t freeBytes = 0;
        std::size_t totalBytes = 0;
        DAY0_TRY(b->check(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo"));
        weightCacheBytes = freeBytes / 2; // the other half for activations and cuBLAS
    }
    DevicePool* pool = b->m_pool.get();
    b->m_weights = std::make_unique<ResidentWeights>(
        *weightCacheBytes, [pool](void* p) { (void)pool->release(p); });
    auto handles = Handles::create(b->m_stream);
    if (!handles) {
        return handles.error();
    }
    b->m_handles = std::move(*handles);
    return b;
}

CudaBackend::~CudaBackend()
{
    if (m_stream) {
        cudaSetDevice(m_device);
        cudaStreamSynchronize(m_stream);
    }
    m_handles.reset();
    m_weights.reset();
    m_pool.reset();
    if (m_stream) {
        cudaStreamDestroy(m_stream);
    }
}

bool CudaBackend::supports(BackendOp) const
{
    // Every operator of exec::BackendOp has a kernel or a cuBLAS path here.
    return true;
}

std::string CudaBackend::implementation(BackendOp op) const
{
    switch (op) {
    case BackendOp::Linear:
        return "native (cuBLAS/cuBLASLt, fp32 accumulate)";
    case BackendOp::AttentionPrefill:
    case BackendOp::AttentionDecode:
    case BackendOp::AttentionMla:
        return "native (tiled online-softmax kernel)";
    case BackendOp::RmsNormResidual:
        return "native (fused residual add + RMSNorm)";
    case BackendOp::RouterSoftmax:
    case BackendOp::RouterSigmoid:
        return "native (fp64 top-k kernel)";
    default:
        return "native (CUDA kernel)";
    }
}

void CudaBackend::releaseWeights()
{
    if (m_weights) {
        // Kernels still queued may read a copy: the blocks go back to the pool only after them.
        cudaSetDevice(m_device);
        cudaStreamSynchronize(m_stream);
        m_weights->clear();
    }
}

Result<CudaBackend::DeviceWeight> CudaBackend::weightOnDevice(
    const float* host, std::int64_t n, Store store)
{
    DeviceWeight weight;
    const ResidentWeights::Key key { host, n, int(store) };
    auto resident
        = m_weights->find(key, kernels::storeBytes(store) * std::size_t(n), [&]() -> Result<void*> {
              auto copy = upload(host, n, store);
              if (!copy) {
                  return copy.error();
              }
              return copy->take();
          });
    if (!resident) {
        return resident.error();
    }
    if (*resident != nullptr) {
        weight.p = *resident;
        return weight;
    }
    auto temporary = upload(host, n, store);
    if (!temporary) {
        return temporary.error();
    }
    weight.p = temporary->get();
    weight.temporary.emplace(std::move(*temporary));
    return weight;
}

Result<void> CudaBackend::check(cudaError_t status, const char* what) const
{
    if (status == cudaSuccess) {
        return success();
    }
    return Error::internal(fmt::format("cuda device {}: {} failed: {} ({})", m_device, what,
        cudaGetErrorString(status), cudaGetErrorName(status)));
}

Result<void> CudaBackend::synchronize(const char* what)
{
    return check(cudaStreamSynchronize(m_stream), what);
}

Result<CudaBackend::Buffer> CudaBackend::alloc(std::size_t bytes)
{
    auto p = m_pool->allocate(bytes);
    if (!p) {
        return p.error();
    }
    return Buffer(m_pool.get(), *p);
}

Result<CudaBackend::Buffer> CudaBackend::uploadBytes(const void* host, std::size_t bytes)
{
    auto buffer = alloc(bytes);
    if (!buffer) {
        return buffer.error();
    }
    if (bytes > 0) {
        DAY0_TRY(
            check(cudaMemcpyAsync(buffer->get(), host, bytes, cudaMemcpyHostToDevice, m_stream),
                "cudaMemcpyAsync (upload)"));
    }
    return std::move(*buffer);
}

Result<CudaBackend::Buffer> CudaBackend::upload(const float* host, std::int64_t n, Store store)
{
    auto staging = uploadBytes(host, sizeof(float) * std::size_t(n));
    if (!staging || store == Store::F32) {
        return staging;
    }
    auto out = alloc(kernels::storeBytes(store) * std::size_t(n));
    if (!out) {
        return out.error();
    }
    DAY0_TRY(check(kernels::convertFromFloat(staging->get<float>(), out->get(), store, n, m_stream),
        "convertFromFloat"));
    return std::move(*out);
}

Result<void> CudaBackend::download(const void* device, std::int64_t n, Store store, float* host)
{
    const auto* source = static_cast<const float*>(device);
    std::optional<Buffer> converted;
    if (store != Store::F32) {
        auto f = alloc(sizeof(float) * std::size_t(n));
        if (!f) {
            return f.error();
        }
        DAY0_TRY(check(kernels::convertToFloat(device, store, f->get<float>(), n, m_stream),
            "convertToFloat"));
        source = f->get<float>();
        converted.emplace(std::move(*f));
    }
    DAY0_TRY(check(cudaMemcpyAsync(host, source, sizeof(float) * std::size_t(n),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync (download)"));
    return synchronize("download");
}

Result<void> CudaBackend::embedding(std::span<const std::int64_t> ids, const float* table,
    std::int64_t vocab, std::int64_t dim, float* out, PrecisionMode mode)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    const Store store = storeFor(mode);
    const auto count = std::int64_t(ids.size());
    auto dIds = uploadBytes(ids.data(), ids.size_bytes());
    auto dTable = weightOnDevice(table, vocab * dim, store);
    if (!dTable) {
        return dTable.error();
    }
    auto dOut = alloc(kernels::storeBytes(store) * std::size_t(count * dim));
    auto dBad = alloc(sizeof(int));
    for (const auto* r : { &dIds, &dOut, &dBad }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(check(cudaMemsetAsync(dBad->get(), 0, sizeof(int), m_stream), "cudaMemsetAsync"));
    DAY0_TRY(check(kernels::embedding(dIds->get<std::int64_t>(), count, dTable->p, store, vocab,
                       dim, dOut->get(), dBad->get<int>(), m_stream),
        "embedding kernel"));
    int bad = 0;
    DAY0_TRY(check(cudaMemcpyAsync(&bad, dBad->get(), sizeof bad, cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(download(dOut->get(), count * dim, store, out));
    if (bad != 0) {
        return Error::badInput(
            fmt::format("embedding: token id {} at position {} is outside [0, {})",
                ids[std::size_t(bad - 1)], bad - 1, vocab));
    }
    return success();
}

Result<void> CudaBackend::rmsNorm(const float* x, const float* residual, const float* w, float* y,
    float* residualOut, std::int64_t rows, std::int64_t dim, double eps, PrecisionMode mode)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    const Store store = storeFor(mode);
    const std::int64_t n = rows * dim;
    auto dX = upload(x, n, store);
    // A weightless norm (w null) uploads nothing; the kernel multiplies by 1.
    auto dW = w != nullptr ? weightOnDevice(w, dim, store) : Result<DeviceWeight>(DeviceWeight {});
    if (!dW) {
        return dW.error();
    }
    auto dY = alloc(kernels::storeBytes(store) * std::size_t(n));
    for (const auto* r : { &dX, &dY }) {
        if (!*r) {
            return r->error();
        }
    }
    std::optional<Buffer> dRes;
    std::optional<Buffer> dResOut;
    if (residual != nullptr) {
        auto a = upload(residual, n, store);
        auto b = alloc(kernels::storeBytes(store) * std::size_t(n));
        if (!a || !b) {
            return !a ? a.error() : b.error();
        }
        dRes.emplace(std::move(*a));
        dResOut.emplace(std::move(*b));
    }
    DAY0_TRY(check(kernels::rmsNorm(dX->get(), dRes ? dRes->get() : nullptr, dW->p, dY->get(),
                       dResOut ? dResOut->get() : nullptr, store, rows, dim, float(eps), m_stream),
        "rmsNorm kernel"));
    if (dResOut && residualOut != nullptr) {
        DAY0_TRY(download(dResOut->get(), n, store, residualOut));
    }
    return download(dY->get(), n, store, y);
}

Result<void> CudaBackend::rope(float* x, std::int64_t tokens, std::int64_t heads,
    std::int64_t headDim, std::span<const std::int64_t> positions, const exec::Rope& table,
    std::span<const std::int64_t> positions3, PrecisionMode mode)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    if (std::int64_t(positions.size()) < tokens) {
        return Error::badInput(
            fmt::format("rope: {} positions for {} tokens", positions.size(), tokens));
    }
    const Store store = storeFor(mode);
    const std::int64_t n = tokens * heads * headDim;
    auto dX = upload(x, n, store);
    auto dFreq = uploadBytes(table.invFreq.data(), table.invFreq.size() * sizeof(double));
    auto dPos = uploadBytes(positions.data(), std::size_t(tokens) * sizeof(std::int64_t));
    for (const auto* r : { &dX, &dFreq, &dPos }) {
        if (!*r) {
            return r->error();
        }
    }
    kernels::RopeParams p;
    p.tokens = tokens;
    p.heads = heads;
    p.headDim = headDim;
    p.pairs = table.rotaryDim / 2;
    p.interleaved = table.layout == exec::RopeLayout::Interleaved;
    p.scaling = table.attentionScaling;
    p.invFreq = dFreq->get<double>();
    p.positions = dPos->get<std::int64_t>();
    std::optional<Buffer> dComp;
    std::optional<Buffer> dPos3;
    const bool multi = !table.pairComponent.empty() && positions3.size() == std::size_t(3 * tokens);
    if (multi) {
        auto a = uploadBytes(table.pairComponent.data(), table.pairComponent.size() * sizeof(int));
        auto b = uploadBytes(positions3.data(), positions3.size_bytes());
        if (!a || !b) {
            return !a ? a.error() : b.error();
        }
        dComp.emplace(std::move(*a));
        dPos3.emplace(std::move(*b));
        p.pairComponent = dComp->get<int>();
        p.positions3 = dPos3->get<std::int64_t>();
    }
    DAY0_TRY(check(kernels::rope(dX->get(), store, p, m_stream), "rope kernel"));
    return download(dX->get(), n, store, x);
}

Result<void> CudaBackend::attention(const float* q, const float* k, const float* v, float* out,
    const exec::AttentionShape& shape, PrecisionMode mode)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    if (shape.headDim > kernels::kMaxAttentionDim || shape.valueDim > kernels::kMaxAttentionDim) {
        return Error::unsupported(
            fmt::format("cuda attention: head widths {}/{} exceed the kernel's {}", shape.headDim,
                shape.valueDim, kernels::kMaxAttentionDim));
    }
    if (shape.chunk > 0) {
        return Error::unsupported(fmt::format(
            "cuda attention: chunked attention (chunk {}) is not in the kernel", shape.chunk));
    }
    if (!shape.sinks.empty()) {
        return Error::unsupported("cuda attention: attention sinks are not in the kernel");
    }
    if (!shape.selectedKeys.empty()) {
        return Error::unsupported(
            "cuda attention: the per-query key selection (DSA top-k keys, MiniMax-M3 MSA "
            "blocks) is not in the kernel");
    }
    kernels::AttentionParams p;
    p.queries = shape.queries;
    p.keys = shape.keys;
    p.heads = shape.heads;
    p.kvHeads = shape.kvHeads;
    p.headDim = shape.headDim;
    p.valueDim = shape.valueDim;
    p.qStride = shape.qStride > 0 ? shape.qStride : shape.heads * shape.headDim;
    p.kStride = shape.kStride > 0 ? shape.kStride : shape.kvHeads * shape.headDim;
    p.vStride = shape.vStride > 0 ? shape.vStride : shape.kvHeads * shape.valueDim;
    p.scale = float(shape.scale);
    p.causal = shape.causal;
    p.window = shape.window;
    if (p.kvHeads <= 0 || p.heads % p.kvHeads != 0 || p.queries > p.keys) {
        return Error::badInput(fmt::format("cuda attention: {} heads over {} kv heads, {} queries "
                                           "over {} keys is not a valid shape",
            p.heads, p.kvHeads, p.queries, p.keys));
    }
    const Store store = storeFor(mode);
    const auto extent = [](std::int64_t rows, std::int64_t stride, std::int64_t width) {
        return rows == 0 ? 0 : (rows - 1) * stride + width;
    };
    auto dQ = upload(q, extent(p.queries, p.qStride, p.heads * p.headDim), store);
    auto dK = upload(k, extent(p.keys, p.kStride, p.kvHeads * p.headDim), store);
    auto dV = upload(v, extent(p.keys, p.vStride, p.kvHeads * p.valueDim), store);
    const std::int64_t n = p.queries * p.heads * p.valueDim;
    auto dO = alloc(kernels::storeBytes(store) * std::size_t(n));
    for (const auto* r : { &dQ, &dK, &dV, &dO }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(
        check(kernels::attention(dQ->get(), dK->get(), dV->get(), dO->get(), store, p, m_stream),
            "attention kernel"));
    return download(dO->get(), n, store, out);
}

Result<void> CudaBackend::gatedActivation(
    float* gate, const float* up, std::int64_t n, exec::Activation act, PrecisionMode mode)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    const Store store = storeFor(mode);
    auto dG = upload(gate, n, store);
    auto dU = upload(up, n, store);
    if (!dG || !dU) {
        return !dG ? dG.error() : dU.error();
    }
    DAY0_TRY(check(kernels::gatedActivation(dG->get(), dU->get(), store, n, int(act), m_stream),
        "gated activation kernel"));
    return download(dG->get(), n, store, gate);
}

Result<exec::Routing> CudaBackend::route(
    const float* logits, std::int64_t tokens, const exec::RouterConfig& config, const float* bias)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    kernels::RouterParams p;
    p.tokens = tokens;
    p.experts = config.numExperts;
    p.topK = config.topK;
    p.sigmoid = config.scoring == model::RouterScoring::Sigmoid;
    p.normTopk = config.normTopkProb;
    p.scaling = config.routedScalingFactor;
    p.groups = config.numGroups;
    p.topkGroup = config.topkGroup;
    if (p.experts > kernels::kMaxExperts || p.topK > kernels::kMaxTopK
        || p.groups > kernels::kMaxGroups) {
        return Error::unsupported(fmt::format("cuda router: {} experts / top-{} / {} groups exceed "
                                              "the kernel's {} / {} / {}",
            p.experts, p.topK, p.groups, kernels::kMaxExperts, kernels::kMaxTopK,
            kernels::kMaxGroups));
    }
    auto dL = uploadBytes(logits, sizeof(float) * std::size_t(tokens * p.experts));
    auto dB = uploadBytes(bias, bias ? sizeof(float) * std::size_t(p.experts) : 0);
    auto dE = alloc(sizeof(std::int32_t) * std::size_t(tokens * p.topK));
    auto dW = alloc(sizeof(double) * std::size_t(tokens * p.topK));
    for (const auto* r : { &dL, &dB, &dE, &dW }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(check(kernels::route(dL->get<float>(), bias ? dB->get<float>() : nullptr, p,
                       dE->get<std::int32_t>(), dW->get<double>(), m_stream),
        "router kernel"));
    std::vector<std::int32_t> experts(static_cast<std::size_t>(tokens * p.topK));
    exec::Routing r;
    r.tokens = tokens;
    r.k = p.topK;
    r.weights.resize(experts.size());
    DAY0_TRY(check(cudaMemcpyAsync(experts.data(), dE->get(), experts.size() * sizeof(std::int32_t),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(check(cudaMemcpyAsync(r.weights.data(), dW->get(), r.weights.size() * sizeof(double),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(synchronize("router"));
    r.experts.assign(experts.begin(), experts.end());
    return r;
}

Result<void> CudaBackend::permuteTokens(const float* x, std::int64_t tokens, std::int64_t dim,
    const exec::Routing& routing, std::int64_t numExperts, float* permuted,
    std::vector<std::int64_t>& offsets, std::vector<std::int64_t>& sourceRow)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    std::vector<std::int32_t> experts(routing.experts.size());
    for (std::size_t i = 0; i < experts.size(); ++i) {
        const auto e = routing.experts[i];
        if (e < 0 || e >= numExperts) {
            return Error::badInput(
                fmt::format("permuteTokens: expert {} is outside [0, {})", e, numExperts));
        }
        experts[i] = std::int32_t(e);
    }
    const std::int64_t n = tokens * routing.k;
    auto dX = uploadBytes(x, sizeof(float) * std::size_t(tokens * dim));
    auto dE = uploadBytes(experts.data(), experts.size() * sizeof(std::int32_t));
    auto dOff = alloc(sizeof(std::int32_t) * std::size_t(numExperts + 1));
    auto dSrc = alloc(sizeof(std::int32_t) * std::size_t(n));
    auto dP = alloc(sizeof(float) * std::size_t(n * dim));
    for (const auto* r : { &dX, &dE, &dOff, &dSrc, &dP }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(check(kernels::permuteTokens(dX->get<float>(), dE->get<std::int32_t>(), tokens,
                       routing.k, dim, numExperts, dOff->get<std::int32_t>(),
                       dSrc->get<std::int32_t>(), dP->get<float>(), m_stream),
        "permute kernels"));
    std::vector<std::int32_t> off(static_cast<std::size_t>(numExperts + 1));
    std::vector<std::int32_t> src(static_cast<std::size_t>(n));
    DAY0_TRY(check(cudaMemcpyAsync(off.data(), dOff->get(), off.size() * sizeof(std::int32_t),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(check(cudaMemcpyAsync(src.data(), dSrc->get(), src.size() * sizeof(std::int32_t),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(check(cudaMemcpyAsync(permuted, dP->get(), sizeof(float) * std::size_t(n * dim),
                       cudaMemcpyDeviceToHost, m_stream),
        "cudaMemcpyAsync"));
    DAY0_TRY(synchronize("permute"));
    offsets.assign(off.begin(), off.end());
    sourceRow.assign(src.begin(), src.end());
    return success();
}

Result<void> CudaBackend::dequantFp8Block(const std::uint8_t* bytes, const float* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t block, float* out)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    if (block <= 0) {
        return Error::badInput("dequantFp8Block: block size must be positive");
    }
    const std::int64_t scaleCount = ((rows + block - 1) / block) * ((cols + block - 1) / block);
    auto dB = uploadBytes(bytes, std::size_t(rows * cols));
    auto dS = uploadBytes(scales, sizeof(float) * std::size_t(scaleCount));
    auto dO = alloc(sizeof(float) * std::size_t(rows * cols));
    for (const auto* r : { &dB, &dS, &dO }) {
        if (!*r) {
            return r->error();
        }
    }
    DAY0_TRY(check(kernels::dequantFp8Block(dB->get<std::uint8_t>(), dS->get<float>(), rows, cols,
                       block, dO->get<float>(), m_stream),
        "fp8 dequant kernel"));
    return download(dO->get(), rows * cols, Store::F32, out);
}

Result<DeviceTap> CudaBackend::tap(const std::string& capture, const void* data, Store store,
    std::int64_t count, const TapSelection& selection)
{
    DAY0_TRY(check(cudaSetDevice(m_device), "cudaSetDevice"));
    auto dPartials = alloc(sizeof(kernels::TapPartial) * kernels::kTapBlocks);
    if (!dPartials) {
        return dPartials.error();
    }
    DAY0_TRY(check(
        kernels::tapStatistics(data, store, count, dPartials->get<kernels::TapPartial>(), m_stream),
        "tap statistics kernel"));
    std::vector<kernels::TapPartial> partials(kernels::kTapBlocks);
    DAY0_TRY(
        check(cudaMemcpyAsync(partials.data(), dPartials->get(),
                  partials.size() * sizeof(kernels::TapPartial), cudaMemcpyDeviceToHost, m_stream),
            "cudaMemcpyAsync"));
    DAY0_TRY(synchronize("tap"));
    std::vector<TapBlock> blocks(partials.size());
    for (std::size_t i = 0; i < partials.size(); ++i) {
        blocks[i] = { partials[i].sum, partials[i].sumSquares, partials[i].min, partials[i].max,
            partials[i].finite, partials[i].nan, partials[i].inf };
    }
    DeviceTap out;
    out.stats = combineTapBlocks(blocks, count);
    if (selection.copiesFull(capture)) {
        std::vector<float> values(static_cast<std::size_t>(count));
        DAY0_TRY(download(data, count, store, values.data()));
        out.values = std::move(values);
    }
    return out;
}

} // namespace day0::cuda
