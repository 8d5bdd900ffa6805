// `day0 shrink` of gpt-oss: MXFP4 experts as transformers' Mxfp4GptOssExperts stores them, live
// biases and sinks, a window the test prompts exceed. The expected codes are computed here from
// the OCP MX v1.0 definition (scale 2^(⌊log2 amax⌋ − 2), nearest E2M1 value, ties to the even
// code, saturation at ±6), not with the production quantiser.

#include "checkpoint/arch_check.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/dequantize.h"
#include "checkpoint/dequantized_weights.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shrink.h"
#include "model/config_reader.h"
#include "quant_fixture.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

namespace day0::checkpoint {
namespace {

using namespace test;

constexpr std::array<float, 8> kE2m1 { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

/// E2M1 code of v: the nearest of the eight magnitudes (ties to the even code), saturating.
unsigned refCode(float v)
{
    const float a = std::fabs(v);
    unsigned best = 0;
    for (unsigned c = 1; c < 8; ++c) {
        const float d = std::fabs(a - kE2m1[c]);
        const float bd = std::fabs(a - kE2m1[best]);
        if (d < bd || (d == bd && c % 2 == 0)) {
            best = c;
        }
    }
    return best | (std::signbit(v) ? 8u : 0u);
}

/// The unbiased MX scale exponent of a block: ⌊log2 amax⌋ − 2, found by doubling.
int refScaleExponent(std::span<const float> block)
{
    float amax = 0.0f;
    for (const float v : block) {
        amax = std::max(amax, std::fabs(v));
    }
    int k = 0;
    while (std::ldexp(1.0, k + 1) <= amax) {
        ++k;
    }
    while (std::ldexp(1.0, k) > amax) {
        --k;
    }
    return k - 2;
}

TEST(ShrinkMxfp4, QuantizesByTheMxDefinition)
{
    // Row 0, block 0: amax 5 → 2^(2 − 2) = 1 (E8M0 127). 5 sits between 4 (code 6) and 6
    // (code 7): the even code; 2.5 → 2 (code 4), 0.25 → 0, 0.75 → 1 (code 2), −1.75 → −2.
    // Row 0, block 1: amax 12 → 2^(3 − 2) = 2 (E8M0 128); 12/2 = 6, 11/2 = 5.5 → 6, 0.1 → 0.
    // Row 1, block 0: amax 7.9 → scale 1 and 7.9 saturates to 6; 0.3 → 0.5 (code 1).
    // Row 1, block 1: all zero → scale 1, codes 0.
    std::vector<float> x(2 * 64, 0.0f);
    const auto at = [&](int r, int c) -> float& { return x[std::size_t(r * 64 + c)]; };
    at(0, 0) = 5.0f;
    at(0, 1) = 2.5f;
    at(0, 2) = 0.25f;
    at(0, 3) = 0.75f;
    at(0, 4) = -1.75f;
    at(0, 32) = 12.0f;
    at(0, 33) = 11.0f;
    at(0, 34) = 0.1f;
    at(1, 0) = 7.9f;
    at(1, 1) = 0.3f;
    std::vector<std::byte> codes(2 * 32);
    std::vector<std::byte> scales(2 * 2);
    ASSERT_TRUE(quantizeMxfp4(x, 2, 64, codes, scales).ok());
    const auto code = [&](int r, int c) {
        const auto byte = std::uint8_t(codes[std::size_t(r * 32 + c / 2)]);
        return c % 2 == 0 ? byte & 0xF : byte >> 4; // element 2k in the low nibble
    };
    EXPECT_EQ(std::uint8_t(scales[0]), 127);
    EXPECT_EQ(std::uint8_t(scales[1]), 128);
    EXPECT_EQ(std::uint8_t(scales[2]), 127);
    EXPECT_EQ(std::uint8_t(scales[3]), 127);
    EXPECT_EQ(code(0, 0), 6);
    EXPECT_EQ(code(0, 1), 4);
    EXPECT_EQ(code(0, 2), 0);
    EXPECT_EQ(code(0, 3), 2);
    EXPECT_EQ(code(0, 4), 0xC);
    EXPECT_EQ(code(0, 32), 7);
    EXPECT_EQ(code(0, 33), 7);
    EXPECT_EQ(code(0, 34), 0);
    EXPECT_EQ(code(1, 0), 7);
    EXPECT_EQ(code(1, 1), 1);
    EXPECT_EQ(std::uint8_t(codes[std::size_t(32 + 16)]), 0);
    EXPECT_FALSE(quantizeMxfp4(std::vector<float>(48), 1, 48, codes, scales).ok());
}

/// Element i of a BF16 or F32 tensor.
float valueAt(const CheckpointTensor& t, std::span<const std::byte> data, std::size_t i)
{
    const Stored s { *t.dtype, t.shape, { data.begin(), data.end() } };
    return t.dtype == DType::BF16 ? fromBf16(s.u16(i)) : s.f32(i);
}

// A shrink per test (a few milliseconds): CTest runs each test in its own process, in parallel,
// so the tests cannot share one folder.
class ShrinkGptOss : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = scratch("gpt_oss") / "small";
        Progress progress;
        auto summary = shrinkModel("gpt-oss-20b", m_dir, {}, progress, {});
        ASSERT_TRUE(summary.ok()) << summary.error().message;
        EXPECT_EQ(summary->modelType, "gpt_oss");
    }
    fs::path m_dir;
};

TEST_F(ShrinkGptOss, ReadsBackAsMxfp4GptOssWithASmallWindow)
{
    auto spec = model::loadModel(m_dir.string());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->family, model::Family::GptOss);
    ASSERT_TRUE(spec->quantization.has_value());
    EXPECT_EQ(spec->quantization->scheme, model::QuantScheme::Mxfp4);
    const Json config = loadConfig(m_dir / "config.json");
    EXPECT_EQ(config["sliding_window"], kShrunkWindow);
    EXPECT_EQ(config["quantization_config"]["quant_method"], "mxfp4");
    EXPECT_TRUE(config["quantization_config"].contains("modules_to_not_convert"));
    EXPECT_EQ(spec->hiddenSize % 32, 0);
    EXPECT_EQ(spec->moe->expertIntermediate % 32, 0);
}

TEST_F(ShrinkGptOss, VerifiesAgainstItsConfigAndManifest)
{
    auto ckpt = Checkpoint::open(m_dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
    EXPECT_FALSE(ckpt->hasErrors());
    auto arch = checkAgainstConfig(*ckpt);
    ASSERT_TRUE(arch.ok() && arch->has_value());
    for (const auto& row : (*arch)->rows) {
        EXPECT_EQ(row.status, TensorStatus::Ok) << row.message;
    }
    const auto manifest = findManifest(m_dir);
    ASSERT_TRUE(manifest.ok());
    Progress progress;
    auto report = verifyIntegrity(m_dir, **manifest, ckpt->files(), {}, progress, {});
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
}

TEST_F(ShrinkGptOss, WritesExpertsAsMxfp4BlocksAndScales)
{
    auto ckpt = Checkpoint::open(m_dir);
    ASSERT_TRUE(ckpt.ok());
    auto spec = model::loadModel(m_dir.string());
    ASSERT_TRUE(spec.ok());
    const std::int64_t e = spec->moe->numExperts;
    const std::int64_t h = spec->hiddenSize;
    const std::int64_t i = spec->moe->expertIntermediate;
    const auto expect = [&](const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
        const auto* t = ckpt->find(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(t->dtype, dtype) << name;
        EXPECT_EQ(t->shape, shape) << name;
    };
    const std::string p = "model.layers.1.mlp.experts.";
    expect(p + "gate_up_proj_blocks", DType::U8, { e, 2 * i, h / 32, 16 });
    expect(p + "gate_up_proj_scales", DType::U8, { e, 2 * i, h / 32 });
    expect(p + "down_proj_blocks", DType::U8, { e, h, i / 32, 16 });
    expect(p + "down_proj_scales", DType::U8, { e, h, i / 32 });
    expect(p + "gate_up_proj_bias", DType::BF16, { e, 2 * i });
    expect(p + "down_proj_bias", DType::BF16, { e, h });
    EXPECT_EQ(ckpt->find(p + "gate_up_proj"), nullptr);
}

TEST_F(ShrinkGptOss, ExpertsDequantiseToTheDrawnWeightsRoundedToE2m1)
{
    auto ckpt = Checkpoint::open(m_dir);
    ASSERT_TRUE(ckpt.ok());
    auto reader = DequantizedWeights::open(*ckpt, m_dir / "config.json");
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    const float stddev = loadConfig(m_dir / "config.json")["initializer_range"].get<float>();
    for (const std::string part : { "gate_up_proj", "down_proj" }) {
        const std::string name = "model.layers.0.mlp.experts." + part;
        SCOPED_TRACE(name);
        const auto* blocks = ckpt->find(name + "_blocks");
        ASSERT_NE(blocks, nullptr);
        const std::int64_t e = blocks->shape[0];
        const std::int64_t rows = blocks->shape[1];
        const std::int64_t cols = blocks->shape[2] * 32;
        // The logical [E, out, in] weights shrink drew, before quantisation.
        const auto x = shrinkNormal(0, name, std::size_t(e * rows * cols), stddev);
        auto read = reader->read(name);
        ASSERT_TRUE(read.ok()) << read.error().message;
        ASSERT_EQ(read->shape, (std::vector<std::int64_t> { e, cols, rows }));
        std::size_t saturated = 0;
        std::size_t differences = 0;
        for (std::int64_t b = 0; b < e * rows * cols / 32; ++b) {
            const auto block = std::span(x).subspan(std::size_t(b * 32), 32);
            const int exponent = refScaleExponent(block);
            for (std::int64_t k = 0; k < 32; ++k) {
                const std::int64_t flat = b * 32 + k;
                const std::int64_t x0 = flat / (rows * cols);
                const std::int64_t r = (flat / cols) % rows;
                const std::int64_t c = flat % cols;
                const float scaled = std::ldexp(block[std::size_t(k)], -exponent);
                saturated += std::fabs(scaled) > 6.0f ? 1 : 0;
                const unsigned code = refCode(scaled);
                const float want = ((code & 8) != 0 ? -1.0f : 1.0f) * kE2m1[code & 7]
                    * float(std::ldexp(1.0, exponent));
                // Stored transposed, [E, in, out], as the BF16 release.
                const float got = read->values[std::size_t((x0 * cols + c) * rows + r)];
                if (got != want && differences++ < 5) {
                    ADD_FAILURE() << "expert " << x0 << " [" << r << ", " << c << "]: " << got
                                  << ", expected " << want << " from " << block[std::size_t(k)];
                }
            }
        }
        EXPECT_EQ(differences, 0u);
        // 2^(⌊log2 amax⌋ − 2) leaves amax/scale in [4, 8): the block maximum saturates at times.
        EXPECT_GT(saturated, 0u);
    }
}

TEST_F(ShrinkGptOss, BiasesAndSinksAreLive)
{
    auto ckpt = Checkpoint::open(m_dir);
    ASSERT_TRUE(ckpt.ok());
    const auto check = [&](const std::string& name, float minSpread) {
        SCOPED_TRACE(name);
        const auto* t = ckpt->find(name);
        ASSERT_NE(t, nullptr);
        auto data = ckpt->data(*t);
        ASSERT_TRUE(data.ok());
        float amax = 0.0f;
        std::size_t zeros = 0;
        const auto n = std::size_t(numel(t->shape));
        for (std::size_t k = 0; k < n; ++k) {
            const float v = valueAt(*t, *data, k);
            zeros += v == 0.0f ? 1 : 0;
            amax = std::max(amax, std::fabs(v));
        }
        EXPECT_LT(zeros, std::max<std::size_t>(1, n / 8)) << "mostly zero";
        EXPECT_GT(amax, minSpread);
    };
    const std::string p = "model.layers.0.";
    check(p + "self_attn.sinks", 0.5f); // N(0, 1): units, not hundredths
    for (const char* proj : { "q_proj", "k_proj", "v_proj", "o_proj" }) {
        check(p + "self_attn." + proj + ".bias", 0.005f);
    }
    check(p + "mlp.router.bias", 0.005f);
    check(p + "mlp.experts.gate_up_proj_bias", 0.005f);
    check(p + "mlp.experts.down_proj_bias", 0.005f);
}

} // namespace
} // namespace day0::checkpoint
