#include "checkpoint/shrink.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/python_json.h"
#include "checkpoint/block_fp8.h"
#include "checkpoint/dequantize.h"
#include "checkpoint/output_file.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "numerics/dtype_convert.h"
#include "numerics/tensor.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>
#include <set>
#include <utility>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

/// xoshiro256** seeded through splitmix64: the same numbers on every platform.
class Rng {
public:
    explicit Rng(std::uint64_t seed)
    {
        for (auto& s : m_s) {
            seed += 0x9E3779B97F4A7C15ull;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            s = z ^ (z >> 31);
        }
    }
    std::uint64_t next()
    {
        const std::uint64_t result = rotl(m_s[1] * 5, 7) * 9;
        const std::uint64_t t = m_s[1] << 17;
        m_s[2] ^= m_s[0];
        m_s[3] ^= m_s[1];
        m_s[1] ^= m_s[2];
        m_s[0] ^= m_s[3];
        m_s[2] ^= t;
        m_s[3] = rotl(m_s[3], 45);
        return result;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t m_s[4] {};
};

/// FNV-1a of the name mixed with the seed: each tensor gets its own stream.
std::uint64_t streamSeed(std::uint64_t seed, const std::string& name)
{
    std::uint64_t h = 0xCBF29CE484222325ull ^ seed;
    for (const unsigned char c : name) {
        h = (h ^ c) * 0x100000001B3ull;
    }
    return h;
}

/// Fills `out` with N(0, std) samples: the sum of four 16-bit uniforms (Irwin-Hall), whose
/// integer value converts to float exactly; one float multiply then scales it, so the bits do
/// not depend on the platform's libm.
void fillNormal(std::vector<float>& out, std::uint64_t seed, float stddev)
{
    Rng rng(seed);
    // Four uniforms on [0, 65535] have variance 4 × (65536² − 1) / 12.
    const float scale = stddev / 37837.2265f;
    for (auto& v : out) {
        const std::uint64_t r = rng.next();
        const std::int64_t s = std::int64_t(r & 0xFFFF) + std::int64_t((r >> 16) & 0xFFFF)
            + std::int64_t((r >> 32) & 0xFFFF) + std::int64_t((r >> 48) & 0xFFFF) - 2 * 65535;
        v = float(s) * scale;
    }
}

bool isNormWeight(const model::TensorSpec& t)
{
    return t.component == model::Component::Norm || t.name.ends_with("norm.weight")
        || t.name.ends_with("_norm.weight") || t.name.ends_with("layernorm.weight")
        || t.name.ends_with(".ln_q.weight") || t.name.ends_with("norm1.weight")
        || t.name.ends_with("norm2.weight");
}

// What shrink can write: random weights unquantised, as block FP8 (quantised with their
// scales), as packed INT4 groups, or as gpt-oss MXFP4 experts (quantised with their scales).
// The other FP4 codes and per-tensor FP8 are not generated: random bytes there would be scales
// of NaN and infinities, not a model.
Result<void> checkShrinkable(const model::ModelSpec& spec, const std::string& origin)
{
    if (spec.quantization && spec.quantization->scheme != model::QuantScheme::BlockFp8
        && spec.quantization->scheme != model::QuantScheme::PackedInt
        && spec.quantization->scheme != model::QuantScheme::Mxfp4) {
        return Error::unsupported(fmt::format("{}: shrink does not generate {} weights ({}); "
                                              "shrink the BF16 release, `day0 convert` this "
                                              "checkpoint to BF16 first, or pass --unquantized",
            origin, model::quantSchemeName(spec.quantization->scheme), spec.quantization->method));
    }
    // DeepSeek-V4's ue8m0 `.scale` tensors (block scales rounded up to powers of two) and its
    // FP4 experts (E2M1 with an E8M0 scale per 32 inputs) are generated.
    const bool v4Fp4 = spec.family == model::Family::DeepseekV4 && spec.quantization
        && spec.quantization->expertScheme == model::QuantScheme::Fp4Block;
    if (spec.quantization && spec.quantization->expertScheme && !v4Fp4) {
        return Error::unsupported(fmt::format("{}: shrink does not generate {} expert weights; "
                                              "pass --unquantized for an unquantised shrunk model",
            origin, model::quantSchemeName(*spec.quantization->expertScheme)));
    }
    return success();
}

// DeepSeek-V4: ratio 4 is the overlapping compressor with the indexer, any other ratio the
// non-overlapping one (model.py); shrink scales that one's 128 down (kShrunkHcaRatio).
std::string compressedKind(std::int64_t ratio)
{
    return ratio <= 0 ? std::string() : ratio == 4 ? std::string("+csa4") : std::string("+hca");
}

std::set<std::string> layerKinds(const model::ModelSpec& spec, bool mtp)
{
    std::set<std::string> kinds;
    for (const auto& l : mtp ? spec.mtpLayers : spec.layers) {
        kinds.insert(model::mixerKindName(l.mixer) + "+" + model::ffnKindName(l.ffn)
            + (l.hashRouted ? "+hash" : "") + compressedKind(l.compressRatio));
    }
    return kinds;
}

std::string joinedKinds(const std::set<std::string>& kinds)
{
    std::string out;
    for (const auto& k : kinds) {
        out += (out.empty() ? "" : ", ") + k;
    }
    return out.empty() ? "none" : out;
}

// A shrunk model is homologous to its source when it is read by the same family and keeps
// every kind of layer (mixer and feed-forward), its MTP layers, its vision tower and its weight
// format; otherwise the rehearsal would exercise another architecture.
Result<void> checkHomologous(
    const model::ModelSpec& original, const model::ModelSpec& small, const std::string& origin)
{
    auto fail = [&](const std::string& what) {
        return Error::unsupported(fmt::format("{}: the shrunk config would not be homologous to "
                                              "the original ({}); nothing written",
            origin, what));
    };
    if (small.family != original.family) {
        return fail(fmt::format("read as {} instead of {}", model::familyName(small.family),
            model::familyName(original.family)));
    }
    for (const bool mtp : { false, true }) {
        const auto a = layerKinds(original, mtp);
        const auto b = layerKinds(small, mtp);
        if (a != b) {
            return fail(fmt::format(
                "{}layer kinds {} become {}", mtp ? "MTP " : "", joinedKinds(a), joinedKinds(b)));
        }
    }
    if (original.vision.has_value() != small.vision.has_value()) {
        return fail("the vision tower is lost");
    }
    const auto scheme = [](const model::ModelSpec& s) {
        return s.quantization ? model::quantSchemeName(s.quantization->scheme)
                              : std::string("none");
    };
    if (scheme(original) != scheme(small)) {
        return fail(fmt::format("weights {} become {}", scheme(original), scheme(small)));
    }
    return success();
}

/// How shrink draws the values of a model.
struct Init {
    std::uint64_t seed = 0;
    float stddev = 0.02f; ///< initializer_range
    /// Biases drawn from N(0, stddev) and attention sinks from N(0, 1) instead of HF's zeros:
    /// the engine and its PyTorch twin must see them matter (gpt-oss, MiniMax-M2's router).
    bool liveBiases = false;
    /// Norm weights, layer scalars and router scales drawn around one (1 + N(0, 0.2)) instead of
    /// HF's ones: Gemma-4 multiplies by its norm weights as stored (not 1 + w), scales each
    /// layer's output and each expert's weight, and ones would hide a wrong form or a missing
    /// scale; a per-head norm of weight one commutes with the rotation, which would hide where
    /// Hunyuan places its q/k norms. Qwen3-Next and Qwen3.5 scale by 1 + w (norms and q/k
    /// norms) and by w (the linear attention's gated norm): a weight that is one everywhere
    /// would leave the two forms a uniform factor apart.
    bool liveScales = false;
    /// DeepSeek-V4: routed experts, for its hash-routing table (0: no table).
    std::int64_t experts = 0;
    /// Nemotron-H's Mamba-2 parameters drawn at the scale trained ones have (mambaDraw), not
    /// HF's initialisation: with it the scan's terms would be too small to show in the logits.
    bool liveMamba = false;
    /// Kimi's KDA parameters drawn live (kdaDraw), not at HF's initialisation.
    bool liveKda = false;
    /// DeepSeek-V4's block FP8: scales are powers of two, stored as F8_E8M0.
    bool powerOfTwoScales = false;
};

/// DeepSeek-V4's hyper-connection scales (`hc_attn_scale`, `hc_ffn_scale`, `hc_head_scale`):
/// ones in HF's initialisation.
bool isHyperConnectionScale(const model::TensorSpec& t)
{
    return t.name.ends_with("hc_attn_scale") || t.name.ends_with("hc_ffn_scale")
        || t.name.ends_with("hc_head_scale");
}

/// How a Mamba-2 mixer tensor is drawn: N(offset, spread²); spread 0: not a Mamba tensor.
/// HF's initialisation (dt near 0.001-0.1, D one, conv weights of U(±1/2), in_proj of
/// N(0, 0.02)) leaves the SSM term orders below the D skip at the shrunk width, so that a
/// broken state, chunking or grouping would not show. These make every term count: in_proj
/// 5x wider (xBC of order one after the conv), conv weights N(0, 0.5) and a live conv bias,
/// dt_bias N(0, 0.5) (dt = softplus(·) of order 0.5), A_log N(0, 0.5) (decays of order
/// exp(-0.5) per token), D and the gated norm's weight around one.
struct MambaDraw {
    float offset = 0.0f;
    float spread = 0.0f;
};

MambaDraw mambaDraw(const model::TensorSpec& t, float stddev)
{
    if (t.name.find(".mixer.") == std::string::npos) {
        return {};
    }
    if (t.name.ends_with(".in_proj.weight")) {
        return { 0.0f, 5.0f * stddev };
    }
    if (t.name.ends_with(".conv1d.weight") || t.name.ends_with(".dt_bias")
        || t.name.ends_with(".A_log")) {
        return { 0.0f, 0.5f };
    }
    if (t.name.ends_with(".conv1d.bias")) {
        return { 0.0f, 0.2f };
    }
    if (t.name.ends_with(".D") || t.name.ends_with(".mixer.norm.weight")) {
        return { 1.0f, 0.2f };
    }
    return {};
}

/// How a Kimi Delta Attention tensor is drawn (spread 0: not one). At HF's initialisation the
/// conv weights, A_log and dt_bias are of one scale (0.02), so that every key channel decays
/// alike and a per-head gate would pass for the per-channel one: conv weights N(0, 0.5), A_log
/// N(0, 0.5) (heads decaying at different rates), dt_bias N(0, 1) (channels apart).
MambaDraw kdaDraw(const model::TensorSpec& t)
{
    if (t.name.find(".self_attn.") == std::string::npos) {
        return {};
    }
    if (t.name.ends_with("_conv1d.weight") || t.name.ends_with(".A_log")) {
        return { 0.0f, 0.5f };
    }
    if (t.name.ends_with(".dt_bias")) {
        return { 0.0f, 1.0f };
    }
    return {};
}

/// A Gemma-4 tensor that multiplies and is one in HF's initialisation.
bool unitScale(const model::TensorSpec& t)
{
    return t.name.ends_with(".layer_scalar") || t.name.ends_with(".router.scale")
        || t.name.ends_with(".router.per_expert_scale") || isHyperConnectionScale(t);
}

/// One tensor of MXFP4-quantised expert weights: the codes (two E2M1 per byte) or, when
/// `scales`, the E8M0 scales per 32 inputs of the logical [rows, cols] weights drawn for `module`.
/// Each tensor quantises them again, so that neither depends on the other's fill.
TensorSource mxfp4Part(const model::TensorSpec& t, std::int64_t rows, std::int64_t cols,
    bool scales, std::string module, Init init)
{
    return { t.name, t.dtype, t.shape,
        [=, module = std::move(module)](std::span<std::byte> out) -> Result<void> {
            const auto x = shrinkNormal(init.seed, module, std::size_t(rows * cols), init.stddev);
            std::vector<std::byte> codes(std::size_t(rows * cols / 2));
            std::vector<std::byte> scale(std::size_t(rows * cols / 32));
            DAY0_TRY(quantizeMxfp4(x, rows, cols, codes, scale));
            const auto& part = scales ? scale : codes;
            if (out.size() != part.size()) {
                return Error::internal(fmt::format(
                    "tensor '{}': {} bytes for {} MXFP4 bytes", t.name, out.size(), part.size()));
            }
            std::memcpy(out.data(), part.data(), part.size());
            return success();
        } };
}

/// gpt-oss's `<module>_blocks` or `<module>_scales` whose blocks tensor is `blocks`
/// ([E, out, in/32, 16]).
TensorSource mxfp4Source(
    const model::TensorSpec& t, const model::TensorSpec& blocks, std::string module, Init init)
{
    return mxfp4Part(t, blocks.shape[0] * blocks.shape[1], blocks.shape[2] * 32,
        t.name.ends_with("_scales"), std::move(module), init);
}

/// DeepSeek-V4's FP4 expert `<module>.weight` (I8 codes [out, in/2], element 2k in the low
/// nibble) or `<module>.scale` whose codes tensor is `codes`.
TensorSource fp4Source(
    const model::TensorSpec& t, const model::TensorSpec& codes, std::string module, Init init)
{
    return mxfp4Part(
        t, codes.shape[0], codes.shape[1] * 2, t.name.ends_with(".scale"), std::move(module), init);
}

/// The source of one graph tensor (`fp8Weight`: the FP8 weight whose block scale `t` is).
Result<TensorSource> sourceFor(const model::TensorSpec& t, const model::TensorSpec* fp8Weight,
    BlockShape block, const Init& init)
{
    const std::uint64_t seed = init.seed;
    const float stddev = init.stddev;
    TensorSource source { t.name, t.dtype, t.shape, {} };
    const auto numel = std::size_t(t.numel());
    if (fp8Weight != nullptr) { // a block scale: quantise its weight's floats and keep the scales
        const auto rows = fp8Weight->shape[0];
        const auto cols = fp8Weight->shape[1];
        const auto weightSeed = streamSeed(seed, fp8Weight->name);
        source.fill = [=](std::span<std::byte> out) -> Result<void> {
            std::vector<float> x(std::size_t(rows * cols));
            fillNormal(x, weightSeed, stddev);
            std::vector<std::byte> codes(x.size());
            std::vector<float> scales(static_cast<std::size_t>(numel));
            DAY0_TRY(quantizeBlockFp8(std::as_bytes(std::span(x)), DType::F32, rows, cols, block,
                codes, std::as_writable_bytes(std::span(scales)), init.powerOfTwoScales));
            if (t.dtype == DType::F8E8M0) {
                // The exponent code of each scale (a power of two when the format asks for it).
                for (std::size_t i = 0; i < numel; ++i) {
                    numerics::storeFromDouble(out.data() + i, DType::F8E8M0, scales[i]);
                }
                return success();
            }
            return numerics::convertElements(
                std::as_bytes(std::span(scales)), DType::F32, out, t.dtype, numel);
        };
        return source;
    }
    if (t.dtype == DType::F8E4M3 && t.shape.size() == 2) {
        const auto rows = t.shape[0];
        const auto cols = t.shape[1];
        const auto weightSeed = streamSeed(seed, t.name);
        source.fill = [=](std::span<std::byte> out) -> Result<void> {
            std::vector<float> x(numel);
            fillNormal(x, weightSeed, stddev);
            const auto scaleShape = blockScaleShape(rows, cols, block);
            std::vector<std::byte> scales(std::size_t(scaleShape[0] * scaleShape[1] * 4));
            return quantizeBlockFp8(std::as_bytes(std::span(x)), DType::F32, rows, cols, block, out,
                scales, init.powerOfTwoScales);
        };
        return source;
    }
    if (t.name.ends_with(".gate.tid2eid") && t.shape.size() == 2 && init.experts > 0) {
        // DeepSeek-V4's hash routing table [vocab, top-k]: distinct expert ids per token.
        const auto streamed = streamSeed(seed, t.name);
        const std::int64_t experts = init.experts;
        const std::int64_t k = t.shape[1];
        source.fill = [=](std::span<std::byte> out) -> Result<void> {
            Rng rng(streamed);
            std::vector<std::int64_t> ids(std::size_t(t.shape[0] * k));
            std::vector<std::int64_t> pool(static_cast<std::size_t>(experts));
            for (std::int64_t v = 0; v < t.shape[0]; ++v) {
                std::iota(pool.begin(), pool.end(), 0);
                for (std::int64_t j = 0; j < k && j < experts; ++j) {
                    const auto pick = j + std::int64_t(rng.next() % std::uint64_t(experts - j));
                    std::swap(pool[std::size_t(j)], pool[std::size_t(pick)]);
                    ids[std::size_t(v * k + j)] = pool[std::size_t(j)];
                }
            }
            if (out.size() != ids.size() * sizeof(std::int64_t)) {
                return Error::internal(fmt::format("tensor '{}': {} bytes", t.name, out.size()));
            }
            std::memcpy(out.data(), ids.data(), out.size());
            return success();
        };
        return source;
    }
    if (!isFloat(t.dtype)) {
        // Packed integer weights: random bits; `weight_shape` records the unpacked [out, in].
        const bool shapeRecord = t.name.ends_with(".weight_shape");
        const auto streamed = streamSeed(seed, t.name);
        source.fill = [=](std::span<std::byte> out) -> Result<void> {
            if (shapeRecord) {
                return Error::internal(fmt::format("tensor '{}': filled by its module", t.name));
            }
            Rng rng(streamed);
            for (std::size_t i = 0; i < out.size(); i += 8) {
                const std::uint64_t r = rng.next();
                std::memcpy(out.data() + i, &r, std::min<std::size_t>(8, out.size() - i));
            }
            return success();
        };
        return source;
    }
    MambaDraw live = init.liveMamba ? mambaDraw(t, stddev) : MambaDraw {};
    if (init.liveKda && live.spread == 0.0f) {
        live = kdaDraw(t);
    }
    if (const MambaDraw m = live; m.spread > 0) {
        const auto streamed = streamSeed(seed, t.name);
        source.fill = [=](std::span<std::byte> out) -> Result<void> {
            std::vector<float> x(numel);
            fillNormal(x, streamed, m.spread);
            for (float& v : x) {
                v += m.offset;
            }
            return numerics::convertElements(
                std::as_bytes(std::span(x)), DType::F32, out, t.dtype, numel);
        };
        return source;
    }
    bool ones
        = isNormWeight(t) && t.kind == model::TensorKind::Weight && !t.name.ends_with(".bias");
    const bool aroundOne = init.liveScales && (ones || unitScale(t));
    ones = ones && !aroundOne;
    const bool zeros
        = !init.liveBiases && (t.kind == model::TensorKind::Bias || t.name.ends_with("bias"));
    // gpt-oss sinks are logits beside the scores: a few units, as the trained ones are.
    // DeepSeek-V4's hyper-connection biases and compressor position biases likewise (HF
    // initialises them to zeros, which would leave them untested).
    const bool unitSpread = t.name.ends_with(".sinks") || t.name.ends_with(".attn_sink")
        || t.name.ends_with("_base") || t.name.ends_with(".ape");
    const float spread = init.liveBiases && unitSpread ? 1.0f : stddev;
    const bool scale = t.kind == model::TensorKind::Scale;
    const auto streamed = streamSeed(seed, t.name);
    source.fill = [=](std::span<std::byte> out) -> Result<void> {
        std::vector<float> x(numel, ones ? 1.0f : 0.0f);
        if (scale) {
            // Group scales of packed integer weights: positive, about stddev / 2.5 per step.
            std::fill(x.begin(), x.end(), stddev / 2.5f);
        } else if (aroundOne) {
            fillNormal(x, streamed, 0.2f);
            for (float& v : x) {
                v += 1.0f;
            }
        } else if (!ones && !zeros) {
            fillNormal(x, streamed, spread);
        }
        return numerics::convertElements(
            std::as_bytes(std::span(x)), DType::F32, out, t.dtype, numel);
    };
    return source;
}

// DeepSeek-V4's compress ratios shrink scaled down, said so.
std::vector<std::string> compressRatioNotes(
    const model::ModelSpec& original, const model::ModelSpec& small)
{
    std::set<std::pair<std::int64_t, std::int64_t>> changed;
    for (const auto& l : small.layers) {
        for (const auto& o : original.layers) {
            if (compressedKind(o.compressRatio) == compressedKind(l.compressRatio)
                && o.compressRatio != l.compressRatio) {
                changed.insert({ o.compressRatio, l.compressRatio });
            }
        }
    }
    std::vector<std::string> notes;
    for (const auto& [from, to] : changed) {
        notes.push_back(fmt::format("compress ratio {} scaled to {} (the heavily compressed "
                                    "attention's structure kept), so that a short prompt fills "
                                    "its windows",
            from, to));
    }
    return notes;
}

} // namespace

std::vector<float> shrinkNormal(
    std::uint64_t seed, const std::string& name, std::size_t count, float stddev)
{
    std::vector<float> out(count);
    fillNormal(out, streamSeed(seed, name), stddev);
    return out;
}

Result<ShrinkPlan> planShrink(const std::string& modelArg, const ShrinkOptions& options)
{
    auto configPath = resolveConfigPath(modelArg);
    if (!configPath) {
        return configPath.error();
    }
    auto text = readFile(*configPath);
    if (!text) {
        return text.error();
    }
    // HF configs are written by Python's json: NaN / Infinity are kept as they are.
    auto parsed = parsePythonJsonOrdered(*text, displayPath(*configPath));
    if (!parsed) {
        return parsed.error();
    }
    // --unquantized: the config as the BF16 release would have it (no weight format).
    if (options.unquantized) {
        for (auto* c : { &parsed->value,
                 parsed->value.contains("text_config") && parsed->value["text_config"].is_object()
                     ? &parsed->value["text_config"]
                     : nullptr }) {
            if (c != nullptr) {
                c->erase("quantization_config");
                c->erase("expert_dtype"); // DeepSeek-V4: its routed experts' FP4
            }
        }
    }
    // The original must read exactly (every key modelled): a shrunk copy of structure Day0
    // does not model would not be the same architecture.
    const std::string origin
        = displayPath(*configPath) + (options.unquantized ? " (unquantized)" : "");
    auto original = [&]() -> Result<model::ModelSpec> {
        if (!options.unquantized) {
            return model::readConfigFile(*configPath);
        }
        auto plain = parsePythonJson(dumpPythonJson(parsed->value, 0), origin);
        if (!plain) {
            return plain.error();
        }
        return model::readConfig(plain->value, origin);
    }();
    if (!original) {
        return original.error();
    }
    DAY0_TRY(checkShrinkable(*original, displayPath(*configPath)));
    auto small = shrinkConfig(parsed->value, options);
    if (!small) {
        return small.error().withContext(displayPath(*configPath));
    }
    // The shrunk config must still read as the same architecture, with every layer kind,
    // feed-forward kind and part of the original.
    ShrinkPlan plan;
    plan.configText = dumpPythonJson(*small, 2);
    auto smallJson = parsePythonJson(plan.configText, "shrunk " + displayPath(*configPath));
    if (!smallJson) {
        return smallJson.error();
    }
    auto spec = model::readConfig(smallJson->value, "shrunk " + displayPath(*configPath));
    if (!spec) {
        return spec.error();
    }
    DAY0_TRY(checkHomologous(*original, *spec, displayPath(*configPath)));
    plan.config = std::move(*small);
    plan.original = std::move(*original);
    plan.spec = std::move(*spec);
    return plan;
}

Result<ShrinkSummary> shrinkModel(const std::string& modelArg, const fs::path& out,
    const ShrinkOptions& options, Progress& progress, std::stop_token stop)
{
    auto planned = planShrink(modelArg, options);
    if (!planned) {
        return planned.error();
    }
    const auto* small = &planned->config;
    const auto* spec = &planned->spec;
    const std::string& smallText = planned->configText;
    const auto graph = model::buildLayerGraph(*spec);
    const auto& tc = small->contains("text_config") ? (*small)["text_config"] : *small;
    const float stddev = tc.contains("initializer_range") && tc["initializer_range"].is_number()
        ? tc["initializer_range"].get<float>()
        : 0.02f;
    BlockShape block;
    if (spec->quantization) {
        block = { spec->quantization->blockRows, spec->quantization->blockCols };
    }
    const bool mxfp4
        = spec->quantization && spec->quantization->scheme == model::QuantScheme::Mxfp4;
    // MiniMax-M2/M3, Nemotron-H, GLM-4.5: a zero selection bias would leave its sigmoid router's
    // bias untested (GLM-4.5's q/k/v biases likewise); M3's (1 + w) norms around one too: a uniform
    // per-head norm would commute with the RoPE.
    const bool deepseekV4 = spec->family == model::Family::DeepseekV4;
    // Kimi-Linear: its sigmoid router's bias and the KDA's o_norm weight live too.
    const bool kimi = spec->family == model::Family::KimiLinear;
    Init init { options.seed, stddev,
        spec->family == model::Family::GptOss || spec->family == model::Family::MiniMaxM2
            || spec->family == model::Family::MiniMaxM3 || spec->family == model::Family::NemotronH
            || spec->family == model::Family::Glm4Moe || deepseekV4 || kimi,
        spec->family == model::Family::Gemma4 || spec->family == model::Family::Hunyuan
            || spec->family == model::Family::Qwen3Next || spec->family == model::Family::Qwen35
            || spec->family == model::Family::Qwen35Moe || spec->family == model::Family::MiniMaxM3
            || deepseekV4 || kimi,
        deepseekV4 && spec->moe ? spec->moe->numExperts : 0,
        spec->family == model::Family::NemotronH };
    init.liveKda = kimi;
    init.powerOfTwoScales = spec->quantization && spec->quantization->scaleDtype == DType::F8E8M0;
    const bool fp4Experts
        = spec->quantization && spec->quantization->expertScheme == model::QuantScheme::Fp4Block;

    std::unordered_map<std::string, const model::TensorSpec*> byName;
    for (const auto& b : graph.blocks) {
        for (const auto& t : b.tensors) {
            byName.emplace(t.name, &t);
        }
    }
    std::vector<TensorSource> sources;
    ShrinkSummary summary;
    summary.modelType = spec->modelType;
    for (const auto& b : graph.blocks) {
        for (const auto& t : b.tensors) {
            const model::TensorSpec* fp8Weight = nullptr;
            if (t.kind == model::TensorKind::Scale && spec->quantization
                && t.name.ends_with(spec->quantization->scaleSuffix)) {
                const auto weightName
                    = t.name.substr(0, t.name.size() - spec->quantization->scaleSuffix.size())
                    + "weight";
                const auto it = byName.find(weightName);
                if (it != byName.end() && it->second->dtype == DType::F8E4M3
                    && it->second->shape.size() == 2) {
                    fp8Weight = it->second;
                }
            }
            if (fp4Experts && t.isExpert()
                && (t.name.ends_with(".weight") || t.name.ends_with(".scale"))) {
                // DeepSeek-V4's FP4 experts: `.weight` I8 [out, in/2] codes, `.scale` E8M0
                // [out, in/32], both from one draw of the module's [out, in] weights.
                std::string module = t.name.substr(0, t.name.rfind('.'));
                const auto codes = byName.find(module + ".weight");
                if (codes != byName.end() && codes->second->dtype == DType::I8
                    && codes->second->shape.size() == 2) {
                    sources.push_back(fp4Source(t, *codes->second, std::move(module), init));
                    summary.bytes += sources.back().bytes();
                    continue;
                }
            }
            if (mxfp4 && (t.name.ends_with("_blocks") || t.name.ends_with("_scales"))) {
                std::string module = t.name.substr(0, t.name.size() - 7);
                const auto blocks = byName.find(module + "_blocks");
                if (blocks != byName.end() && blocks->second->shape.size() == 4) {
                    sources.push_back(mxfp4Source(t, *blocks->second, std::move(module), init));
                    summary.bytes += sources.back().bytes();
                    continue;
                }
            }
            auto source = sourceFor(t, fp8Weight, block, init);
            if (!source) {
                return source.error();
            }
            if (t.name.ends_with(".weight_shape")) {
                const auto weight = byName.find(t.name.substr(0, t.name.size() - 6) + "packed");
                std::vector<std::int32_t> shape { 0, 0 };
                if (weight != byName.end()) {
                    shape = { std::int32_t(weight->second->shape[0]),
                        std::int32_t(weight->second->shape[1]) * 32 / spec->quantization->bits };
                }
                source->fill = [shape](std::span<std::byte> o) -> Result<void> {
                    std::memcpy(o.data(), shape.data(), std::min(o.size(), shape.size() * 4));
                    return success();
                };
            }
            summary.bytes += source->bytes();
            sources.push_back(std::move(*source));
        }
    }
    summary.notes = compressRatioNotes(planned->original, *spec);
    summary.tensors = sources.size();
    summary.parameters = graph.countParameters().total;

    auto dir = OutputDir::create(out, options.replace);
    if (!dir) {
        return dir.error();
    }
    progress.setDone(0);
    progress.setTotal(std::int64_t(summary.bytes));
    auto written = writeShardedCheckpoint(
        dir->tempPath(), std::move(sources), options.sharding, progress, stop);
    if (!written) {
        return written.error();
    }
    DAY0_TRY(writeFileAtomic(dir->tempPath() / "config.json", smallText + "\n"));
    nlohmann::ordered_json provenance { { "tool", "day0 shrink" }, { "source", modelArg },
        { "source_model_type", spec->modelType }, { "seed", options.seed },
        { "parameters", summary.parameters },
        { "note", "random weights initialised like the original; not a trained model" } };
    DAY0_TRY(writeFileAtomic(dir->tempPath() / "day0-shrink.json", dumpJson(provenance, 2) + "\n"));
    auto manifest = finishOutput(*dir, options.hash, progress, stop);
    if (!manifest) {
        return manifest.error();
    }
    for (const auto& f : manifest->files) {
        summary.files.push_back(f.file);
    }
    summary.files.push_back(std::string(kManifestName));
    return summary;
}

} // namespace day0::checkpoint
