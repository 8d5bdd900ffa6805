// The recurrent state as data (exec/recurrent_state.h): each Gated DeltaNet and Mamba-2 layer's
// state and conv window after the prefill and after every decode step, captured as
// "<mixer>#state" / "<mixer>#conv_state", against the PyTorch twins' (plugins/torch, day0_dump.py
// --state), with a twin whose state is reset at each step shown to break the agreement; and the
// state's dtype as a precision choice (PrecisionPlan::stateMode, vLLM's mamba_ssm_cache_dtype).
#include "base/resources.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/recurrent_state.h"
#include "numerics/comparison_grid.h"
#include "numerics/dump_compare.h"
#include "numerics/metrics.h"
#include "numerics/state_anchor.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace day0;
using test::kPython;
using test::torchAvailable;

namespace {

namespace fs = std::filesystem;

const std::vector<std::int64_t> kPrompt { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31 };

exec::RunResult runEngine(const fs::path& ckpt, const exec::PrecisionPlan& plan, bool state,
    std::int64_t newTokens, const std::vector<std::int64_t>& forced = {})
{
    const auto spec = exec::loadCheckpointModel(ckpt);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    auto weights = exec::openCheckpointWeights(ckpt);
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!spec.ok() || !weights.ok()) {
        return {};
    }
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, plan.isF64(), p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) {
        return {};
    }
    exec::RunOptions o;
    o.precision = plan;
    o.promptIds = kPrompt;
    o.newTokens = newTokens;
    o.forcedTokens = forced;
    o.linearAttentionChunk = 4; // chunks 4 + 4 + 3 under the 11-token prompt
    o.capture.state = state;
    auto run = engine->run(o, p, {});
    EXPECT_TRUE(run.ok()) << run.error().message;
    return run.ok() ? std::move(*run) : exec::RunResult {};
}

// The float64 twin's dump of the same tokens with --state, `env` set before it.
Result<numerics::Dump> runTwin(const fs::path& dir, const std::string& env,
    const std::vector<std::int64_t>& generated, std::int64_t newTokens)
{
    const std::string command = fmt::format(
        "{} DAY0_TWIN_CHUNK=3 {} {} {} --ids {} --tokens {} --forced {} --dtype "
        "float64 --state --out {} > {} 2>&1",
        env, kPython, test::bridgeScript().string(), (dir / "ckpt").string(),
        fmt::join(kPrompt, ","), newTokens, fmt::join(generated.begin(), generated.end() - 1, ","),
        (dir / "torch").string(), (dir / "torch.log").string());
    if (std::system(command.c_str()) != 0) {
        return Error::internal("the twin failed: " + command);
    }
    return checkpoint::readDump(dir / "torch");
}

double relL2(const numerics::Tensor& a, const numerics::Tensor& b)
{
    const auto m = numerics::compareTensors(a, b);
    EXPECT_TRUE(m.ok());
    return m.ok() ? m->relL2 : 1e300;
}

// Per step row, the worst rel L2 of the engine's state captures against the twin's; the
// number of state captures compared.
struct StepAgreement {
    std::vector<double> worst; ///< per step
    std::size_t captures = 0;
};

StepAgreement compareStates(const numerics::Dump& twin, const numerics::Dump& ours, int steps)
{
    StepAgreement a;
    a.worst.assign(std::size_t(steps), 0.0);
    for (const auto& c : twin.captures()) {
        if (!numerics::isStateCapture(c.name)) {
            continue;
        }
        const numerics::Tensor* mine = ours.tensor(c.name);
        EXPECT_NE(mine, nullptr) << c.name << " is not in the engine's dump";
        if (mine == nullptr) {
            continue;
        }
        const numerics::Tensor* theirs = twin.tensor(c.name);
        EXPECT_EQ(mine->shape(), theirs->shape()) << c.name;
        if (mine->shape() != theirs->shape() || mine->dim(0) != steps) {
            ADD_FAILURE() << c.name << " has " << mine->dim(0) << " step rows, expected " << steps;
            continue;
        }
        ++a.captures;
        for (int s = 0; s < steps; ++s) {
            const double e = relL2(theirs->select(0, s), mine->select(0, s));
            a.worst[std::size_t(s)] = std::max(a.worst[std::size_t(s)], e);
        }
    }
    return a;
}

// The engine's fp32 state captures against the float64 twin's after the prefill and each of 3
// decode steps; then against a twin whose recorded state restarts at each step (`resetEnv`),
// which must disagree after the first decode step.
void expectStatesAgreeWithTwin(const std::string& model, const std::string& resetEnv,
    std::size_t minimumCaptures, const checkpoint::ShrinkOptions& shrink = {})
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const fs::path dir = fs::temp_directory_path() / ("day0_state_" + model);
    const auto spec = test::shrinkForTwin(model, dir, shrink);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(exec::hasRecurrentState(*spec));
    const int steps = 4; // the prefill and 3 decode steps
    const auto plain = runEngine(dir / "ckpt", *exec::parsePrecisionPlan("fp32"), false, steps);
    const auto ours = runEngine(dir / "ckpt", *exec::parsePrecisionPlan("fp32"), true, steps);
    ASSERT_EQ(ours.generated.size(), std::size_t(steps));
    for (const auto& c : plain.dump.captures()) {
        EXPECT_FALSE(numerics::isStateCapture(c.name)) << c.name << " captured unasked";
    }
    // Capturing changes nothing computed.
    EXPECT_EQ(plain.dump.tensor("lm_head")->toDoubles(), ours.dump.tensor("lm_head")->toDoubles());

    const auto twin = runTwin(dir, "", ours.generated, steps);
    ASSERT_TRUE(twin.ok()) << twin.error().message;
    const auto a = compareStates(*twin, ours.dump, steps);
    std::printf("%s: %zu state captures; worst rel L2 against the twin per step:", model.c_str(),
        a.captures);
    for (const double e : a.worst) {
        std::printf(" %.2e", e);
    }
    std::printf("\n");
    EXPECT_GE(a.captures, minimumCaptures);
    for (int s = 0; s < steps; ++s) {
        EXPECT_LE(a.worst[std::size_t(s)], 1e-4) << "step " << s;
    }

    const auto reset = runTwin(dir, resetEnv, ours.generated, steps);
    ASSERT_TRUE(reset.ok()) << reset.error().message;
    const auto r = compareStates(*reset, ours.dump, steps);
    std::printf("%s against a twin whose state restarts at each step (%s):", model.c_str(),
        resetEnv.c_str());
    for (const double e : r.worst) {
        std::printf(" %.2e", e);
    }
    std::printf("\n");
    EXPECT_LE(r.worst[0], 1e-4) << "the prefill's state does not depend on carrying";
    for (int s = 1; s < steps; ++s) {
        EXPECT_GT(r.worst[std::size_t(s)], 1e-2) << "step " << s;
    }
    fs::remove_all(dir);
}

} // namespace

TEST(RecurrentState, Qwen35StateAgreesWithTwinAfterPrefillAndEachDecodeStep)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // Three Gated DeltaNet layers of the shrunk 4: #state and #conv_state each.
    expectStatesAgreeWithTwin("qwen3.5-27b", "DAY0_TWIN_WITHOUT=state", 6);
}

TEST(RecurrentState, NemotronHStateAgreesWithTwinAfterPrefillAndEachDecodeStep)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    expectStatesAgreeWithTwin("nemotron-3-nano-30b", "DAY0_TWIN_WITHOUT=step_state", 2);
}

TEST(RecurrentState, StateDtypeIsAPrecisionChoice)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const fs::path dir = fs::temp_directory_path() / "day0_state_dtype";
    const auto spec = test::shrinkForTwin("qwen3.5-27b", dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const std::int64_t tokens = 24;
    const auto reference = runEngine(dir / "ckpt", *exec::parsePrecisionPlan("fp64"), true, tokens);
    ASSERT_EQ(reference.generated.size(), std::size_t(tokens));
    const std::vector<std::int64_t> forced(
        reference.generated.begin(), reference.generated.end() - 1);
    const auto withState = [&](const char* base, std::optional<exec::PrecisionMode> state) {
        auto plan = *exec::parsePrecisionPlan(base);
        plan.stateMode = state;
        return runEngine(dir / "ckpt", plan, true, tokens, forced);
    };
    const auto fp32 = withState("fp32", std::nullopt);
    const auto fp32State = withState("fp32", exec::PrecisionMode::F32);
    const auto bf16State = withState("fp32", exec::PrecisionMode::BF16);
    const auto fp16State = withState("fp32", exec::PrecisionMode::F16);

    // fp32 state storage is the fp32 compute type: bitwise the default run.
    const auto logits = [](const exec::RunResult& r) { return r.dump.tensor("lm_head"); };
    ASSERT_EQ(logits(fp32)->byteSize(), logits(fp32State)->byteSize());
    EXPECT_EQ(std::memcmp(logits(fp32)->rawData(), logits(fp32State)->rawData(),
                  std::size_t(logits(fp32)->byteSize())),
        0);
    // A bf16 state differs measurably, more than fp16's (3 more mantissa bits).
    const double bf16Logits = relL2(*logits(fp32), *logits(bf16State));
    const double fp16Logits = relL2(*logits(fp32), *logits(fp16State));
    const std::string state0 = "model.layers.0.linear_attn#state";
    const double bf16State0 = relL2(*fp32.dump.tensor(state0), *bf16State.dump.tensor(state0));
    std::printf("fp32 run, %lld tokens: logits rel L2 bf16 state %.2e, fp16 state %.2e against "
                "the fp32 state; layer 0 state rel L2 (bf16) %.2e\n",
        static_cast<long long>(tokens), bf16Logits, fp16Logits, bf16State0);
    EXPECT_GT(bf16Logits, 1e-5);
    EXPECT_GT(bf16Logits, fp16Logits);
    EXPECT_GT(bf16State0, 1e-4);
    // The plan records its state dtype.
    EXPECT_NE(bf16State.dump.info.extra.value("precision_plan", "").find("state=bf16"),
        std::string::npos);
    EXPECT_NE(bf16State.dump.info.extra.value("precision_recipe", "").find("recurrent state"),
        std::string::npos);

    // Against the fp64 reference, by the fp32 rules: the first divergence is the first Gated
    // DeltaNet layer's state, and the heatmap has the state as a column.
    auto table = numerics::resolveToleranceTable("");
    ASSERT_TRUE(table.ok()) << table.error().message;
    numerics::CompareOptions co;
    co.table = &*table;
    Progress p;
    const auto judged = numerics::compareDumps(reference.dump, bf16State.dump, co, p, {});
    ASSERT_TRUE(judged.ok()) << judged.error().message;
    ASSERT_TRUE(judged->firstDivergence.has_value());
    const auto& first = judged->rows[*judged->firstDivergence];
    std::printf("bf16 state against fp64: first divergence %s (%s)\n", first.name.c_str(),
        first.verdict.reason.c_str());
    EXPECT_EQ(first.name, state0);
    const auto grid = numerics::comparisonGrid(*judged);
    EXPECT_NE(std::find(grid.columns.begin(), grid.columns.end(), "linear_attn#state"),
        grid.columns.end());
    EXPECT_NE(std::find(grid.columns.begin(), grid.columns.end(), "linear_attn#conv_state"),
        grid.columns.end());
    const auto clean = numerics::compareDumps(reference.dump, fp32State.dump, co, p, {});
    ASSERT_TRUE(clean.ok()) << clean.error().message;
    for (const auto& row : clean->rows) {
        if (numerics::isStateCapture(row.name)) {
            EXPECT_NE(row.verdict.status, numerics::VerdictStatus::Fail)
                << row.name << ": " << row.verdict.reason;
        }
    }
    fs::remove_all(dir);
}

TEST(RecurrentState, OptionsAreRefusedByName)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    EXPECT_EQ(*exec::parseStateDtype("bfloat16"), exec::PrecisionMode::BF16);
    EXPECT_EQ(*exec::parseStateDtype("fp32"), exec::PrecisionMode::F32);
    const auto fp8 = exec::parseStateDtype("fp8");
    ASSERT_FALSE(fp8.ok());
    EXPECT_NE(fp8.error().message.find("--state-dtype 'fp8'"), std::string::npos);

    const fs::path dir = fs::temp_directory_path() / "day0_state_refused";
    const auto qwen = test::shrinkForTwin("qwen3.5-27b", dir);
    ASSERT_TRUE(qwen.ok()) << qwen.error().message;
    auto fp64 = *exec::parsePrecisionPlan("fp64");
    fp64.stateMode = exec::PrecisionMode::BF16;
    const auto refused = exec::checkRecurrentStateOptions(*qwen, fp64, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("fp64 reference keeps its recurrent state"),
        std::string::npos);
    exec::CaptureOptions capture;
    capture.state = true;
    auto bf16 = *exec::parsePrecisionPlan("bf16");
    bf16.stateMode = exec::PrecisionMode::BF16;
    EXPECT_TRUE(exec::checkRecurrentStateOptions(*qwen, bf16, capture).ok());

    const auto llama = test::shrinkForTwin("llama-3.1-8b", dir);
    ASSERT_TRUE(llama.ok()) << llama.error().message;
    const auto none = exec::checkRecurrentStateOptions(*llama, {}, capture);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("--capture-state"), std::string::npos);
    EXPECT_NE(none.error().message.find("no recurrent layers"), std::string::npos);
    fs::remove_all(dir);
}

TEST(RecurrentState, KimiDeltaAttentionStateIsCapturedAndKeptInFp32)
{
    // Kimi-Linear's KDA layers record their state and conv windows like the other recurrent
    // layers, one row per step; vLLM keeps KDA's state in fp32, so a narrower one is refused.
    setResourceDir(DAY0_RESOURCE_DIR);
    const fs::path dir = fs::temp_directory_path() / "day0_state_kda";
    const auto spec = test::shrinkForTwin(
        (fs::path(DAY0_TEST_DATA_DIR) / "model" / "configs" / "kimi-linear-48b-a3b.json").string(),
        dir);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(exec::hasRecurrentState(*spec));
    const auto run = runEngine(dir / "ckpt", *exec::parsePrecisionPlan("fp32"), true, 3);
    std::size_t states = 0;
    for (const auto& c : run.dump.captures()) {
        if (!numerics::isStateCapture(c.name)) {
            continue;
        }
        ++states;
        const numerics::Tensor* t = run.dump.tensor(c.name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->dim(0), 3) << c.name << ": the prefill and two decode steps";
        EXPECT_GT(relL2(t->select(0, 0), t->select(0, 2)), 1e-3)
            << c.name << " does not move across steps";
    }
    EXPECT_GE(states, 2u); // a #state and a #conv_state per KDA layer
    auto bf16 = *exec::parsePrecisionPlan("bf16");
    bf16.stateMode = exec::PrecisionMode::BF16;
    const auto refused = exec::checkRecurrentStateOptions(*spec, bf16, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("kda_state_dtype"), std::string::npos);
    fs::remove_all(dir);
}
