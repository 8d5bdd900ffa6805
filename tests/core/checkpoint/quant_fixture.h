#pragma once

// Helpers of convert_quant_test: the quantised formats decoded from their definitions (not from
// the production tables), and small random checkpoints in a family's real layout.

#include "base/file_util.h"
#include "base/python_json.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_writer.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>

namespace day0::checkpoint::test {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// --- the formats, from their definitions --------------------------------------------------

/// E2M1: bit 3 sign, bits 2-1 exponent (bias 1), bit 0 mantissa; exponent 0 is subnormal.
inline float refE2m1(unsigned nibble)
{
    const unsigned e = (nibble >> 1) & 3;
    const unsigned m = nibble & 1;
    const double magnitude = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, int(e) - 1);
    return float((nibble & 8) != 0 ? -magnitude : magnitude);
}

/// E8M0: 2^(e − 127), 0xFF NaN.
inline float refE8m0(std::uint8_t e)
{
    return e == 0xFF ? std::nanf("") : float(std::ldexp(1.0, int(e) - 127));
}

/// E4M3 (fn): bias 7, 3 mantissa bits, exponent 0 subnormal, S.1111.111 NaN.
inline float refE4m3(std::uint8_t b)
{
    const int e = (b >> 3) & 0xF;
    const int m = b & 7;
    if (e == 15 && m == 7) {
        return std::nanf("");
    }
    const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    return float((b & 0x80) != 0 ? -v : v);
}

/// float → BF16 bits, round to nearest even (inputs here are finite).
inline std::uint16_t refBf16(float f)
{
    const auto u = std::bit_cast<std::uint32_t>(f);
    return std::uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float fromBf16(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t(h) << 16); }

// --- small checkpoints in a family's real layout ------------------------------------------

struct Stored {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> bytes;

    [[nodiscard]] std::uint8_t u8(std::size_t i) const { return std::uint8_t(bytes[i]); }
    [[nodiscard]] float f32(std::size_t i) const
    {
        float f = 0;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        return f;
    }
    [[nodiscard]] std::uint16_t u16(std::size_t i) const
    {
        std::uint16_t h = 0;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        return h;
    }
    [[nodiscard]] std::uint32_t u32(std::size_t i) const
    {
        std::uint32_t w = 0;
        std::memcpy(&w, bytes.data() + 4 * i, 4);
        return w;
    }
};
using Tensors = std::map<std::string, Stored>;

inline std::int64_t numel(const std::vector<std::int64_t>& shape)
{
    std::int64_t n = 1;
    for (auto d : shape) {
        n *= d;
    }
    return n;
}

template <typename T> inline void put(Stored& s, std::size_t i, T v)
{
    std::memcpy(s.bytes.data() + i * sizeof(T), &v, sizeof(T));
}

/// Random contents a tensor of the graph may hold: codes anywhere in their range (no NaN
/// codes), positive scales of moderate size, small plain values.
inline Stored randomTensor(const model::TensorSpec& t, std::mt19937& rng)
{
    Stored s { t.dtype, t.shape, {} };
    const auto n = std::size_t(numel(t.shape));
    s.bytes.resize(n * std::size_t(dtypeSize(t.dtype)));
    std::uniform_real_distribution<float> small(-0.1f, 0.1f);
    std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
    const bool isScale = t.kind == model::TensorKind::Scale;
    for (std::size_t i = 0; i < n; ++i) {
        switch (t.dtype) {
        case DType::U8:
        case DType::F8E8M0:
            // As a scale an E8M0 exponent near 2^0; as codes, any two E2M1 values.
            put(s, i, std::uint8_t(isScale ? 118 + rng() % 17 : rng()));
            break;
        case DType::I8:
            put(s, i, std::uint8_t(rng()));
            break;
        case DType::F8E4M3: {
            // Scales: positive normals; weights: any code but NaN.
            std::uint8_t b = 0;
            do {
                b = isScale ? std::uint8_t(((3 + rng() % 8) << 3) | (rng() % 8))
                            : std::uint8_t(rng());
            } while ((b & 0x7F) == 0x7F);
            put(s, i, b);
            break;
        }
        case DType::I32:
            put(s, i, std::uint32_t(rng()));
            break;
        case DType::I64:
            put(s, i, std::int64_t(rng() % 4));
            break;
        case DType::F32:
            put(s, i, isScale ? scale(rng) : small(rng));
            break;
        case DType::BF16:
            put(s, i, refBf16(isScale ? scale(rng) : small(rng)));
            break;
        default:
            ADD_FAILURE() << "no random values for " << t.name << " " << dtypeName(t.dtype);
        }
    }
    return s;
}

inline Json loadConfig(const fs::path& path)
{
    auto text = readFile(path);
    EXPECT_TRUE(text.ok()) << path;
    auto parsed = parsePythonJsonOrdered(*text, path.string());
    EXPECT_TRUE(parsed.ok()) << parsed.error().message;
    return parsed->value;
}

inline fs::path frontier(const std::string& name)
{
    return fs::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / name;
}

// --- small configs of the quantised families ----------------------------------------------

/// The published config at `path` with `patch` merged (sizes cut to a test's).
inline Json shrunk(const fs::path& path, const char* patch)
{
    Json config = loadConfig(path);
    config.merge_patch(Json::parse(patch));
    return config;
}

/// ModelOpt NVFP4 MiniMax-M2.5 (with minimaxHfQuant beside it): two layers of 4 experts.
inline Json minimaxNvfp4()
{
    return shrunk(frontier("frontier/nvidia--MiniMax-M2.5-NVFP4.json"),
        R"({"attn_type_list": [1, 1], "head_dim": 16, "hidden_size": 64,
            "intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2,
            "rotary_dim": 8, "vocab_size": 256})");
}

inline Json minimaxHfQuant()
{
    return loadConfig(frontier("frontier/nvidia--MiniMax-M2.5-NVFP4.hf_quant_config.json"));
}

/// gpt-oss-120b as released (MXFP4 experts): two layers of 4 experts, H = I = 64.
inline Json gptOssMxfp4()
{
    return shrunk(frontier("frontier/openai--gpt-oss-120b.json"),
        R"({"hidden_size": 64, "intermediate_size": 64, "head_dim": 16,
            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"], "num_local_experts": 4,
            "experts_per_token": 2, "num_experts_per_tok": 2, "vocab_size": 256})");
}

/// A source checkpoint: its folder and every tensor written.
struct Source {
    fs::path dir;
    Tensors tensors;
};

/// Writes config.json (and hf_quant_config.json), then one random tensor per tensor of the
/// config's graph, sharded; `edit` may change the tensors before they are written.
inline Source writeSource(const std::string& name, const Json& config, const Json* hfQuant,
    const std::function<void(Tensors&)>& edit = {})
{
    Source src { scratch(name), {} };
    EXPECT_TRUE(writeFileAtomic(src.dir / "config.json", dumpPythonJson(config, 2)).ok());
    if (hfQuant != nullptr) {
        EXPECT_TRUE(
            writeFileAtomic(src.dir / "hf_quant_config.json", dumpPythonJson(*hfQuant, 2)).ok());
    }
    EXPECT_TRUE(writeFileAtomic(src.dir / "tokenizer.json", "{}").ok());
    auto spec = model::readConfigFile(src.dir / "config.json");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    if (!spec) {
        return src;
    }
    EXPECT_TRUE(spec->quantization.has_value()) << name;
    const auto graph = model::buildLayerGraph(*spec);
    std::mt19937 rng(std::uint32_t(std::hash<std::string>()(name)));
    for (const auto& block : graph.blocks) {
        for (const auto& t : block.tensors) {
            src.tensors[t.name] = randomTensor(t, rng);
        }
    }
    for (auto& [n, s] : src.tensors) {
        // compressed-tensors `weight_shape`: the logical [out, in] of the packed weight.
        if (n.ends_with(".weight_shape")) {
            const auto& packed = src.tensors.at(n.substr(0, n.size() - 13) + ".weight_packed");
            put(s, 0, std::int32_t(packed.shape[0]));
            put(s, 1, std::int32_t(packed.shape[1] * 8));
        }
    }
    if (edit) {
        edit(src.tensors);
    }
    std::vector<TensorSource> sources;
    for (const auto& [n, s] : src.tensors) {
        sources.push_back(tensorFromBytes(n, s.dtype, s.shape, std::span(s.bytes)));
    }
    Progress progress;
    EXPECT_TRUE(
        writeShardedCheckpoint(src.dir, std::move(sources), { 200'000 }, progress, {}).ok());
    return src;
}

// --- the expected output ------------------------------------------------------------------

/// Bits of `v` in `to` (F32 or BF16).
inline std::uint32_t bitsIn(float v, DType to)
{
    return to == DType::BF16 ? refBf16(v) : std::bit_cast<std::uint32_t>(v);
}

/// The dequantised value of element (r, c) of the quantised weight `module` in `src`, and the
/// format it was found in (nullptr: `module` is not quantised there).
struct Reference {
    const char* format = nullptr;
    std::function<float(std::int64_t r, std::int64_t c)> value;
};

inline Reference referenceOf(const Tensors& src, const std::string& module, std::int64_t cols,
    std::int64_t blockRows, std::int64_t blockCols)
{
    const auto find = [&](const std::string& n) -> const Stored* {
        const auto it = src.find(n);
        return it == src.end() ? nullptr : &it->second;
    };
    const auto nibble
        = [](const Stored& codes, std::int64_t width, std::int64_t r, std::int64_t c) {
              const std::uint8_t byte = codes.u8(std::size_t(r * ((width + 1) / 2) + c / 2));
              return unsigned(c % 2 == 0 ? byte & 0xF : byte >> 4);
          };
    const Stored* packed = find(module + ".weight_packed");
    const Stored* weight = find(module + ".weight");
    const Stored* scale = find(module + ".weight_scale");
    if (packed != nullptr && packed->dtype == DType::I32) {
        const std::int64_t g = cols / scale->shape[1];
        return { "packed_int",
            [=](std::int64_t r, std::int64_t c) {
                const std::uint32_t word = packed->u32(std::size_t(r * packed->shape[1] + c / 8));
                const int q = int((word >> (4 * (c % 8))) & 0xF) - 8;
                return float(q) * fromBf16(scale->u16(std::size_t(r * scale->shape[1] + c / g)));
            } };
    }
    if (packed != nullptr) {
        return { "packed_mxfp4", [=](std::int64_t r, std::int64_t c) {
                    return refE2m1(nibble(*packed, cols, r, c))
                        * refE8m0(scale->u8(std::size_t(r * scale->shape[1] + c / 32)));
                } };
    }
    if (weight == nullptr) {
        return {};
    }
    if (weight->dtype == DType::U8) {
        const Stored* global = find(module + ".weight_scale_2");
        return { "nvfp4", [=](std::int64_t r, std::int64_t c) {
                    const float block
                        = refE4m3(scale->u8(std::size_t(r * scale->shape[1] + c / 16)));
                    return refE2m1(nibble(*weight, cols, r, c)) * block * global->f32(0);
                } };
    }
    if (weight->dtype == DType::I8) {
        const Stored* e8 = find(module + ".scale");
        return { "fp4_block", [=](std::int64_t r, std::int64_t c) {
                    return refE2m1(nibble(*weight, cols, r, c))
                        * refE8m0(e8->u8(std::size_t(r * e8->shape[1] + c / 32)));
                } };
    }
    if (weight->dtype != DType::F8E4M3) {
        return {};
    }
    if (scale != nullptr && scale->shape.empty()) {
        return { "fp8_tensor", [=](std::int64_t r, std::int64_t c) {
                    return refE4m3(weight->u8(std::size_t(r * cols + c))) * scale->f32(0);
                } };
    }
    const Stored* inv = find(module + ".weight_scale_inv");
    const Stored* e8 = find(module + ".scale");
    return { "block_fp8", [=](std::int64_t r, std::int64_t c) {
                const auto at = std::size_t(
                    (r / blockRows) * ((cols + blockCols - 1) / blockCols) + c / blockCols);
                const float s = inv != nullptr ? inv->f32(at) : refE8m0(e8->u8(at));
                return refE4m3(weight->u8(std::size_t(r * cols + c))) * s;
            } };
}

/// Element `i` of an output tensor as bits of its dtype.
inline std::uint32_t outBits(std::span<const std::byte> data, DType dtype, std::size_t i)
{
    std::uint32_t v = 0;
    std::memcpy(&v, data.data() + i * std::size_t(dtypeSize(dtype)), std::size_t(dtypeSize(dtype)));
    return v;
}

/// Checks every element of an output tensor against want(i) (bits of its dtype); reports the
/// first difference only. False on a difference.
inline bool expectBits(const CheckpointTensor& t, std::span<const std::byte> data,
    const std::function<std::uint32_t(std::size_t)>& want, const std::string& what)
{
    const auto n = std::size_t(numel(t.shape));
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t got = outBits(data, *t.dtype, i);
        if (got != want(i)) {
            ADD_FAILURE() << what << " " << t.name << ": element " << i << " is 0x" << std::hex
                          << got << ", expected 0x" << want(i);
            return false;
        }
    }
    return true;
}

/// Tensors only the quantised form has: dropped by the conversion.
inline bool quantisationOnly(const std::string& name)
{
    for (const char* suffix : { "_blocks", "_scales", ".weight_packed", ".weight_scale",
             ".weight_scale_2", ".weight_scale_inv", ".scale", ".input_scale", ".weight_shape",
             ".k_scale", ".v_scale" }) {
        if (name.ends_with(suffix)) {
            return true;
        }
    }
    return false;
}

} // namespace day0::checkpoint::test
