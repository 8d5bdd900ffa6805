#include "checkpoint/convert.h"

#include "base/file_util.h"
#include "base/python_json.h"
#include "base/thread_pool.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert_quant.h"
#include "checkpoint/quant_groups.h"
#include "model/config_reader.h"
#include "numerics/dtype_convert.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <thread>
#include <unordered_set>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;
using detail::parallelChunks;

constexpr std::string_view kScaleSuffix = "_scale_inv"; // "X.weight" → "X.weight_scale_inv"
constexpr const char* kHfQuantConfig = "hf_quant_config.json";

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
BlockShape blockFromConfig(const Json& config, BlockShape fallback)
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

/// The config objects that describe the text model: the document, and a multimodal
/// wrapper's text_config (Kimi-K2.5, Kimi-K3).
std::vector<Json*> textSections(Json& config)
{
    std::vector<Json*> out { &config };
    const auto text = config.find("text_config");
    if (text != config.end() && text->is_object()) {
        out.push_back(&*text);
    }
    return out;
}

/// The quant_method a config declares, at the top or in text_config ("" when none).
std::string declaredQuantMethod(const Json& config)
{
    const auto text = config.find("text_config");
    for (const Json* section : { &config, text != config.end() ? &*text : nullptr }) {
        if (section == nullptr || !section->is_object()) {
            continue;
        }
        const auto q = section->find("quantization_config");
        if (q != section->end() && q->is_object()) {
            const auto m = q->find("quant_method");
            return m != q->end() && m->is_string() ? m->get<std::string>() : "unknown";
        }
    }
    return {};
}

/// Rewrites config.json for the converted weights: the quantisation it describes is gone
/// (`expert_dtype` is DeepSeek-V4's FP4 expert storage), and the dtype is the target's.
void describeOutput(Json& config, bool dequantised, const ConvertOptions& options, BlockShape block)
{
    if (options.dtype == DType::F8E4M3) {
        config["quantization_config"] = { { "activation_scheme", "dynamic" }, { "fmt", "e4m3" },
            { "quant_method", "fp8" }, { "weight_block_size", { block.rows, block.cols } } };
        return;
    }
    for (Json* section : textSections(config)) {
        if (dequantised) {
            section->erase("quantization_config");
            section->erase("expert_dtype");
        }
        if (options.onlyFp8) {
            continue;
        }
        // A multimodal wrapper repeats the dtype in text_config, which the reader prefers.
        bool named = false;
        for (const char* key : { "torch_dtype", "dtype" }) {
            if (section->contains(key)) {
                (*section)[key] = torchDtypeName(options.dtype);
                named = true;
            }
        }
        if (!named && section == &config) {
            config["torch_dtype"] = torchDtypeName(options.dtype);
        }
    }
}

/// What the config says about the checkpoint, and the converted graph's tensors by name.
struct Layout {
    DequantLayout graphs;
    std::unordered_map<std::string_view, const model::TensorSpec*> convertedByName;
};

/// Reads the layout from config.json when Day0 can. nullopt when there is no config, or one
/// it cannot read that declares no quantisation other than block FP8 (whose weights are then
/// paired by name, as before); an error when the weights are quantised in a way only the
/// config can explain.
Result<std::optional<Layout>> readLayout(const fs::path& configPath, const Json& config,
    const fs::path& dst, const ConvertOptions& options)
{
    auto spec = model::readConfigFile(configPath);
    if (spec && options.dtype == DType::F8E4M3) {
        // Re-quantising: only block-FP8 weights with F32 scales can be kept as they are.
        if (const auto& q = spec->quantization; q
            && (q->scheme != model::QuantScheme::BlockFp8 || q->expertScheme || q->mixedScheme
                || q->scaleDtype != DType::F32 || q->scaleSuffix != "weight_scale_inv")) {
            return Error::unsupported(fmt::format("convert: {} stores its weights as {}; "
                                                  "converting them to block FP8 is not "
                                                  "supported (convert to bf16 first)",
                displayPath(configPath), model::quantSchemeName(q->scheme)));
        }
        return std::optional<Layout>();
    }
    if (!spec) {
        const std::string method = declaredQuantMethod(config);
        const bool modelOpt = fs::exists(configPath.parent_path() / kHfQuantConfig);
        if ((method.empty() || method == "fp8") && !modelOpt) {
            return std::optional<Layout>();
        }
        return spec.error().withContext(
            fmt::format("convert: {} weights can only be dequantised from the layout of a "
                        "config Day0 reads",
                modelOpt ? "ModelOpt (" + std::string(kHfQuantConfig) + ")" : method));
    }
    auto graphs
        = readDequantLayout(configPath, config, *spec, options, displayPath(dst / "config.json"));
    if (!graphs) {
        return graphs.error();
    }
    Layout layout { std::move(*graphs), {} };
    layout.convertedByName = tensorsByName(layout.graphs.converted);
    return std::optional<Layout>(std::move(layout));
}

struct Plan {
    std::vector<TensorSource> sources;
    ConvertSummary summary;
};

/// A tensor copied, or converted to `to` when that differs.
void planPlain(const CheckpointTensor& t, std::span<const std::byte> bytes, DType to,
    ThreadPool* pool, Plan& plan)
{
    const DType from = *t.dtype;
    if (from == to) {
        plan.sources.push_back(tensorFromBytes(t.name, from, t.shape, bytes));
        ++plan.summary.copied;
        return;
    }
    const auto count = std::size_t(t.bytes / std::uint64_t(dtypeSize(from)));
    plan.sources.push_back(
        { t.name, to, t.shape, [=](std::span<std::byte> out) -> Result<void> {
             const auto fs = std::size_t(dtypeSize(from));
             const auto ts = std::size_t(dtypeSize(to));
             return parallelChunks(
                 pool, count, std::size_t(1) << 20, [&](std::size_t b, std::size_t e) {
                     return numerics::convertElements(bytes.subspan(b * fs, (e - b) * fs), from,
                         out.subspan(b * ts, (e - b) * ts), to, e - b);
                 });
         } });
    ++plan.summary.converted;
}

Result<std::span<const std::byte>> tensorBytes(const Checkpoint& ckpt, const CheckpointTensor& t)
{
    if (!t.dtype) {
        return Error::unsupported(fmt::format(
            "{}: tensor '{}' has type {}", displayPath(ckpt.root() / t.file), t.name, t.dtypeName));
    }
    return ckpt.data(t);
}

/// The dtype a plain (not quantised) tensor is written in: the target, unless the converted
/// config wants another float type for it (DeepSeek-V4's F32 `attn_sink` in a BF16 model).
DType plainTarget(const CheckpointTensor& t, const ConvertOptions& opt, const Layout* layout)
{
    const DType from = *t.dtype;
    if (!isFloat(from) || opt.onlyFp8 || from == DType::F8E8M0) {
        return from;
    }
    DType to = opt.dtype;
    if (layout != nullptr) {
        const auto it = layout->convertedByName.find(t.name);
        if (it != layout->convertedByName.end()) {
            const model::TensorSpec& spec = *it->second;
            const bool wide = spec.dtype == DType::F32 || spec.dtype == DType::F16
                || spec.dtype == DType::BF16 || spec.dtype == DType::F64;
            if (wide && spec.dtype != to && spec.altDtype != to) {
                to = spec.dtype;
            }
        }
    }
    return to;
}

/// Refuses a quantised-looking tensor (`X.weight` in F8 beside `X.weight_scale_inv`) that the
/// config's layout does not quantise, or that no layout explains (`layout` null): converted as
/// plain values it would be silently wrong.
Result<void> refuseStrayQuantised(
    const Checkpoint& ckpt, const CheckpointTensor& t, const Layout* layout)
{
    const DType d = *t.dtype;
    if (d != DType::F8E4M3 && d != DType::F8E5M2 && d != DType::U8 && d != DType::I8
        && d != DType::I32) {
        return success();
    }
    std::string module;
    std::vector<std::string> scales;
    for (std::string_view suffix : { ".weight", ".weight_packed" }) {
        if (t.name.ends_with(suffix)) {
            module = t.name.substr(0, t.name.size() - suffix.size());
            scales = { module + ".weight_scale_inv", module + ".weight_scale", module + ".scale" };
        }
    }
    if (t.name.ends_with("_blocks")) {
        module = t.name.substr(0, t.name.size() - 7);
        scales = { module + "_scales" };
    }
    for (const auto& scale : scales) {
        if (ckpt.find(scale) != nullptr) {
            const std::string why = layout != nullptr
                ? fmt::format("{} does not quantise '{}'", layout->graphs.configName, module)
                : std::string("without a config.json Day0 reads its layout is unknown");
            return Error::badInput(fmt::format("{}: tensor '{}' is stored quantised ({}, with "
                                               "'{}') but {}",
                displayPath(ckpt.root() / t.file), t.name, t.dtypeName, scale, why));
        }
    }
    return success();
}

/// Plans the conversion from the config's layout: every quantised weight it lays out is
/// dequantised from its group (checked against the layout), the scales that only mattered to
/// the quantised form are dropped, and every other tensor is planned as a plain one.
Result<void> planFromLayout(const Checkpoint& ckpt, const Layout& layout, const ConvertOptions& opt,
    ThreadPool* pool, Plan& plan)
{
    std::unordered_set<std::string_view> claimed;
    for (const auto& g : layout.graphs.quant.groups) {
        auto found = matchGroup(ckpt, g, layout.graphs.configName);
        if (!found) {
            return found.error();
        }
        if (!*found) {
            continue;
        }
        const GroupTensors& t = **found;
        auto source = detail::dequantizedSource(ckpt, g, t, opt.dtype, pool);
        if (!source) {
            return source.error();
        }
        plan.sources.push_back(std::move(*source));
        ++plan.summary.dequantized;
        for (const auto* member : { t.codes, t.scale, t.globalScale, t.shape }) {
            if (member != nullptr) {
                claimed.insert(member->name);
            }
        }
        for (const auto* unused : t.unused) {
            claimed.insert(unused->name);
            ++plan.summary.dropped;
        }
    }
    for (const auto* spec : layout.graphs.quant.dropped) {
        if (const auto* t = ckpt.find(spec->name)) {
            claimed.insert(t->name);
            ++plan.summary.dropped;
        }
    }
    for (const auto& t : ckpt.tensors()) {
        if (claimed.count(t.name) != 0) {
            continue;
        }
        auto bytes = tensorBytes(ckpt, t);
        if (!bytes) {
            return bytes.error();
        }
        DAY0_TRY(refuseStrayQuantised(ckpt, t, &layout));
        planPlain(t, *bytes, plainTarget(t, opt, &layout), pool, plan);
    }
    return success();
}

/// Without a layout: the sources of one source tensor (or weight + scale pair, paired by name)
/// for the requested conversion.
Result<void> planTensor(const Checkpoint& ckpt, const CheckpointTensor& t,
    const ConvertOptions& opt, BlockShape block, ThreadPool* pool, Plan& plan)
{
    const auto where = displayPath(ckpt.root() / t.file);
    auto data = tensorBytes(ckpt, t);
    if (!data) {
        return data.error();
    }
    const std::span<const std::byte> bytes = *data;
    const DType from = *t.dtype;
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
    if (change) {
        DAY0_TRY(refuseStrayQuantised(ckpt, t, nullptr));
    }
    planPlain(t, bytes, change ? opt.dtype : from, pool, plan);
    return success();
}

} // namespace

Result<DequantLayout> readDequantLayout(const fs::path& configPath, const Json& config,
    const model::ModelSpec& spec, const ConvertOptions& options, const std::string& convertedName)
{
    DequantLayout layout;
    layout.configName = displayPath(configPath);
    Json out = config;
    describeOutput(out, spec.quantization.has_value(), options, {});
    auto parsed = parsePythonJson(dumpPythonJson(out, 2), convertedName);
    if (!parsed) {
        return parsed.error();
    }
    auto converted = model::readConfig(parsed->value, convertedName);
    if (!converted) {
        return converted.error().withContext("convert: the converted config");
    }
    layout.source = model::buildLayerGraph(spec);
    layout.converted = model::buildLayerGraph(*converted);
    auto quant = findQuantGroups(layout.source, layout.converted);
    if (!quant) {
        return quant.error();
    }
    layout.quant = std::move(*quant);
    return layout;
}

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
    Json config;
    const auto configPath = ckpt->root() / "config.json";
    const bool hasConfig = folder && fs::exists(configPath);
    std::optional<Layout> layout;
    if (hasConfig) {
        auto text = readFile(configPath);
        if (!text) {
            return text.error();
        }
        auto parsed = parsePythonJsonOrdered(*text, displayPath(configPath));
        if (!parsed) {
            return parsed.error();
        }
        config = std::move(parsed->value);
        // A per-rank split (day0 shard output, with plan.json) holds slices, not the layout.
        if (!fs::exists(ckpt->root() / "plan.json")) {
            auto read = readLayout(configPath, config, dst, options);
            if (!read) {
                return read.error();
            }
            layout = std::move(*read);
        }
    }
    const BlockShape block = blockFromConfig(config, options.block);

    const auto hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t threads = options.threads > 0 ? std::size_t(options.threads) : hw;
    std::optional<ThreadPool> pool;
    if (threads > 1) {
        pool.emplace(threads - 1);
    }
    // Everything is planned and checked before the output folder exists.
    Plan plan;
    if (layout) {
        DAY0_TRY(planFromLayout(*ckpt, *layout, options, pool ? &*pool : nullptr, plan));
    } else {
        for (const auto& t : ckpt->tensors()) {
            DAY0_TRY(planTensor(*ckpt, t, options, block, pool ? &*pool : nullptr, plan));
        }
    }
    for (const auto& t : ckpt->tensors()) {
        plan.summary.bytesIn += t.bytes;
    }
    plan.summary.tensorsIn = ckpt->tensors().size();
    plan.summary.tensorsOut = plan.sources.size();
    std::int64_t total = 0;
    for (const auto& s : plan.sources) {
        total += std::int64_t(s.bytes());
    }

    auto out = OutputDir::create(dst, options.replace);
    if (!out) {
        return out.error();
    }
    progress.setDone(0);
    progress.setTotal(total);
    auto written = writeShardedCheckpoint(
        out->tempPath(), std::move(plan.sources), options.sharding, progress, stop);
    if (!written) {
        return written.error();
    }
    plan.summary.bytesOut = written->tensorBytes;

    // The quantisation config.json and hf_quant_config.json described is gone.
    const bool dequantised = layout ? layout->graphs.source.spec.quantization.has_value()
                                    : plan.summary.dequantized > 0;
    if (folder) {
        std::vector<std::string> skip { "config.json" };
        if (dequantised && options.dtype != DType::F8E4M3) {
            skip.emplace_back(kHfQuantConfig);
        }
        DAY0_TRY(copyAuxiliaryFiles(ckpt->root(), out->tempPath(), skip));
    }
    if (hasConfig && config.is_object()) {
        describeOutput(config, dequantised, options, block);
        DAY0_TRY(
            writeFileAtomic(out->tempPath() / "config.json", dumpPythonJson(config, 2) + "\n"));
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
