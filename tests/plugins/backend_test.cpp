// The exec::Backend interface: op names, required ops and coverage per model, the CPU reference
// behind it, and opcheck running its target through a backend.
#include "exec/backend.h"
#include "exec/op_check.h"
#include "model/config_reader.h"
#include "numerics/tolerance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace day0::exec {
namespace {

model::ModelSpec bundled(const std::string& name)
{
    auto spec
        = model::readConfigFile(std::string(DAY0_RESOURCE_DIR) + "/configs/" + name + ".json");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    return *spec;
}

std::vector<float> randomFloats(std::size_t n, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = d(rng);
    }
    return v;
}

bool has(const std::vector<std::pair<BackendOp, std::string>>& ops, BackendOp op)
{
    return std::any_of(ops.begin(), ops.end(), [op](const auto& p) { return p.first == op; });
}

TEST(BackendOps, NamesRoundTripAndUnknownNamesAreRejected)
{
    ASSERT_EQ(allBackendOps().size(), 14u);
    for (const BackendOp op : allBackendOps()) {
        const auto back = backendOpFromName(backendOpName(op));
        ASSERT_TRUE(back.has_value()) << backendOpName(op);
        EXPECT_EQ(*back, op);
    }
    EXPECT_FALSE(backendOpFromName("rms_norm ").has_value());
    EXPECT_FALSE(backendOpFromName("").has_value());
}

TEST(BackendOps, RequiredOpsFollowTheArchitecture)
{
    const auto deepseek = requiredOps(bundled("deepseek-v3"));
    EXPECT_TRUE(has(deepseek, BackendOp::AttentionMla));
    EXPECT_FALSE(has(deepseek, BackendOp::AttentionPrefill));
    EXPECT_TRUE(has(deepseek, BackendOp::RouterSigmoid));
    EXPECT_TRUE(has(deepseek, BackendOp::MoePermute));
    EXPECT_TRUE(has(deepseek, BackendOp::Fp8BlockDequant));

    const auto qwen = requiredOps(bundled("qwen3-8b"));
    EXPECT_TRUE(has(qwen, BackendOp::AttentionPrefill));
    EXPECT_TRUE(has(qwen, BackendOp::AttentionDecode));
    EXPECT_FALSE(has(qwen, BackendOp::AttentionMla));
    EXPECT_FALSE(has(qwen, BackendOp::MoePermute));
    EXPECT_FALSE(has(qwen, BackendOp::Fp8BlockDequant));

    const auto mixtral = requiredOps(bundled("mixtral-8x7b"));
    EXPECT_TRUE(has(mixtral, BackendOp::RouterSoftmax));
    EXPECT_FALSE(has(mixtral, BackendOp::RouterSigmoid));

    auto vlSpec = bundled("qwen3-8b");
    vlSpec.ropeScaling.mropeSection = { 24, 20, 20 }; // as Qwen2/3-VL text configs give it
    const auto vl = requiredOps(vlSpec);
    EXPECT_TRUE(has(vl, BackendOp::RopeMulti));
    EXPECT_FALSE(has(vl, BackendOp::Rope));
}

TEST(BackendOps, CoverageFromADeclaredSetMarksTheRestAsFallback)
{
    const auto spec = bundled("qwen3-8b");
    const std::vector<BackendOp> native { BackendOp::Linear, BackendOp::RmsNorm };
    const auto rows = backendCoverage(spec, native);
    ASSERT_EQ(rows.size(), requiredOps(spec).size());
    int nativeCount = 0;
    for (const auto& r : rows) {
        const bool expected = r.op == BackendOp::Linear || r.op == BackendOp::RmsNorm;
        EXPECT_EQ(r.native, expected) << backendOpName(r.op);
        EXPECT_EQ(r.implementation, expected ? "native" : "fallback: day0-cpu");
        nativeCount += r.native ? 1 : 0;
    }
    EXPECT_EQ(nativeCount, 2);
}

TEST(CpuBackend, FusedResidualNormEqualsAddThenNorm)
{
    auto cpu = makeCpuBackend();
    const std::int64_t rows = 3;
    const std::int64_t dim = 64;
    const auto x = randomFloats(rows * dim, 1);
    const auto r = randomFloats(rows * dim, 2);
    const auto w = randomFloats(dim, 3);
    std::vector<float> y(x.size());
    std::vector<float> sum(x.size());
    ASSERT_TRUE(cpu->rmsNorm(x.data(), r.data(), w.data(), y.data(), sum.data(), rows, dim, 1e-6,
                       PrecisionMode::F32)
                    .ok());
    std::vector<float> expectSum = x;
    addInPlace<float>(expectSum.data(), r.data(), rows * dim);
    std::vector<float> expect(x.size());
    rmsNorm<float>(expectSum.data(), w.data(), expect.data(), rows, dim, 1e-6);
    for (std::size_t i = 0; i < x.size(); ++i) {
        EXPECT_FLOAT_EQ(sum[i], expectSum[i]);
        EXPECT_FLOAT_EQ(y[i], expect[i]);
    }
}

TEST(CpuBackend, PermutationGroupsTokensByExpertInTokenOrder)
{
    auto cpu = makeCpuBackend();
    Routing routing;
    routing.tokens = 3;
    routing.k = 2;
    routing.experts = { 2, 0, 0, 1, 2, 1 };
    routing.weights = { 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 };
    const std::vector<float> x = { 10, 11, 20, 21, 30, 31 }; // [3 tokens, 2]
    std::vector<float> permuted(12);
    std::vector<std::int64_t> offsets;
    std::vector<std::int64_t> source;
    ASSERT_TRUE(
        cpu->permuteTokens(x.data(), 3, 2, routing, 4, permuted.data(), offsets, source).ok());
    EXPECT_EQ(offsets, (std::vector<std::int64_t> { 0, 2, 4, 6, 6 }));
    EXPECT_EQ(source, (std::vector<std::int64_t> { 0, 1, 1, 2, 0, 2 }));
    EXPECT_EQ(permuted, (std::vector<float> { 10, 11, 20, 21, 20, 21, 30, 31, 10, 11, 30, 31 }));

    routing.experts[3] = 7;
    const auto bad
        = cpu->permuteTokens(x.data(), 3, 2, routing, 4, permuted.data(), offsets, source);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("expert 7"), std::string::npos);
}

TEST(CpuBackend, BlockFp8DequantisationAppliesEachBlocksScale)
{
    auto cpu = makeCpuBackend();
    // e4m3: 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0; 3×3 with 2×2 blocks → 2×2 scales.
    const std::vector<std::uint8_t> bytes
        = { 0x38, 0x40, 0x38, 0xC0, 0x38, 0x40, 0x38, 0x38, 0x40 };
    const std::vector<float> scales = { 0.5f, 4.0f, 10.0f, 100.0f };
    std::vector<float> out(9);
    ASSERT_TRUE(cpu->dequantFp8Block(bytes.data(), scales.data(), 3, 3, 2, out.data()).ok());
    EXPECT_EQ(
        out, (std::vector<float> { 0.5f, 1.0f, 4.0f, -1.0f, 0.5f, 8.0f, 10.0f, 10.0f, 200.0f }));
}

TEST(CpuBackend, RoutingMatchesTheReferenceRouter)
{
    auto cpu = makeCpuBackend();
    RouterConfig config;
    config.scoring = model::RouterScoring::Sigmoid;
    config.numExperts = 16;
    config.topK = 4;
    config.numGroups = 4;
    config.topkGroup = 2;
    config.normTopkProb = true;
    config.routedScalingFactor = 2.5;
    const auto logits = randomFloats(5 * 16, 9);
    const auto bias = randomFloats(16, 10);
    const auto got = cpu->route(logits.data(), 5, config, bias.data());
    ASSERT_TRUE(got.ok());
    const std::vector<double> ld(logits.begin(), logits.end());
    const std::vector<double> bd(bias.begin(), bias.end());
    const Routing expect = route(ld.data(), 5, config, bd.data());
    EXPECT_EQ(got->experts, expect.experts);
    EXPECT_EQ(got->weights, expect.weights);
}

/// A backend that implements only the GEMM (through the CPU reference), as a new vendor's
/// first plugin would.
class GemmOnlyBackend final : public Backend {
public:
    std::string name() const override { return "gemm-only"; }
    std::string device() const override { return "test device"; }
    bool supports(BackendOp op) const override { return op == BackendOp::Linear; }
    Result<void> linear(const float* x, const float* w, float* y, std::int64_t rows,
        std::int64_t in, std::int64_t out, PrecisionMode mode, Fp8Scaling scaling) override
    {
        ++calls;
        return m_cpu->linear(x, w, y, rows, in, out, mode, scaling);
    }
    int calls = 0;

private:
    std::unique_ptr<Backend> m_cpu = makeCpuBackend();
};

TEST(OpCheckOnBackend, RowsNameTheBackendOrTheFallbackAndCoverageIsReported)
{
    const auto spec = bundled("qwen3-8b");
    auto table = numerics::resolveToleranceTable(
        std::string(DAY0_RESOURCE_DIR) + "/tolerances/day0-default-v1.json");
    ASSERT_TRUE(table.ok()) << table.error().message;
    GemmOnlyBackend backend;
    OpCheckOptions o;
    o.target = *parsePrecisionPlan("bf16");
    o.tokens = 4;
    o.maxOutputs = 256;
    o.table = &*table;
    o.backend = &backend;
    Progress progress;
    const auto report = runOpCheck(spec, o, progress, {});
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->backend, "gemm-only");
    EXPECT_EQ(report->device, "test device");
    EXPECT_GT(backend.calls, 3);
    bool sawFused = false;
    for (const auto& row : report->rows) {
        if (row.op.starts_with("linear ")) {
            EXPECT_EQ(row.implementation, "native") << row.op;
        } else {
            EXPECT_EQ(row.implementation, "fallback: day0-cpu") << row.op;
        }
        sawFused = sawFused || row.op == "rms_norm + residual add";
        EXPECT_NE(row.verdict.status, numerics::VerdictStatus::Fail) << row.op;
    }
    EXPECT_TRUE(sawFused);
    ASSERT_FALSE(report->coverage.empty());
    const auto json = opCheckToJson(*report);
    EXPECT_EQ(json["backends"][0]["name"], "gemm-only");
    EXPECT_EQ(json["backends"][0]["coverage"].size(), report->coverage.size());
}

/// A backend whose kernel fails: opcheck stops with its error instead of reporting numbers.
class FailingBackend final : public Backend {
public:
    std::string name() const override { return "failing"; }
    std::string device() const override { return "broken device"; }
    bool supports(BackendOp op) const override { return op == BackendOp::RmsNorm; }
    Result<void> rmsNorm(const float*, const float*, const float*, float*, float*, std::int64_t,
        std::int64_t, double, PrecisionMode) override
    {
        return Error::internal("failing: rmsNorm kernel failed: an illegal memory access");
    }
};

TEST(OpCheckOnBackend, ABackendErrorStopsTheCheck)
{
    const auto spec = bundled("qwen3-8b");
    auto table = numerics::resolveToleranceTable(
        std::string(DAY0_RESOURCE_DIR) + "/tolerances/day0-default-v1.json");
    ASSERT_TRUE(table.ok());
    FailingBackend backend;
    OpCheckOptions o;
    o.target = *parsePrecisionPlan("bf16");
    o.tokens = 2;
    o.maxOutputs = 64;
    o.table = &*table;
    o.backend = &backend;
    Progress progress;
    const auto report = runOpCheck(spec, o, progress, {});
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.error().message.find("illegal memory access"), std::string::npos);
}

} // namespace
} // namespace day0::exec
