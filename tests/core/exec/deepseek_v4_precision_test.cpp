// DeepSeek-V4's emulated precisions on the engine (deepseek_v4_forward.cpp): each format drifts
// from fp32 by what its rounding costs, and an MXFP4 run equals a bf16 run on weights quantised
// here by hand from the OCP MX definition, bit for bit — which fails as soon as any one of the
// quantised projections is left out on either side.
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

using namespace day0;

namespace {

const std::vector<std::int64_t> kPrompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 120, 77, 31, 200 };

/// The shrunk deepseek-v4-flash, unquantised (plain f32 weights), in `dir`/ckpt.
void shrinkUnquantised(const std::filesystem::path& dir)
{
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "config");
    std::ifstream in(
        std::filesystem::path(DAY0_RESOURCE_DIR) / "configs" / "deepseek-v4-flash.json");
    auto config = nlohmann::ordered_json::parse(in);
    config.erase("quantization_config");
    config.erase("expert_dtype");
    std::ofstream(dir / "config" / "config.json") << config.dump(2);
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(
        (dir / "config" / "config.json").string(), dir / "ckpt", {}, p, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
}

/// E2M1's magnitudes (OCP MX v1.0: 1 sign, 2 exponent, 1 mantissa bit; no inf or NaN).
constexpr double kE2m1[8] = { 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0 };

/// `v` to the nearest E2M1 value, ties to the even code, saturating at ±6.
double toE2m1(double v)
{
    const double a = std::fabs(v);
    int best = 0;
    for (int c = 1; c < 8; ++c) {
        const double d = std::fabs(a - kE2m1[c]);
        const double bestD = std::fabs(a - kE2m1[best]);
        if (d < bestD || (d == bestD && c % 2 == 0)) {
            best = c;
        }
    }
    return std::copysign(kE2m1[best], v);
}

/// MXFP4 by its definition: each 32 values along a row share the scale 2^(floor(log2 amax) − 2)
/// (E2M1's largest exponent is 2), each value / scale rounded to E2M1.
std::vector<double> mxfp4ByHand(const std::vector<double>& w, std::int64_t rows, std::int64_t cols)
{
    std::vector<double> out(w.size());
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k0 = 0; k0 < cols; k0 += 32) {
            const std::int64_t k1 = std::min(cols, k0 + 32);
            double amax = 0.0;
            for (std::int64_t k = k0; k < k1; ++k) {
                amax = std::max(amax, std::fabs(w[std::size_t(r * cols + k)]));
            }
            const double scale
                = amax == 0.0 ? 1.0 : std::ldexp(1.0, int(std::floor(std::log2(amax))) - 2);
            for (std::int64_t k = k0; k < k1; ++k) {
                const auto i = std::size_t(r * cols + k);
                out[i] = toE2m1(w[i] / scale) * scale;
            }
        }
    }
    return out;
}

/// The projections the engine quantises (deepseek_v4_forward.cpp), by family.
const std::vector<std::string> kProjections { "attn.wq_a", "attn.wq_b", "attn.wkv", "attn.wo_a",
    "attn.wo_b", "ffn.experts", "ffn.shared_experts" };

/// The projection family of weight `name` ("" when it is not a quantised projection).
std::string projectionOf(const std::string& name)
{
    static const std::regex re(
        R"(^layers\.\d+\.(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|ffn\.(experts)\.\d+\.(w1|w2|w3)|ffn\.(shared_experts)\.(w1|w2|w3))\.weight$)");
    std::smatch m;
    if (!std::regex_match(name, m, re)) {
        return {};
    }
    if (m[3].matched) {
        return "ffn.experts";
    }
    if (m[5].matched) {
        return "ffn.shared_experts";
    }
    return m[1].str();
}

struct Loaded {
    model::ModelSpec spec;
    std::map<std::string, numerics::Tensor> weights;
};

Loaded loadWeights(const std::filesystem::path& ckpt)
{
    Loaded out;
    const auto spec = exec::loadCheckpointModel(ckpt);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    out.spec = *spec;
    const auto source = exec::openCheckpointWeights(ckpt);
    EXPECT_TRUE(source.ok()) << source.error().message;
    for (const auto& req : exec::detail::requiredWeights(out.spec)) {
        bool exact = false;
        auto t = exec::detail::loadForwardWeight(**source, req, out.spec, DType::F32, exact);
        EXPECT_TRUE(t.ok()) << t.error().message;
        out.weights.emplace(req.name, std::move(*t));
    }
    return out;
}

/// lm_head of a run in `precision` on `weights`, the tokens forced to `forced` when given.
std::vector<double> logitsOf(const Loaded& m, std::map<std::string, numerics::Tensor> weights,
    const exec::PrecisionPlan& plan, const std::vector<std::int64_t>& forced,
    std::vector<std::int64_t>* generated = nullptr)
{
    Progress p;
    const exec::MemoryWeights memory(std::move(weights));
    auto engine = exec::Engine::create(m.spec, memory, plan.isF64(), p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.precision = plan;
    o.promptIds = kPrompt;
    o.newTokens = 3;
    o.forcedTokens = forced;
    o.capture.filters = { "lm_head" };
    auto run = engine->run(o, p, {});
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (!run.ok()) {
        return {};
    }
    if (generated != nullptr) {
        *generated = run->generated;
    }
    return run->dump.tensor("lm_head")->toDoubles();
}

double relL2(const std::vector<double>& a, const std::vector<double>& b)
{
    double num = 0.0;
    double den = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return std::sqrt(num / den);
}

} // namespace

TEST(DeepseekV4Precision, EachFormatDriftsFromFp32AsItsRounding)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_deepseek_v4_precisions";
    shrinkUnquantised(dir);
    const Loaded m = loadWeights(dir / "ckpt");
    std::vector<std::int64_t> generated;
    const auto ref = logitsOf(m, m.weights, *exec::parsePrecisionPlan("fp32"), {}, &generated);
    ASSERT_FALSE(ref.empty());
    const std::vector<std::int64_t> forced(generated.begin(), generated.end() - 1);
    struct Expect {
        const char* precision;
        exec::Fp8Scaling scaling;
        double low;
        double high;
    };
    std::map<std::string, double> drift;
    // Measured: bf16 5.7e-3, fp8 (block) 5.6e-2, nvfp4 0.19, mxfp4 0.16, int4 (g128) 0.14.
    for (const Expect x : { Expect { "bf16", exec::Fp8Scaling::PerTensor, 1e-3, 2e-2 },
             Expect { "fp8", exec::Fp8Scaling::Block, 1e-2, 0.15 },
             Expect { "nvfp4", exec::Fp8Scaling::PerTensor, 5e-2, 0.5 },
             Expect { "mxfp4", exec::Fp8Scaling::PerTensor, 5e-2, 0.5 },
             Expect { "int4", exec::Fp8Scaling::PerTensor, 3e-2, 0.5 } }) {
        SCOPED_TRACE(x.precision);
        auto plan = *exec::parsePrecisionPlan(x.precision);
        plan.fp8Scaling = x.scaling;
        const auto t = logitsOf(m, m.weights, plan, forced);
        ASSERT_EQ(t.size(), ref.size());
        for (const double v : t) {
            ASSERT_TRUE(std::isfinite(v));
        }
        drift[x.precision] = relL2(t, ref);
        EXPECT_GT(drift[x.precision], x.low);
        EXPECT_LT(drift[x.precision], x.high);
    }
    std::printf("deepseek_v4 logits rel L2 against fp32: bf16 %.2e, fp8 (block) %.2e, nvfp4 %.2e, "
                "mxfp4 %.2e, int4 %.2e\n",
        drift["bf16"], drift["fp8"], drift["nvfp4"], drift["mxfp4"], drift["int4"]);
    // bf16 rounds least, fp8's 3 mantissa bits more, the 4-bit formats most.
    EXPECT_LT(drift["bf16"], drift["fp8"]);
    EXPECT_LT(drift["fp8"], drift["nvfp4"]);
    EXPECT_LT(drift["fp8"], drift["mxfp4"]);
    std::filesystem::remove_all(dir);
}

TEST(DeepseekV4Precision, Mxfp4RunEqualsBf16OnHandQuantisedProjections)
{
    // MXFP4 is W4A16: its run rounds the GEMM inputs and everything else as bf16 does, so it
    // equals a bf16 run whose projection weights were quantised here by hand (MXFP4 values are
    // bf16 values). Leaving any one projection family unquantised on the hand side shows the
    // engine quantises each of them; quantising the indexer's or compressors' projections too
    // shows the engine keeps those unquantised.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_deepseek_v4_mxfp4_hand";
    shrinkUnquantised(dir);
    const Loaded m = loadWeights(dir / "ckpt");
    std::vector<std::int64_t> generated;
    const auto mx = logitsOf(m, m.weights, *exec::parsePrecisionPlan("mxfp4"), {}, &generated);
    ASSERT_FALSE(mx.empty());
    const std::vector<std::int64_t> forced(generated.begin(), generated.end() - 1);
    const auto quantised = [&](const std::string& skip, const std::string& extra) {
        std::map<std::string, numerics::Tensor> w;
        int changed = 0;
        for (const auto& [name, t] : m.weights) {
            const std::string family = projectionOf(name);
            const bool quantise = (!family.empty() && family != skip)
                || (!extra.empty() && name.find(extra) != std::string::npos);
            if (!quantise) {
                w.emplace(name, t);
                continue;
            }
            const std::int64_t rows = t.shape()[0];
            const auto q = mxfp4ByHand(t.toDoubles(), rows, t.numel() / rows);
            changed += q != t.toDoubles() ? 1 : 0;
            w.emplace(name, numerics::Tensor::fromDoubles(t.shape(), q).to(DType::F32));
        }
        EXPECT_GT(changed, 0);
        return w;
    };
    const auto bf16 = *exec::parsePrecisionPlan("bf16");
    const auto hand = logitsOf(m, quantised("", ""), bf16, forced);
    ASSERT_EQ(hand.size(), mx.size());
    EXPECT_EQ(hand, mx) << "rel L2 " << relL2(hand, mx);
    for (const auto& skip : kProjections) {
        SCOPED_TRACE("hand side without " + skip);
        const auto without = logitsOf(m, quantised(skip, ""), bf16, forced);
        EXPECT_NE(without, mx);
    }
    for (const std::string extra : { "indexer.wq_b", "compressor.wkv" }) {
        SCOPED_TRACE("hand side also quantising " + extra);
        const auto more = logitsOf(m, quantised("", extra), bf16, forced);
        EXPECT_NE(more, mx);
    }
    std::filesystem::remove_all(dir);
}

TEST(DeepseekV4Precision, RouterOverrideIsRefusedByName)
{
    // The router stays in fp32 under every plan (as DeepSeek-V3's): asking for it in another
    // precision is refused, named, rather than silently ignored.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_deepseek_v4_router_override";
    shrinkUnquantised(dir);
    const Loaded m = loadWeights(dir / "ckpt");
    Progress p;
    const exec::MemoryWeights memory(m.weights);
    auto engine = exec::Engine::create(m.spec, memory, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    exec::RunOptions o;
    o.promptIds = { 5, 17, 42 };
    o.newTokens = 1;
    o.precision = *exec::parsePrecisionPlan("bf16", "router=bf16");
    const auto r = engine->run(o, p, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("router=bf16 on deepseek_v4"), std::string::npos)
        << r.error().message;
    o.precision = *exec::parsePrecisionPlan("nvfp4", "attention=fp32", "1=fp32");
    EXPECT_TRUE(engine->run(o, p, {}).ok());
    std::filesystem::remove_all(dir);
}
