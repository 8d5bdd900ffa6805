#include "checkpoint/convert.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/thread_pool.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/dtype_convert.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kScaleSuffix = "_scale_inv"; // "X.weight" → "X.weight_scale_inv"

/// Runs fn(begin, end) over [0, count) in chunks of `grain` on the pool (and the caller).
Result<void> parallelChunks(ThreadPool* pool, std::size_t count, std::size_t grain,
    const std::function<Result<void>(std::size_t, std::size_t)>& fn)
{
    const std::size_t chunks = (count + grain - 1) / std::max<std::size_t>(grain, 1);
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

std::string torchDtypeName(DType t)
{
    switch (t) {
    case DType::F32:
        return "float32";
    case DType::F16:
        return "float16";
    default:
        return "bfloat16";
    }
}

/// Block shape from config.json's quantization_config.weight_block_size, else 128 × 128.
BlockShape blockFromConfig(const nlohmann::ordered_json& config, BlockShape fallback)
{
    const auto q = config.find("quantization_config");
    if (q != config.end() && q->is_object()) {
        const auto b = q->find("weight_block_size");
        if (b != q->end() && b->is_array() && b->size() == 2 && (*b)[0].is_number_integer()
            && (*b)[1].is_number_integer() && (*b)[0].get<std::int64_t>() > 0
            && (*b)[1].get<std::int64_t>() > 0) {
            return { (*b)[0].get<std::int64_t>(), (*b)[1].get<std::int64_t>() };
        }
    }
    return fallback;
}

struct Plan {
    std::vector<TensorSource> sources;
    ConvertSummary summary;
};

/// The sources of one source tensor (or weight + scale pair) for the requested conversion.
Result<void> planTensor(const Checkpoint& ckpt, const CheckpointTensor& t,
    const ConvertOptions& opt, BlockShape block, ThreadPool* pool, Plan& plan)
{
    const auto where = displayPath(ckpt.root() / t.file);
    if (!t.dtype) {
        return Error::unsupported(
            fmt::format("{}: tensor '{}' has type {}", where, t.name, t.dtypeName));
    }
    auto data = ckpt.data(t);
    if (!data) {
        return data.error();
    }
    const std::span<const std::byte> bytes = *data;
    const DType from = *t.dtype;
    const auto count = std::size_t(t.bytes / std::uint64_t(dtypeSize(from)));
    const bool toFp8 = opt.dtype == DType::F8E4M3;

    if (t.name.ends_with(kScaleSuffix)
        && ckpt.find(t.name.substr(0, t.name.size() - kScaleSuffix.size())) != nullptr) {
        // A block scale: travels with its weight (handled there).
        return success();
    }
    const CheckpointTensor* scale = ckpt.find(t.name + std::string(kScaleSuffix));
    if (from == DType::F8E4M3 && scale != nullptr) {
        if (toFp8) { // already block FP8: copy weight and scale unchanged
            plan.sources.push_back(tensorFromBytes(t.name, from, t.shape, bytes));
            auto s = ckpt.data(*scale);
            if (!s || !scale->dtype) {
                return s ? Error::badInput(fmt::format("{}: bad scale '{}'", where, scale->name))
                         : s.error();
            }
            plan.sources.push_back(tensorFromBytes(scale->name, *scale->dtype, scale->shape, *s));
            plan.summary.copied += 2;
            return success();
        }
        if (t.shape.size() != 2 || !scale->dtype
            || scale->shape != blockScaleShape(t.shape[0], t.shape[1], block)) {
            return Error::badInput(fmt::format(
                "{}: tensor '{}': scale '{}' has shape {} but a {} weight in {}x{} "
                "blocks needs {}",
                where, t.name, scale->name, formatShape(scale->shape), formatShape(t.shape),
                block.rows, block.cols,
                t.shape.size() == 2 ? formatShape(blockScaleShape(t.shape[0], t.shape[1], block))
                                    : "a 2-D weight"));
        }
        auto s = ckpt.data(*scale);
        if (!s) {
            return s.error();
        }
        const std::span<const std::byte> scaleBytes = *s;
        const DType scaleType = *scale->dtype;
        const std::int64_t rows = t.shape[0];
        const std::int64_t cols = t.shape[1];
        const DType to = opt.dtype;
        plan.sources.push_back(
            { t.name, to, t.shape, [=](std::span<std::byte> out) -> Result<void> {
                 // Bands of block rows are independent: one scale row each.
                 const auto bands = std::size_t((rows + block.rows - 1) / block.rows);
                 const auto scaleRow = std::size_t((cols + block.cols - 1) / block.cols)
                     * std::size_t(dtypeSize(scaleType));
                 return parallelChunks(
                     pool, bands, 1, [&](std::size_t b0, std::size_t b1) -> Result<void> {
                         for (std::size_t b = b0; b < b1; ++b) {
                             const std::int64_t r0 = std::int64_t(b) * block.rows;
                             const std::int64_t n = std::min(block.rows, rows - r0);
                             DAY0_TRY(dequantizeBlockFp8(
                                 bytes.subspan(std::size_t(r0 * cols), std::size_t(n * cols)),
                                 scaleBytes.subspan(b * scaleRow, scaleRow), scaleType, n, cols,
                                 block,
                                 out.subspan(std::size_t(r0 * cols * dtypeSize(to)),
                                     std::size_t(n * cols * dtypeSize(to))),
                                 to));
                         }
                         return success();
                     });
             } });
        ++plan.summary.dequantized;
        return success();
    }

    if (toFp8 && !opt.onlyFp8 && isFloat(from) && from != DType::F8E4M3 && from != DType::F8E5M2
        && from != DType::F64 && isBlockFp8Candidate(t.name, t.shape)) {
        const std::int64_t rows = t.shape[0];
        const std::int64_t cols = t.shape[1];
        const auto scaleShape = blockScaleShape(rows, cols, block);
        // Weight and scale are filled separately (they may land in different shards), so each
        // fill quantises; the unused half goes to a scratch buffer.
        const auto quantize = [=](std::span<std::byte> codes, std::span<std::byte> scales) {
            return quantizeBlockFp8(bytes, from, rows, cols, block, codes, scales);
        };
        plan.sources.push_back(
            { t.name, DType::F8E4M3, t.shape, [=](std::span<std::byte> out) -> Result<void> {
                 std::vector<std::byte> scratch(std::size_t(scaleShape[0] * scaleShape[1] * 4));
                 return quantize(out, scratch);
             } });
        plan.sources.push_back({ t.name + std::string(kScaleSuffix), DType::F32, scaleShape,
            [=](std::span<std::byte> out) -> Result<void> {
                std::vector<std::byte> scratch(std::size_t(rows * cols));
                return quantize(scratch, out);
            } });
        ++plan.summary.quantized;
        return success();
    }

    const bool change = isFloat(from) && !toFp8 && !opt.onlyFp8 && from != opt.dtype;
    if (!change) {
        plan.sources.push_back(tensorFromBytes(t.name, from, t.shape, bytes));
        ++plan.summary.copied;
        return success();
    }
    const DType to = opt.dtype;
    plan.sources.push_back({ t.name, to, t.shape, [=](std::span<std::byte> out) -> Result<void> {
                                const auto fs = std::size_t(dtypeSize(from));
                                const auto ts = std::size_t(dtypeSize(to));
                                return parallelChunks(pool, count, std::size_t(1) << 20,
                                    [&](std::size_t b, std::size_t e) {
                                        return convertElements(bytes.subspan(b * fs, (e - b) * fs),
                                            from, out.subspan(b * ts, (e - b) * ts), to, e - b);
                                    });
                            } });
    ++plan.summary.converted;
    return success();
}

} // namespace

bool isBlockFp8Candidate(const std::string& name, const std::vector<std::int64_t>& shape)
{
    if (shape.size() != 2 || !name.ends_with(".weight") || name.find("layers.") == std::string::npos
        || name.find("visual") != std::string::npos || name.find("vision") != std::string::npos) {
        return false;
    }
    const auto module = name.substr(0, name.size() - 7);
    for (const auto* suffix : { "_proj", "_proj_with_mqa", ".w1", ".w2", ".w3", ".eh_proj" }) {
        if (module.ends_with(suffix)) {
            return true;
        }
    }
    return false;
}

Result<ConvertSummary> convertCheckpoint(const fs::path& src, const fs::path& dst,
    const ConvertOptions& options, Progress& progress, std::stop_token stop)
{
    if (options.dtype != DType::F32 && options.dtype != DType::BF16 && options.dtype != DType::F16
        && options.dtype != DType::F8E4M3) {
        return Error::unsupported(
            fmt::format("convert: target dtype {} is not supported (F32, BF16, F16, F8_E4M3)",
                dtypeName(options.dtype)));
    }
    auto ckpt = Checkpoint::open(src);
    if (!ckpt) {
        return ckpt.error();
    }
    if (ckpt->format() == CheckpointFormat::Gguf) {
        return Error::unsupported(
            fmt::format("{}: converting GGUF files is not supported", displayPath(src)));
    }
    DAY0_TRY(ckpt->firstError());

    const bool folder = fs::is_directory(src);
    nlohmann::ordered_json config;
    const auto configPath = ckpt->root() / "config.json";
    const bool hasConfig = folder && fs::exists(configPath);
    if (hasConfig) {
        auto text = readFile(configPath);
        if (!text) {
            return text.error();
        }
        try {
            config = nlohmann::ordered_json::parse(*text);
        } catch (const nlohmann::json::exception& e) {
            return Error::badInput(
                fmt::format("{}: invalid JSON: {}", displayPath(configPath), e.what()));
        }
    }
    const BlockShape block = blockFromConfig(config, options.block);

    auto out = OutputDir::create(dst, options.replace);
    if (!out) {
        return out.error();
    }
    const auto hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t threads = options.threads > 0 ? std::size_t(options.threads) : hw;
    std::optional<ThreadPool> pool;
    if (threads > 1) {
        pool.emplace(threads - 1);
    }
    Plan plan;
    for (const auto& t : ckpt->tensors()) {
        DAY0_TRY(planTensor(*ckpt, t, options, block, pool ? &*pool : nullptr, plan));
        plan.summary.bytesIn += t.bytes;
    }
    plan.summary.tensorsIn = ckpt->tensors().size();
    plan.summary.tensorsOut = plan.sources.size();
    std::int64_t total = 0;
    for (const auto& s : plan.sources) {
        total += std::int64_t(s.bytes());
    }
    progress.setDone(0);
    progress.setTotal(total);
    auto written = writeShardedCheckpoint(
        out->tempPath(), std::move(plan.sources), options.sharding, progress, stop);
    if (!written) {
        return written.error();
    }
    plan.summary.bytesOut = written->tensorBytes;

    if (folder) {
        DAY0_TRY(copyAuxiliaryFiles(ckpt->root(), out->tempPath(), { "config.json" }));
    }
    if (hasConfig && config.is_object()) {
        const bool quantised = options.dtype == DType::F8E4M3;
        if (quantised) {
            config["quantization_config"] = { { "activation_scheme", "dynamic" }, { "fmt", "e4m3" },
                { "quant_method", "fp8" }, { "weight_block_size", { block.rows, block.cols } } };
        } else if (plan.summary.dequantized > 0) {
            config.erase("quantization_config");
        }
        if (!quantised && !options.onlyFp8) {
            config["torch_dtype"] = torchDtypeName(options.dtype);
        }
        DAY0_TRY(writeFileAtomic(out->tempPath() / "config.json", config.dump(2) + "\n"));
    }
    auto manifest = finishOutput(*out, options.hash, progress, stop);
    if (!manifest) {
        return manifest.error();
    }
    for (const auto& f : manifest->files) {
        plan.summary.files.push_back(f.file);
    }
    plan.summary.files.push_back(std::string(kManifestName));
    return plan.summary;
}

} // namespace day0::checkpoint
