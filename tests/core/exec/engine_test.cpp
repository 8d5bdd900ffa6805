#include "checkpoint/tensor_file.h"
#include "exec/engine.h"
#include "numerics/dump_compare.h"
#include "numerics/float_formats.h"
#include "tiny_models.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

using namespace day0;
using namespace day0::exec;

namespace {

const std::vector<std::int64_t> kPrompt { 3, 17, 42, 99, 7 };

struct Loaded {
    test::TinyModel model;
    MemoryWeights weights;
    Engine f32;
    Engine f64;
};

Engine makeEngine(const test::TinyModel& m, const WeightSource& w, bool fp64)
{
    Progress p;
    auto e = Engine::create(m.spec, w, fp64, p, {});
    EXPECT_TRUE(e.ok()) << e.error().message;
    return std::move(*e);
}

RunResult runOrFail(Engine& e, RunOptions o)
{
    Progress p;
    auto r = e.run(o, p, {});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return std::move(*r);
}

RunOptions options(const std::string& precision, std::int64_t tokens)
{
    RunOptions o;
    o.precision = *parsePrecisionPlan(precision);
    o.promptIds = kPrompt;
    o.newTokens = tokens;
    return o;
}

double relL2(const numerics::Tensor& a, const numerics::Tensor& b)
{
    return numerics::compareTensors(a, b)->relL2;
}

std::vector<test::TinyModel> allModels()
{
    return { test::tinyLlama(), test::tinyQwen2(), test::tinyMixtral(), test::tinyQwen3Moe(),
        test::tinyDeepseekV3() };
}

} // namespace

TEST(Engine, Fp32AgreesWithFp64OnEveryFamily)
{
    for (const auto& m : allModels()) {
        SCOPED_TRACE(m.spec.modelType);
        MemoryWeights w(m.weights);
        Engine e32 = makeEngine(m, w, false);
        Engine e64 = makeEngine(m, w, true);
        const RunResult r64 = runOrFail(e64, options("fp64", 4));
        RunOptions o32 = options("fp32", 4);
        o32.forcedTokens
            = std::vector<std::int64_t>(r64.generated.begin(), r64.generated.end() - 1);
        const RunResult r32 = runOrFail(e32, o32);
        const auto* l64 = r64.dump.tensor("lm_head");
        const auto* l32 = r32.dump.tensor("lm_head");
        ASSERT_NE(l64, nullptr);
        ASSERT_NE(l32, nullptr);
        EXPECT_EQ(l64->shape(), (numerics::Shape { 8, m.spec.vocabSize }));
        EXPECT_LT(relL2(*l64, *l32), 1e-5);
        EXPECT_GT(relL2(*l64, *l32), 0.0);
        EXPECT_EQ(r64.generated, r32.generated);
        EXPECT_EQ(r64.dump.info.inputIds.size(), 8u);
        EXPECT_EQ(r64.dump.info.fingerprint, modelFingerprint(m.spec));
    }
}

TEST(Engine, KvCacheDecodeMatchesOneLongPrefill)
{
    for (const auto& m : allModels()) {
        SCOPED_TRACE(m.spec.modelType);
        MemoryWeights w(m.weights);
        Engine e = makeEngine(m, w, true);
        const RunResult stepwise = runOrFail(e, options("fp64", 5));
        RunOptions whole = options("fp64", 1);
        whole.promptIds = stepwise.dump.info.inputIds;
        const RunResult once = runOrFail(e, whole);
        EXPECT_LT(relL2(*stepwise.dump.tensor("lm_head"), *once.dump.tensor("lm_head")), 1e-12);
        EXPECT_LT(
            relL2(*stepwise.dump.tensor("model.layers.1"), *once.dump.tensor("model.layers.1")),
            1e-12);
        EXPECT_EQ(stepwise.generated.back(), once.generated.front());
    }
}

TEST(Engine, EmulatedPrecisionsDriftWithoutNaN)
{
    struct Expect {
        const char* precision;
        double low;
        double high;
    };
    for (const auto& m : allModels()) {
        SCOPED_TRACE(m.spec.modelType);
        MemoryWeights w(m.weights);
        Engine e = makeEngine(m, w, false);
        const RunResult ref = runOrFail(e, options("fp32", 3));
        double previous = 0.0;
        for (const Expect x : { Expect { "fp16", 1e-5, 5e-3 }, Expect { "bf16", 1e-4, 5e-2 },
                 Expect { "int8", 1e-4, 5e-2 }, Expect { "fp8", 5e-3, 0.5 } }) {
            SCOPED_TRACE(x.precision);
            RunOptions o = options(x.precision, 3);
            o.forcedTokens = { ref.generated[0], ref.generated[1] };
            const RunResult t = runOrFail(e, o);
            const auto m2
                = numerics::compareTensors(*ref.dump.tensor("lm_head"), *t.dump.tensor("lm_head"));
            EXPECT_EQ(m2->nanTarget + m2->infTarget, 0);
            EXPECT_GT(m2->relL2, x.low);
            EXPECT_LT(m2->relL2, x.high);
            if (std::string(x.precision) != "int8") {
                EXPECT_GT(m2->relL2, previous); // fp16 < bf16 < fp8
                previous = m2->relL2;
            }
        }
    }
}

TEST(Engine, InjectModeMeasuresOwnError)
{
    const auto m = test::tinyLlama();
    MemoryWeights w(m.weights);
    Engine e = makeEngine(m, w, false);
    const RunResult ref = runOrFail(e, options("fp32", 3));
    RunOptions o = options("bf16", 3);
    o.forcedTokens = { ref.generated[0], ref.generated[1] };
    const RunResult acc = runOrFail(e, o);
    o.injectFrom = &ref.dump;
    const RunResult own = runOrFail(e, o);
    EXPECT_EQ(own.dump.info.mode, "inject");
    const double accumulated
        = relL2(*ref.dump.tensor("model.layers.1"), *acc.dump.tensor("model.layers.1"));
    const double local
        = relL2(*ref.dump.tensor("model.layers.1"), *own.dump.tensor("model.layers.1"));
    EXPECT_GT(local, 0.0);
    EXPECT_LT(local, accumulated);
    // Upcasting layer 1 removes its own error (only its bf16 input rounding is left).
    RunOptions up = o;
    up.precision = *parsePrecisionPlan("bf16", "", "1=fp32");
    const RunResult upcast = runOrFail(e, up);
    const double upcastLocal
        = relL2(*ref.dump.tensor("model.layers.1"), *upcast.dump.tensor("model.layers.1"));
    EXPECT_LT(upcastLocal, local / 10.0);

    // The comparison reports own errors and a first divergence on them.
    const auto table
        = numerics::parseToleranceTable(nlohmann::json::parse(R"({"name":"t","version":1,
        "rules":[{"id":"x","dtype":"*","op":"*","max_rel_l2":1e-9}]})"),
            "t");
    numerics::CompareOptions co;
    co.table = &*table;
    co.local = &own.dump;
    Progress p;
    const auto cmp = numerics::compareDumps(ref.dump, acc.dump, co, p, {});
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    EXPECT_EQ(cmp->divergenceBasis, "own");
    ASSERT_TRUE(cmp->firstDivergence.has_value());
    EXPECT_EQ(cmp->rows[*cmp->firstDivergence].name, "model.embed_tokens");

    RunOptions bad = o;
    numerics::Dump empty;
    bad.injectFrom = &empty;
    Progress p2;
    const auto r = e.run(bad, p2, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("model.embed_tokens"), std::string::npos);
}

TEST(Engine, CaptureOptionsAndDumpRoundTrip)
{
    const auto m = test::tinyQwen3Moe();
    MemoryWeights w(m.weights);
    Engine e = makeEngine(m, w, false);
    RunOptions o = options("bf16", 2);
    o.capture.inputs = true;
    o.capture.projections = true;
    const RunResult all = runOrFail(e, o);
    const auto& d = all.dump;
    for (const char* name :
        { "model.embed_tokens", "model.layers.0#in0", "model.layers.0.input_layernorm",
            "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.q_norm",
            "model.layers.0.self_attn", "model.layers.0.post_attention_layernorm",
            "model.layers.0.mlp.gate", "model.layers.0.mlp.gate#topk", "model.layers.0.mlp",
            "model.layers.1", "model.norm", "lm_head" }) {
        EXPECT_NE(d.find(name), nullptr) << name;
    }
    EXPECT_EQ(d.find("model.layers.0.mlp")->op, "moe");
    EXPECT_EQ(d.tensor("model.layers.0.mlp.gate#topk")->shape(), (numerics::Shape { 6, 2 }));
    EXPECT_EQ(d.tensor("model.layers.0.self_attn.q_norm")->shape(), (numerics::Shape { 6, 4, 32 }));
    EXPECT_EQ(d.captures().front().name, "model.embed_tokens");
    EXPECT_EQ(d.captures().back().name, "lm_head");

    o.capture = {};
    o.capture.filters = { "model.layers.1" };
    o.capture.statsOnly = true;
    const RunResult few = runOrFail(e, o);
    EXPECT_EQ(few.dump.find("model.layers.0"), nullptr);
    ASSERT_NE(few.dump.find("model.layers.1"), nullptr);
    EXPECT_EQ(few.dump.tensor("model.layers.1"), nullptr);
    EXPECT_NE(few.dump.tensor("lm_head"), nullptr); // logits always stored

    const auto dir = std::filesystem::temp_directory_path() / "day0_exec_dump_test";
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(checkpoint::writeDump(all.dump, dir).ok());
    const auto back = checkpoint::readDump(dir);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->captures().size(), d.captures().size());
    EXPECT_EQ(relL2(*back->tensor("lm_head"), *d.tensor("lm_head")), 0.0);
    EXPECT_EQ(back->tensor("model.layers.0.mlp.gate#topk")->toInts(),
        d.tensor("model.layers.0.mlp.gate#topk")->toInts());
    std::filesystem::remove(dir / "tensors.safetensors");
    EXPECT_FALSE(checkpoint::readDump(dir).ok());
    std::filesystem::remove_all(dir);
}

TEST(Engine, SigmoidRoutersRecordTheirSelectionScores)
{
    // DeepSeek-V3's router ranks by σ(logit) + e_score_correction_bias: the dump carries those
    // scores ("#score") and the router's group stage, for the margins of flipped choices.
    const auto m = test::tinyDeepseekV3();
    MemoryWeights w(m.weights);
    Engine e = makeEngine(m, w, true);
    const RunResult r = runOrFail(e, options("fp64", 1));
    const auto& d = r.dump;
    const std::string router = "model.layers.1.mlp.gate";
    const auto* logits = d.tensor(router);
    const auto* scores = d.tensor(router + "#score");
    ASSERT_NE(logits, nullptr);
    ASSERT_NE(scores, nullptr);
    EXPECT_EQ(scores->shape(), logits->shape());
    const auto bias = m.weights.at(router + ".e_score_correction_bias").toDoubles();
    const auto x = logits->toDoubles();
    const auto c = scores->toDoubles();
    const std::int64_t experts = logits->dim(1);
    ASSERT_EQ(std::int64_t(bias.size()), experts);
    for (std::size_t i = 0; i < c.size(); ++i) {
        EXPECT_NEAR(c[i], 1.0 / (1.0 + std::exp(-x[i])) + bias[i % std::size_t(experts)], 1e-12);
    }
    const auto& info = d.info.extra.at("router");
    EXPECT_EQ(info.at("scoring"), "sigmoid");
    EXPECT_EQ(info.at("n_group"), 4);
    EXPECT_EQ(info.at("topk_group"), 2);
    EXPECT_EQ(info.at("top_k"), 2);
    // A comparison uses them and does not list them as rows.
    const auto table
        = numerics::parseToleranceTable(nlohmann::json::parse(R"({"name":"t","version":1,
        "rules":[{"id":"x","dtype":"*","op":"*","max_rel_l2":1e-2}]})"),
            "t");
    Engine e32 = makeEngine(m, w, false);
    const RunResult bf16 = runOrFail(e32, options("bf16", 1));
    EXPECT_NE(bf16.dump.tensor(router + "#score"), nullptr);
    numerics::CompareOptions o;
    o.table = &*table;
    Progress p;
    const auto cmp = numerics::compareDumps(d, bf16.dump, o, p, {});
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    for (const auto& row : cmp->rows) {
        EXPECT_FALSE(row.name.ends_with("#score")) << row.name;
        if (row.routing) {
            EXPECT_EQ(row.routing->scores,
                row.routing->selection.substr(0, row.routing->selection.rfind('#')) + "#score");
        }
    }
    // Softmax routers (Qwen3-MoE) rank in the logits' order and record no scores.
    const auto q = test::tinyQwen3Moe();
    MemoryWeights qw(q.weights);
    Engine qe = makeEngine(q, qw, false);
    const RunResult qr = runOrFail(qe, options("fp32", 1));
    EXPECT_EQ(qr.dump.find("model.layers.0.mlp.gate#score"), nullptr);
    EXPECT_EQ(qr.dump.info.extra.at("router").at("scoring"), "softmax");
}

TEST(Engine, BadCheckpointsAndInputsAreNamed)
{
    auto m = test::tinyLlama();
    auto weights = m.weights;
    weights.erase("model.layers.1.mlp.down_proj.weight");
    Progress p;
    auto e = Engine::create(m.spec, MemoryWeights(weights, "ckpt"), false, p, {});
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("model.layers.1.mlp.down_proj.weight"), std::string::npos);
    weights = m.weights;
    weights["model.norm.weight"] = numerics::Tensor::zeros({ 63 }, DType::F32);
    e = Engine::create(m.spec, MemoryWeights(weights, "ckpt"), false, p, {});
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("[63]"), std::string::npos);
    auto vl = m.spec;
    vl.vision = model::VisionSpec {};
    vl.vision->kind = "moonvit"; // Kimi-K2.5's tower is not implemented
    vl.modelType = "kimi_k25";
    e = Engine::create(vl, MemoryWeights(m.weights), false, p, {});
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().code, ErrorCode::Unsupported);
    EXPECT_NE(e.error().message.find("vision tower of kimi_k25 (moonvit"), std::string::npos);

    MemoryWeights w(m.weights);
    Engine ok = makeEngine(m, w, false);
    RunOptions o = options("fp32", 2);
    o.promptIds = { 1, 300 };
    auto r = ok.run(o, p, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("token id 300"), std::string::npos);
    o = options("fp64", 2);
    EXPECT_FALSE(ok.run(o, p, {}).ok()); // fp64 plan on an fp32 engine
    o = options("fp32", 3);
    o.forcedTokens = { 1 };
    EXPECT_FALSE(ok.run(o, p, {}).ok());
    std::stop_source stop;
    stop.request_stop();
    r = ok.run(options("fp32", 2), p, stop.get_token());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
}

TEST(Engine, BlockFp8CheckpointIsDequantised)
{
    auto m = test::tinyLlama();
    model::QuantizationSpec q;
    q.method = "fp8";
    q.blockRows = 32;
    q.blockCols = 32;
    m.spec.quantization = q;
    // Quantise q_proj of layer 0 to e4m3 with 32×32 block scales.
    const std::string name = "model.layers.0.self_attn.q_proj.weight";
    const auto w = m.weights[name].toFloats();
    const std::int64_t rows = 64;
    const std::int64_t cols = 64;
    std::vector<float> scales(4);
    std::vector<float> codes(w.size());
    std::vector<float> dequant(w.size());
    for (int br = 0; br < 2; ++br) {
        for (int bc = 0; bc < 2; ++bc) {
            float amax = 0;
            for (int r = br * 32; r < br * 32 + 32; ++r) {
                for (int c = bc * 32; c < bc * 32 + 32; ++c) {
                    amax = std::max(amax, std::fabs(w[std::size_t(r * cols + c)]));
                }
            }
            const float s = amax / 448.0f;
            scales[std::size_t(br * 2 + bc)] = s;
            for (int r = br * 32; r < br * 32 + 32; ++r) {
                for (int c = bc * 32; c < bc * 32 + 32; ++c) {
                    const auto i = std::size_t(r * cols + c);
                    codes[i] = numerics::roundToFormat(w[i] / s, DType::F8E4M3);
                    dequant[i] = codes[i] * s;
                }
            }
        }
    }
    auto fp8 = m.weights;
    fp8[name] = numerics::Tensor::fromFloats({ rows, cols }, codes).to(DType::F8E4M3);
    fp8[name + "_scale_inv"] = numerics::Tensor::fromFloats({ 2, 2 }, scales);
    auto plain = m.weights;
    plain[name] = numerics::Tensor::fromFloats({ rows, cols }, dequant);
    MemoryWeights a(fp8);
    MemoryWeights b(plain);
    Engine ea = makeEngine(m, a, false);
    Engine eb = makeEngine(m, b, false);
    const RunResult ra = runOrFail(ea, options("fp32", 1));
    const RunResult rb = runOrFail(eb, options("fp32", 1));
    EXPECT_EQ(relL2(*ra.dump.tensor("lm_head"), *rb.dump.tensor("lm_head")), 0.0);
    fp8[name + "_scale_inv"] = numerics::Tensor::fromFloats({ 1, 4 }, scales);
    Progress p;
    const auto bad = Engine::create(m.spec, MemoryWeights(fp8, "fp8ckpt"), false, p, {});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("_scale_inv"), std::string::npos);
}
