// The engine's forward pass on a compute backend (exec::Backend): every float operator goes to
// the backend, operators it declines fall back to the CPU reference and are counted, and a
// failing backend stops the run naming itself and the operator.
#include "base/resources.h"
#include "exec/backend.h"
#include "exec/engine.h"
#include "exec/precision_run.h"
#include "numerics/dump_compare.h"
#include "scripted_backend.h"
#include "tiny_models.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::exec;
using day0::exec::testing::ScriptedBackend;

namespace {

const std::vector<std::int64_t> kPrompt { 3, 17, 42, 99, 7 };

Result<RunResult> runOn(
    const test::TinyModel& m, const std::string& precision, Backend* backend, bool fp64 = false)
{
    MemoryWeights w(m.weights);
    Progress p;
    auto e = Engine::create(m.spec, w, fp64, p, {});
    if (!e) {
        return e.error();
    }
    RunOptions o;
    o.precision = *parsePrecisionPlan(precision);
    o.promptIds = kPrompt;
    o.newTokens = 3;
    o.backend = backend;
    return e->run(o, p, {});
}

/// Every capture of `a` equals `b`'s bit for bit.
void expectIdentical(const RunResult& a, const RunResult& b)
{
    EXPECT_EQ(a.generated, b.generated);
    ASSERT_EQ(a.dump.captures().size(), b.dump.captures().size());
    for (const auto& c : a.dump.captures()) {
        const auto* x = a.dump.tensor(c.name);
        const auto* y = b.dump.tensor(c.name);
        ASSERT_NE(x, nullptr) << c.name;
        ASSERT_NE(y, nullptr) << c.name;
        EXPECT_EQ(numerics::compareTensors(*x, *y)->relL2, 0.0) << c.name;
    }
}

const DispatchRow* row(const DispatchReport& r, BackendOp op)
{
    for (const auto& x : r.ops) {
        if (x.op == op) {
            return &x;
        }
    }
    return nullptr;
}

std::vector<test::TinyModel> allModels()
{
    return { test::tinyLlama(), test::tinyQwen2(), test::tinyMixtral(), test::tinyQwen3Moe(),
        test::tinyDeepseekV3() };
}

} // namespace

TEST(EngineBackend, EveryOperatorRunsOnTheBackendAndMatchesTheCpuPathBitForBit)
{
    for (const auto& m : allModels()) {
        // Qwen2's biased projections add the bias after the backend's GEMM, a second rounding
        // in bf16, so that model is compared in fp32 only.
        const bool biased = m.spec.attentionBias;
        for (const std::string precision : { "fp32", "bf16" }) {
            if (biased && precision == "bf16") {
                continue;
            }
            SCOPED_TRACE(m.spec.modelType + " " + precision);
            auto cpu = runOn(m, precision, nullptr);
            ScriptedBackend backend;
            auto dispatched = runOn(m, precision, &backend);
            ASSERT_TRUE(cpu.ok()) << cpu.error().message;
            ASSERT_TRUE(dispatched.ok()) << dispatched.error().message;
            expectIdentical(*cpu, *dispatched);
            const DispatchReport& report = dispatched->dispatch;
            EXPECT_EQ(report.backend, "scripted");
            EXPECT_EQ(dispatched->dump.info.backend, "scripted");
            EXPECT_EQ(cpu->dump.info.backend, "day0-cpu");
            EXPECT_TRUE(cpu->dispatch.ops.empty());
            for (const auto& r : report.ops) {
                EXPECT_EQ(r.fallbackCalls, 0) << backendOpName(r.op);
                EXPECT_GT(r.nativeCalls, 0);
                EXPECT_EQ(r.nativeCalls, backend.calls[r.op]) << backendOpName(r.op);
            }
            // Every operator the model needs was used, except the load-time dequantisation.
            for (const auto& [op, use] : requiredOps(m.spec)) {
                EXPECT_NE(row(report, op), nullptr) << backendOpName(op) << " (" << use << ")";
            }
            // 2 layers: q,k,v,o (or the MLA projections), MLPs/experts, lm_head; 3 steps.
            const auto* linear = row(report, BackendOp::Linear);
            ASSERT_NE(linear, nullptr);
            EXPECT_EQ(linear->implementation, "scripted linear");
            EXPECT_EQ(row(report, BackendOp::RmsNormResidual)->nativeCalls, 3 * m.spec.numLayers);
            EXPECT_EQ(row(report, BackendOp::Embedding)->nativeCalls, 3);
            EXPECT_EQ(row(report, BackendOp::AttentionDecode)
                    ? row(report, BackendOp::AttentionDecode)->nativeCalls
                    : row(report, BackendOp::AttentionMla)->nativeCalls,
                m.spec.attention == model::AttentionKind::MLA ? 3 * m.spec.numLayers
                                                              : 2 * m.spec.numLayers);
            EXPECT_EQ(report.notes.empty(), !biased);
            // The forward pass that owned the rounded weights released them when it ended.
            EXPECT_EQ(backend.releases, 1);
        }
    }
}

TEST(EngineBackend, DeclinedAndUndeclaredOperatorsFallBackToTheCpuAndSaySo)
{
    const auto m = test::tinyDeepseekV3();
    auto cpu = runOn(m, "bf16", nullptr);
    ASSERT_TRUE(cpu.ok());
    ScriptedBackend backend({ BackendOp::AttentionMla, BackendOp::RouterSigmoid }, std::nullopt,
        { BackendOp::Rope, BackendOp::MoePermute });
    auto r = runOn(m, "bf16", &backend);
    ASSERT_TRUE(r.ok()) << r.error().message;
    expectIdentical(*cpu, *r);
    const auto* mla = row(r->dispatch, BackendOp::AttentionMla);
    ASSERT_NE(mla, nullptr);
    EXPECT_EQ(mla->nativeCalls, 0);
    EXPECT_EQ(mla->fallbackCalls, 3 * m.spec.numLayers);
    EXPECT_EQ(mla->fallbackReason, "scripted declines attention_mla");
    // An operator the backend does not declare is never offered to it.
    const auto* rope = row(r->dispatch, BackendOp::Rope);
    ASSERT_NE(rope, nullptr);
    EXPECT_EQ(backend.calls[BackendOp::Rope], 0);
    EXPECT_EQ(rope->fallbackReason, "not implemented by scripted");
    EXPECT_GT(rope->fallbackCalls, 0);
    EXPECT_EQ(
        row(r->dispatch, BackendOp::MoePermute)->fallbackReason, "not implemented by scripted");
    EXPECT_EQ(row(r->dispatch, BackendOp::Linear)->fallbackCalls, 0);
    const auto text = formatDispatch(r->dispatch);
    EXPECT_NE(text.find("attention_mla"), std::string::npos) << text;
    EXPECT_NE(text.find("scripted declines attention_mla"), std::string::npos) << text;
    const auto json = dispatchJson(r->dispatch);
    EXPECT_EQ(json["backend"], "scripted");
    EXPECT_EQ(json["device"], "test device");
    EXPECT_FALSE(json["ops"].empty());
}

TEST(EngineBackend, AFailingBackendStopsTheRunNamingItAndTheOperator)
{
    const auto m = test::tinyLlama();
    ScriptedBackend backend({}, BackendOp::GatedActivation);
    auto r = runOn(m, "fp32", &backend);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Internal);
    EXPECT_EQ(r.error().message, "backend scripted: gated_activation: device lost");
    // It stopped at the end of the first layer, not after the whole run.
    EXPECT_EQ(backend.calls[BackendOp::GatedActivation], 1);
}

TEST(EngineBackend, TheFp64ReferenceRefusesABackend)
{
    const auto m = test::tinyLlama();
    ScriptedBackend backend;
    auto r = runOn(m, "fp64", &backend, true);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_NE(r.error().message.find("fp64 reference runs on day0-cpu only"), std::string::npos)
        << r.error().message;
}

namespace {

/// A device backend with one structural fault: its RMSNorm adds ten times the model's epsilon
/// (a kernel that reads the wrong config field). Every other operator falls back to the CPU.
class TenfoldEpsilonBackend final : public Backend {
public:
    std::string name() const override { return "eps10"; }
    std::string device() const override { return "test device"; }
    bool supports(BackendOp op) const override { return op == BackendOp::RmsNorm; }
    Result<void> rmsNorm(const float* x, const float* residual, const float* w, float* y,
        float* residualOut, std::int64_t rows, std::int64_t dim, double eps,
        PrecisionMode mode) override
    {
        if (residual != nullptr) {
            return Backend::rmsNorm(x, residual, w, y, residualOut, rows, dim, eps, mode);
        }
        return m_cpu->rmsNorm(x, residual, w, y, residualOut, rows, dim, eps * 10.0, mode);
    }

private:
    std::unique_ptr<Backend> m_cpu = makeCpuBackend();
};

} // namespace

TEST(EngineBackend, TheFp32LegCatchesAFaultBelowTheTargetPrecisionsNoise)
{
    // On the tiny Llama, whose activations make a 10x epsilon a shift far below bf16's spacing,
    // the bf16 comparison passes; the same backend in fp32 fails at the first norm it runs.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto m = test::tinyLlama();
    MemoryWeights w(m.weights);
    auto table = numerics::resolveToleranceTable("");
    ASSERT_TRUE(table.ok()) << table.error().message;
    TenfoldEpsilonBackend faulty;
    PrecisionRunOptions o;
    o.target = *parsePrecisionPlan("bf16");
    o.reference = PrecisionMode::F32;
    o.promptIds = kPrompt;
    o.newTokens = 2;
    o.table = &*table;
    o.backend = &faulty;
    o.fp32Leg = true;
    Progress p;
    auto r = runWithReference(m.spec, w, o, p, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->comparison && r->fp32LegComparison);
    EXPECT_EQ(r->comparison->failCount, 0) << "bf16 alone does not see it";
    ASSERT_TRUE(r->fp32LegComparison->firstDivergence);
    const auto& first = r->fp32LegComparison->rows[*r->fp32LegComparison->firstDivergence];
    EXPECT_EQ(first.layer, 0) << first.name;
    EXPECT_NE(first.name.find("layernorm"), std::string::npos) << first.name;
    EXPECT_FALSE(precisionRunPassed(*r));
    // The fp32 leg needs a backend (on the CPU the target's fp32 is the reference) and a
    // lower-precision target.
    o.backend = nullptr;
    EXPECT_FALSE(runWithReference(m.spec, w, o, p, {}).ok());
    o.backend = &faulty;
    o.target = *parsePrecisionPlan("fp32");
    EXPECT_FALSE(runWithReference(m.spec, w, o, p, {}).ok());
}
