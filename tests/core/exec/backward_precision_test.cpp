// The backward pass in emulated bf16 (exec/backward.h GradientOptions::emulated): the forward
// is the engine's emulated bf16 forward, the gradients differ from the fp64 reference by what
// bf16 rounding explains (not zero, not garbage), and what it does not model is refused.
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "numerics/float_formats.h"
#include "tiny_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace day0 {
namespace {

using exec::PrecisionMode;
using numerics::Tensor;

/// ‖ours − theirs‖₂ / ‖theirs‖₂ over one tensor.
double relativeL2(const Tensor& theirs, const Tensor& ours)
{
    const auto r = theirs.toDoubles();
    const auto t = ours.toDoubles();
    double diff = 0.0;
    double norm = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        diff += (t[i] - r[i]) * (t[i] - r[i]);
        norm += r[i] * r[i];
    }
    return norm == 0.0 ? (diff == 0.0 ? 0.0 : 1.0) : std::sqrt(diff / norm);
}

/// The spread of the per-parameter relative errors of `ours` against `reference`.
struct Spread {
    double smallest = 1.0;
    double largest = 0.0;
    double median = 0.0;
};

Spread spreadOf(const exec::GradientResult& reference, const exec::GradientResult& ours)
{
    std::vector<double> errors;
    for (const auto& [name, g] : reference.parameters) {
        errors.push_back(relativeL2(g, ours.parameters.at(name)));
    }
    std::sort(errors.begin(), errors.end());
    return { errors.front(), errors.back(), errors[errors.size() / 2] };
}

exec::GradientResult passOf(const test::TinyModel& m, const std::vector<std::int64_t>& ids,
    bool fp64, PrecisionMode emulated)
{
    exec::GradientOptions o;
    o.fp64 = fp64;
    o.emulated = emulated;
    auto r = exec::lossAndGradients(m.spec, m.weights, ids, exec::nextTokenTargets(ids), o, {});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(*r) : exec::GradientResult {};
}

TEST(BackwardBf16, GradientsDifferFromFp64ByBf16SizedErrors)
{
    const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7, 250, 128, 64, 5, 31 };
    // Llama (GQA, llama3 RoPE, untied head), Qwen2 (q/k/v biases).
    for (const auto& m : { test::tinyLlama(), test::tinyQwen2() }) {
        SCOPED_TRACE(m.spec.modelType);
        const auto wide = passOf(m, ids, true, PrecisionMode::F32);
        const auto fp32 = passOf(m, ids, false, PrecisionMode::F32);
        const auto bf16 = passOf(m, ids, false, PrecisionMode::BF16);
        ASSERT_EQ(bf16.parameters.size(), wide.parameters.size());
        EXPECT_EQ(bf16.parameters.begin()->second.dtype(), DType::F32);
        const Spread f = spreadOf(wide, fp32);
        const Spread b = spreadOf(wide, bf16);
        std::printf("%s against fp64, per-parameter relative L2 error: fp32 %.1e..%.1e, bf16 "
                    "%.1e..%.1e (median %.1e); loss fp64 %.6f, bf16 %.6f\n",
            m.spec.modelType.c_str(), f.smallest, f.largest, b.smallest, b.largest, b.median,
            wide.loss, bf16.loss);
        // bf16 keeps 8 significant bits (a unit roundoff of 2^-9 ≈ 2e-3): every gradient moves
        // by errors of that size, far above fp32's, and none is garbage.
        EXPECT_LE(f.largest, 1e-4);
        EXPECT_GE(b.smallest, 1e-4);
        EXPECT_GE(b.median, 1e-3);
        EXPECT_LE(b.largest, 5e-2);
        EXPECT_NE(bf16.loss, wide.loss);
        EXPECT_NEAR(bf16.loss, wide.loss, 1e-2 * wide.loss);
    }
}

/// The pass's bf16 logits against the engine's bf16 run of the same checkpoint.
void expectTheEnginesBf16Forward(const test::TinyModel& m)
{
    const auto dir = std::filesystem::temp_directory_path()
        / ("day0_backward_bf16_forward_" + m.spec.modelType);
    std::filesystem::remove_all(dir);
    test::writeCheckpoint(m, dir);
    const auto weights = exec::openCheckpointWeights(dir);
    ASSERT_TRUE(weights.ok());
    Progress p;
    auto engine = exec::Engine::create(m.spec, **weights, false, p, {});
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7, 250, 128 };
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("bf16");
    o.promptIds = ids;
    o.newTokens = 1;
    const auto run = engine->run(o, p, {});
    ASSERT_TRUE(run.ok()) << run.error().message;
    const Tensor& engineLogits = *run->dump.tensor("lm_head");
    const auto bf16 = passOf(m, ids, false, PrecisionMode::BF16);
    const auto fp32 = passOf(m, ids, false, PrecisionMode::F32);
    const double toBf16 = relativeL2(engineLogits, bf16.logits);
    const double toFp32 = relativeL2(engineLogits, fp32.logits);
    std::printf("engine bf16 logits against the pass's: bf16 %.2e, fp32 %.2e (relative L2)\n",
        toBf16, toFp32);
    EXPECT_LT(toBf16, 1e-3);
    EXPECT_GT(toFp32, 1e-3);
    // Every logit is a bf16 value.
    for (const double v : bf16.logits.toDoubles()) {
        ASSERT_EQ(float(v), numerics::roundToFormat(float(v), DType::BF16));
    }
}

TEST(BackwardBf16, TheForwardIsTheEnginesEmulatedBf16Forward)
{
    // The pass reuses the engine's emulated kernels (exec/emulated_ops.h) at the engine's op
    // boundaries: its logits are the engine's bf16 run's (bit for bit when measured; the bound
    // leaves room for the attention's summation order), while the fp32 forward's are a
    // bf16-sized distance away.
    for (const auto& m : { test::tinyLlama(), test::tinyQwen3Moe() }) {
        SCOPED_TRACE(m.spec.modelType);
        expectTheEnginesBf16Forward(m);
    }
}

TEST(BackwardBf16, Qwen3MoeGradientsDifferFromFp64ByBf16SizedErrors)
{
    // The router, the norms, attention and every expert that receives a token in both passes:
    // bf16-sized errors. Experts no token reaches stay zero in both.
    const auto m = test::tinyQwen3Moe();
    const std::vector<std::int64_t> ids { 3, 17, 42, 99, 7, 250, 128, 64, 5, 31 };
    const auto wide = passOf(m, ids, true, PrecisionMode::F32);
    const auto bf16 = passOf(m, ids, false, PrecisionMode::BF16);
    ASSERT_EQ(bf16.parameters.size(), wide.parameters.size());
    std::vector<double> errors;
    int idle = 0;
    for (const auto& [name, g] : wide.parameters) {
        const double e = relativeL2(g, bf16.parameters.at(name));
        const auto values = g.toDoubles();
        if (std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0; })) {
            EXPECT_EQ(e, 0.0) << name; // idle in both passes
            ++idle;
            continue;
        }
        errors.push_back(e);
    }
    std::sort(errors.begin(), errors.end());
    std::printf("qwen3_moe bf16 against fp64: %zu parameter gradients %.1e..%.1e (median %.1e), "
                "%d idle expert weights; loss fp64 %.6f, bf16 %.6f\n",
        errors.size(), errors.front(), errors.back(), errors[errors.size() / 2], idle, wide.loss,
        bf16.loss);
    EXPECT_GE(errors.front(), 1e-4);
    EXPECT_GE(errors[errors.size() / 2], 1e-3);
    EXPECT_LE(errors.back(), 5e-2);
    EXPECT_GT(idle, 0);
}

TEST(BackwardBf16, RefusesWhatItDoesNotModelByName)
{
    const std::vector<std::int64_t> ids { 1, 2, 3 };
    const auto targets = exec::nextTokenTargets(ids);
    exec::GradientOptions o;
    o.emulated = PrecisionMode::BF16;
    const auto llama = test::tinyLlama();
    const auto fp64 = exec::lossAndGradients(llama.spec, llama.weights, ids, targets, o, {});
    ASSERT_FALSE(fp64.ok());
    EXPECT_EQ(fp64.error().code, ErrorCode::BadInput);
    EXPECT_NE(fp64.error().message.find("computes in float"), std::string::npos)
        << fp64.error().message;
    o.fp64 = false;
    const auto deepseek = test::tinyDeepseekV3();
    const auto mla = exec::lossAndGradients(deepseek.spec, deepseek.weights, ids, targets, o, {});
    ASSERT_FALSE(mla.ok());
    EXPECT_EQ(mla.error().code, ErrorCode::Unsupported);
    EXPECT_NE(mla.error().message.find("in bf16: the emulated backward does not cover "
                                       "multi-head latent attention"),
        std::string::npos)
        << mla.error().message;
    o.emulated = PrecisionMode::F8E4M3;
    const auto fp8 = exec::lossAndGradients(llama.spec, llama.weights, ids, targets, o, {});
    ASSERT_FALSE(fp8.ok());
    EXPECT_EQ(fp8.error().code, ErrorCode::Unsupported);
    EXPECT_NE(fp8.error().message.find("fp8"), std::string::npos) << fp8.error().message;
}

} // namespace
} // namespace day0
