#include "checkpoint/convert_quant.h"

#include "base/file_util.h"
#include "checkpoint/block_fp8.h"
#include "checkpoint/dequantize.h"
#include "numerics/dtype_convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace day0::checkpoint::detail {

namespace {

using model::QuantScheme;

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Rows of a 4-bit or INT4 matrix decoded per chunk: enough work to amortise a task.
constexpr std::size_t kRowGrain = 16;

struct Bytes {
    std::span<const std::byte> codes;
    std::span<const std::byte> scale;
    DType scaleType = DType::F32;
    float global = 1.0f;
};

Result<Bytes> loadBytes(const Checkpoint& ckpt, const GroupTensors& t)
{
    Bytes b;
    auto codes = ckpt.data(*t.codes);
    if (!codes) {
        return codes.error();
    }
    auto scale = ckpt.data(*t.scale);
    if (!scale) {
        return scale.error();
    }
    b.codes = *codes;
    b.scale = *scale;
    b.scaleType = *t.scale->dtype;
    if (t.globalScale != nullptr) {
        auto global = ckpt.data(*t.globalScale);
        if (!global) {
            return global.error();
        }
        std::memcpy(&b.global, global->data(), sizeof(float)); // F32 [] (checked by matchGroup)
    }
    return b;
}

/// A source that decodes `rows` rows in parallel chunks of `grain`: decode(r0, n, out) fills
/// rows [r0, r0 + n) of the output, `out` being exactly their bytes.
TensorSource rowwise(const QuantGroup& g, DType to, std::int64_t rows, std::size_t grain,
    ThreadPool* pool,
    std::function<Result<void>(std::int64_t, std::int64_t, std::span<std::byte>)> decode)
{
    const auto rowBytes = std::size_t(g.cols * dtypeSize(to));
    return { g.output->name, to, g.output->shape,
        [=, decode = std::move(decode)](std::span<std::byte> out) -> Result<void> {
            return parallelChunks(
                pool, std::size_t(rows), grain, [&](std::size_t b, std::size_t e) -> Result<void> {
                    return decode(std::int64_t(b), std::int64_t(e - b),
                        out.subspan(b * rowBytes, (e - b) * rowBytes));
                });
        } };
}

/// gpt-oss fused experts: each [rows, cols] matrix of MX codes is written transposed, so that
/// the output is [E, cols, rows] as the BF16 checkpoints store gate_up_proj / down_proj.
TensorSource transposedMx(const QuantGroup& g, const Bytes& b, DType to, ThreadPool* pool)
{
    const std::int64_t rows = g.rows;
    const std::int64_t cols = g.cols;
    const auto rowCodes = std::size_t(cols / 2);
    const auto rowScales = std::size_t(cols / 32);
    const auto size = std::size_t(dtypeSize(to));
    const auto bands = std::size_t(ceilDiv(rows, std::int64_t(kRowGrain)));
    return { g.output->name, to, g.output->shape, [=](std::span<std::byte> out) -> Result<void> {
                return parallelChunks(pool, std::size_t(g.experts) * bands, 1,
                    [&](std::size_t c0, std::size_t c1) -> Result<void> {
                        std::vector<float> band;
                        std::vector<float> column;
                        for (std::size_t c = c0; c < c1; ++c) {
                            const auto e = std::int64_t(c / bands);
                            const auto r0 = std::int64_t((c % bands) * kRowGrain);
                            const std::int64_t n = std::min<std::int64_t>(kRowGrain, rows - r0);
                            const auto first = std::size_t(e * rows + r0);
                            band.resize(std::size_t(n * cols));
                            DAY0_TRY(dequantizeFp4(
                                b.codes.subspan(first * rowCodes, std::size_t(n) * rowCodes),
                                b.scale.subspan(first * rowScales, std::size_t(n) * rowScales),
                                Fp4Scale::E8M0, 1.0f, n, cols, 32,
                                std::as_writable_bytes(std::span(band)), DType::F32));
                            column.resize(std::size_t(n));
                            for (std::int64_t k = 0; k < cols; ++k) {
                                for (std::int64_t r = 0; r < n; ++r) {
                                    column[std::size_t(r)] = band[std::size_t(r * cols + k)];
                                }
                                const auto at = std::size_t((e * cols + k) * rows + r0) * size;
                                DAY0_TRY(numerics::convertElements(std::as_bytes(std::span(column)),
                                    DType::F32, out.subspan(at, std::size_t(n) * size), to,
                                    std::size_t(n)));
                            }
                        }
                        return success();
                    });
            } };
}

} // namespace

Result<void> parallelChunks(ThreadPool* pool, std::size_t count, std::size_t grain,
    const std::function<Result<void>(std::size_t, std::size_t)>& fn)
{
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t chunks = (count + grain - 1) / grain;
    if (pool == nullptr || chunks <= 1) {
        return count == 0 ? success() : fn(0, count);
    }
    std::mutex mutex;
    std::optional<Error> failure;
    pool->parallelFor(chunks, [&](std::size_t c) {
        auto r = fn(c * grain, std::min(count, (c + 1) * grain));
        if (!r) {
            std::lock_guard lock(mutex);
            if (!failure) {
                failure = r.error();
            }
        }
    });
    if (failure) {
        return *failure;
    }
    return success();
}

Result<TensorSource> dequantizedSource(const Checkpoint& ckpt, const QuantGroup& g,
    const GroupTensors& tensors, DType to, ThreadPool* pool)
{
    auto loaded = loadBytes(ckpt, tensors);
    if (!loaded) {
        return loaded.error();
    }
    const Bytes b = *loaded;
    const std::int64_t cols = g.cols;
    switch (g.scheme) {
    case QuantScheme::BlockFp8:
    case QuantScheme::Fp8PerTensor: {
        if (*tensors.codes->dtype != DType::F8E4M3) {
            return Error::unsupported(fmt::format("{}: tensor '{}' is {}; dequantising FP8 "
                                                  "weights other than F8_E4M3 is not supported",
                displayPath(ckpt.root() / tensors.codes->file), tensors.codes->name,
                tensors.codes->dtypeName));
        }
        const bool perTensor = g.scheme == QuantScheme::Fp8PerTensor;
        const std::int64_t br = g.blockRows;
        const auto scaleSize = std::size_t(dtypeSize(b.scaleType));
        const auto scaleRow = std::size_t(ceilDiv(cols, g.group)) * scaleSize;
        // Bands of block rows are independent (one scale row each); a per-tensor scale is
        // one block per band of rows.
        const std::size_t grain = perTensor ? kRowGrain : std::size_t(br);
        return rowwise(g, to, g.rows, grain, pool,
            [=](std::int64_t r0, std::int64_t n, std::span<std::byte> out) -> Result<void> {
                const auto codes = b.codes.subspan(std::size_t(r0 * cols), std::size_t(n * cols));
                if (perTensor) {
                    return dequantizeBlockFp8(codes, b.scale, b.scaleType, n, cols,
                        { std::max<std::int64_t>(n, 1), std::max<std::int64_t>(cols, 1) }, out, to);
                }
                const auto scales = b.scale.subspan(
                    std::size_t(r0 / br) * scaleRow, std::size_t(ceilDiv(n, br)) * scaleRow);
                return dequantizeBlockFp8(
                    codes, scales, b.scaleType, n, cols, { br, g.group }, out, to);
            });
    }
    case QuantScheme::Nvfp4:
    case QuantScheme::PackedMxfp4:
    case QuantScheme::Fp4Block: {
        const auto rowCodes = std::size_t(ceilDiv(cols, 2));
        const auto rowScales = std::size_t(ceilDiv(cols, g.group));
        const Fp4Scale kind = g.scheme == QuantScheme::Nvfp4 ? Fp4Scale::E4M3 : Fp4Scale::E8M0;
        const std::int64_t group = g.group;
        return rowwise(g, to, g.rows, kRowGrain, pool,
            [=](std::int64_t r0, std::int64_t n, std::span<std::byte> out) {
                return dequantizeFp4(
                    b.codes.subspan(std::size_t(r0) * rowCodes, std::size_t(n) * rowCodes),
                    b.scale.subspan(std::size_t(r0) * rowScales, std::size_t(n) * rowScales), kind,
                    b.global, n, cols, group, out, to);
            });
    }
    case QuantScheme::PackedInt: {
        const auto rowWords = std::size_t(ceilDiv(cols, 8)) * 4;
        const auto rowScales
            = std::size_t(ceilDiv(cols, g.group)) * std::size_t(dtypeSize(b.scaleType));
        const std::int64_t group = g.group;
        return rowwise(g, to, g.rows, kRowGrain, pool,
            [=](std::int64_t r0, std::int64_t n, std::span<std::byte> out) {
                return dequantizePackedInt4(
                    b.codes.subspan(std::size_t(r0) * rowWords, std::size_t(n) * rowWords),
                    b.scale.subspan(std::size_t(r0) * rowScales, std::size_t(n) * rowScales),
                    b.scaleType, n, cols, group, out, to);
            });
    }
    case QuantScheme::Mxfp4:
        return transposedMx(g, b, to, pool);
    }
    return Error::internal(fmt::format("convert: no dequantisation for '{}'", g.module));
}

} // namespace day0::checkpoint::detail
