// Every figure of RankMemory carries its derivation: the test recomputes each figure from the
// inputs its derivation states (Σ terms of products) and checks named inputs against the
// models' configs and the plan.
#include "base/resources.h"
#include "hardware/cluster.h"
#include "model/config_reader.h"
#include "model/layer_graph.h"
#include "plan/memory_estimator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace day0;
using namespace day0::plan;

namespace {

class MemoryFormula : public ::testing::Test {
protected:
    void SetUp() override { setResourceDir(DAY0_RESOURCE_DIR); }
    static model::ModelSpec specOf(const std::string& name)
    {
        auto spec = model::loadModel(name);
        EXPECT_TRUE(spec) << name;
        return *spec;
    }
    static MemoryReport estimate(const model::ModelSpec& spec, const std::string& plan,
        const Workload& wl, const std::string& cl)
    {
        const auto m = summarizeModel(model::buildLayerGraph(spec));
        auto r = estimateMemory(
            m, *parsePlan(plan), wl, *hardware::parseCluster(cl), {}, Derive::WithDerivations);
        EXPECT_TRUE(r) << spec.name << " " << plan << ": " << (r ? "" : r.error().message);
        return r ? *r : MemoryReport {};
    }
};

// What the stated inputs give, against the figure: whole bytes round each figure once.
::testing::AssertionResult agrees(const Derivation& d)
{
    const double stated = d.evaluate();
    const double figure = double(d.bytes.value);
    if (!std::isfinite(stated) || std::abs(stated - figure) > std::max(1.0, 1e-9 * figure)) {
        return ::testing::AssertionFailure()
            << d.figure << ": the inputs give " << fmt::format("{:.1f}", stated)
            << " B, the figure is " << d.bytes.value << " B\n"
            << d.text();
    }
    for (const auto& t : d.terms) {
        for (const auto& i : t.inputs) {
            if (i.name.empty() || i.source.empty()) {
                return ::testing::AssertionFailure()
                    << d.figure << ": an input of '" << t.what << "' has no name or no source";
            }
        }
    }
    return ::testing::AssertionSuccess();
}

Bytes figureOf(const RankMemory& r, const std::string& figure)
{
    if (figure == "weights") {
        return r.weights;
    }
    if (figure == "gradients") {
        return r.gradients;
    }
    if (figure == "optimizer") {
        return r.optimizer;
    }
    if (figure == "activations") {
        return r.activations;
    }
    if (figure == "kv_cache") {
        return r.kvCache;
    }
    if (figure == "runtime_reserve") {
        return r.runtimeReserve;
    }
    if (figure == "comm_buffers") {
        return r.commBuffers;
    }
    if (figure == "moe_dispatch") {
        return r.moeDispatch;
    }
    if (figure == "zero_buffers") {
        return r.zeroBuffers;
    }
    if (figure == "fragmentation") {
        return r.fragmentation;
    }
    if (figure == "buffers") {
        return r.buffers;
    }
    return r.total;
}

// Every figure of every rank has a derivation whose inputs give that figure.
void expectEveryFigureDerived(const MemoryReport& report, bool train)
{
    ASSERT_FALSE(report.perRank.empty());
    std::vector<std::string> figures { "weights", "activations", "runtime_reserve", "comm_buffers",
        "moe_dispatch", "zero_buffers", "fragmentation", "buffers", "total" };
    for (const char* f : { "gradients", "optimizer", "kv_cache" }) {
        if ((std::string(f) == "kv_cache") != train) {
            figures.emplace_back(f);
        }
    }
    for (const auto& r : report.perRank) {
        for (const auto& f : figures) {
            const Derivation* d = findDerivation(r.derivations, f);
            ASSERT_NE(d, nullptr) << "stage " << r.ppStage << ": no derivation of " << f;
            EXPECT_EQ(d->bytes, figureOf(r, f)) << f;
            EXPECT_FALSE(d->formula.empty()) << f;
            EXPECT_TRUE(agrees(*d)) << "stage " << r.ppStage;
            EXPECT_EQ(d->bytes.value > 0, !d->terms.empty()) << f << " stage " << r.ppStage;
        }
        for (const auto& k : r.kvByKind) {
            const Derivation* d
                = findDerivation(r.derivations, "kv_cache." + model::mixerKindName(k.kind));
            ASSERT_NE(d, nullptr) << model::mixerKindName(k.kind);
            EXPECT_EQ(d->bytes, k.bytes);
            EXPECT_TRUE(agrees(*d));
        }
    }
}

// The inputs named `name` in the derivation's terms.
std::vector<FormulaInput> inputsNamed(const Derivation& d, const std::string& name)
{
    std::vector<FormulaInput> out;
    for (const auto& t : d.terms) {
        for (const auto& i : t.inputs) {
            if (i.name == name) {
                out.push_back(i);
            }
        }
    }
    return out;
}

TEST_F(MemoryFormula, AWrongInputIsCaught)
{
    Workload wl;
    wl.mode = Mode::Infer;
    const auto report = estimate(specOf("llama-3.1-8b"), "tp=2", wl, "h100:1x8");
    ASSERT_FALSE(report.perRank.empty());
    Derivation kv = *findDerivation(report.perRank.front().derivations, "kv_cache");
    ASSERT_TRUE(agrees(kv));
    kv.terms.front().inputs.front().value += 1; // one more layer than the bytes hold
    EXPECT_FALSE(agrees(kv));
}

TEST_F(MemoryFormula, Llama70bTrainingNamesItsInputs)
{
    const auto spec = specOf("llama-3.1-70b");
    Workload wl;
    wl.seqLength = 8192;
    wl.globalBatch = 256;
    const auto report
        = estimate(spec, "tp=8,pp=4,zero=1,recompute=selective,mb=1", wl, "h100:16x8");
    expectEveryFigureDerived(report, true);
    for (const auto& r : report.perRank) {
        const Derivation& w = *findDerivation(r.derivations, "weights");
        // The decoder layers: 80 / pp = 20 per stage, split by tp = 8 (plan).
        const auto layers = inputsNamed(w, "layers");
        ASSERT_FALSE(layers.empty());
        EXPECT_EQ(layers.front().value, 20);
        const auto tp = inputsNamed(w, "tp");
        ASSERT_FALSE(tp.empty());
        EXPECT_EQ(tp.front().value, 8);
        EXPECT_EQ(tp.front().source, "plan: tp");
        EXPECT_TRUE(tp.front().divides);
        const auto bpp = inputsNamed(w, "bytes_per_param");
        ASSERT_FALSE(bpp.empty());
        EXPECT_EQ(bpp.front().value, 2); // bf16
        // The distributed optimizer divides the optimizer states by dp = 128 / (8·4) = 4.
        const auto dp = inputsNamed(*findDerivation(r.derivations, "optimizer"), "dp");
        ASSERT_FALSE(dp.empty());
        EXPECT_EQ(dp.front().value, 4);
        EXPECT_TRUE(inputsNamed(*findDerivation(r.derivations, "gradients"), "dp").empty());
        const auto seq = inputsNamed(*findDerivation(r.derivations, "activations"), "seq_length");
        ASSERT_FALSE(seq.empty());
        EXPECT_EQ(seq.front().value, 8192);
        EXPECT_EQ(seq.front().source, "workload: seq");
    }
    // The first stage has the embedding: vocab × hidden ÷ tp.
    const RankMemory* first = nullptr;
    for (const auto& r : report.perRank) {
        first = r.ppStage == 0 ? &r : first;
    }
    ASSERT_NE(first, nullptr);
    const Derivation& w = *findDerivation(first->derivations, "weights");
    const auto embedding = std::find_if(w.terms.begin(), w.terms.end(),
        [](const FormulaTerm& t) { return t.what.find("input embedding") == 0; });
    ASSERT_NE(embedding, w.terms.end());
    EXPECT_DOUBLE_EQ(embedding->inputs.front().value, double(spec.vocabSize * spec.hiddenSize));
}

TEST_F(MemoryFormula, Llama70bKvCacheIsLayersTimesKvHeadsTimesHeadDim)
{
    const auto spec = specOf("llama-3.1-70b");
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 4;
    wl.context = 16384;
    const auto report = estimate(spec, "tp=8", wl, "h100:1x8");
    expectEveryFigureDerived(report, false);
    const RankMemory& r = report.perRank.front();
    const Derivation& kv = *findDerivation(r.derivations, "kv_cache");
    ASSERT_EQ(kv.terms.size(), 1u);
    // K+V = 2 × num_key_value_heads × head_dim elements per token, 8 KV heads over tp = 8.
    EXPECT_EQ(inputsNamed(kv, "layers").at(0).value, double(spec.numLayers));
    EXPECT_EQ(inputsNamed(kv, "sequences").at(0).value, 4);
    EXPECT_EQ(inputsNamed(kv, "elements_per_token").at(0).value,
        double(2 * spec.numKvHeads * spec.headDim));
    EXPECT_EQ(inputsNamed(kv, "context").at(0).value, 16384);
    EXPECT_EQ(inputsNamed(kv, "context").at(0).source, "workload: context");
    EXPECT_EQ(inputsNamed(kv, "bytes_per_element").at(0).value, 2);
    EXPECT_EQ(inputsNamed(kv, "heads").at(0).value, double(spec.numKvHeads));
    EXPECT_EQ(inputsNamed(kv, "heads_on_rank").at(0).value, 1);
    // 80 × 4 × 2,048 × 16,384 × 2 ÷ 8 = 2.5 GiB
    EXPECT_EQ(r.kvCache.value, 80LL * 4 * 2048 * 16384 * 2 / 8);
    EXPECT_NE(kv.text().find("elements_per_token = 2,048"), std::string::npos) << kv.text();
}

TEST_F(MemoryFormula, DeepseekV3MoeMlaTrainingAndInference)
{
    const auto spec = specOf("deepseek-v3");
    Workload train;
    train.seqLength = 4096;
    train.globalBatch = 1024;
    const auto t
        = estimate(spec, "tp=2,pp=8,ep=16,etp=1,zero=1,recompute=full", train, "h200:32x8");
    expectEveryFigureDerived(t, true);
    for (const auto& r : t.perRank) {
        const Derivation& w = *findDerivation(r.derivations, "weights");
        // Routed experts divide by ep × etp; the optimizer states of experts by edp.
        const auto ep = inputsNamed(w, "ep");
        ASSERT_FALSE(ep.empty()) << "stage " << r.ppStage;
        EXPECT_EQ(ep.front().value, 16);
        const auto edp = inputsNamed(*findDerivation(r.derivations, "optimizer"), "edp");
        ASSERT_FALSE(edp.empty());
        EXPECT_EQ(edp.front().value, 256 / (16 * 1 * 8));
        EXPECT_GT(r.moeDispatch.value, 0);
        EXPECT_FALSE(inputsNamed(*findDerivation(r.derivations, "moe_dispatch"), "hidden").empty());
    }

    Workload infer;
    infer.mode = Mode::Infer;
    infer.batch = 8;
    infer.context = 32768;
    const auto i = estimate(spec, "tp=8,ep=8", infer, "h200:1x8");
    expectEveryFigureDerived(i, false);
    const RankMemory& r = i.perRank.front();
    const Derivation& kv = *findDerivation(r.derivations, "kv_cache");
    // MLA keeps the latent: kv_lora_rank + qk_rope_head_dim per token, whole on every TP rank.
    const auto perToken = inputsNamed(kv, "elements_per_token");
    ASSERT_FALSE(perToken.empty());
    EXPECT_EQ(perToken.front().value, double(spec.mla.kvLoraRank + spec.mla.qkRopeHeadDim));
    EXPECT_EQ(inputsNamed(kv, "heads_on_rank").at(0).value, 1);
    EXPECT_EQ(inputsNamed(kv, "heads").at(0).value, 1);
    // The 61 decoder layers and the MTP layer each keep one.
    double layers = 0;
    for (const auto& in : inputsNamed(kv, "layers")) {
        layers += in.value;
    }
    EXPECT_EQ(layers, double(spec.numLayers + 1));
}

TEST_F(MemoryFormula, HybridKvCacheByKind)
{
    // Qwen3-Next: full-attention layers keep K/V per token, Gated DeltaNet layers a fixed state.
    Workload wl;
    wl.mode = Mode::Infer;
    wl.batch = 2;
    const auto report = estimate(specOf("qwen3-next-80b-a3b"), "tp=4", wl, "h100:1x8");
    expectEveryFigureDerived(report, false);
    const RankMemory& r = report.perRank.front();
    ASSERT_GE(r.kvByKind.size(), 2u);
    const Derivation* state = nullptr;
    for (const auto& k : r.kvByKind) {
        if (k.kind != model::MixerKind::Attention) {
            state = findDerivation(r.derivations, "kv_cache." + model::mixerKindName(k.kind));
        }
    }
    ASSERT_NE(state, nullptr);
    EXPECT_FALSE(inputsNamed(*state, "elements_per_sequence").empty()) << state->text();
    EXPECT_TRUE(inputsNamed(*state, "context").empty());
}

TEST_F(MemoryFormula, EveryBundledModelDerivesEveryFigure)
{
    int checked = 0;
    const auto models = model::bundledModels();
    for (const auto& b : models) {
        SCOPED_TRACE(b.name);
        const auto spec = specOf(b.name);
        const auto m = summarizeModel(model::buildLayerGraph(spec));
        Workload infer;
        infer.mode = Mode::Infer;
        infer.batch = 4;
        const auto cluster = *hardware::parseCluster("h200:4x8");
        for (const char* plan : { "tp=8", "tp=4,pp=2" }) {
            auto r
                = estimateMemory(m, *parsePlan(plan), infer, cluster, {}, Derive::WithDerivations);
            if (r) {
                expectEveryFigureDerived(*r, false);
                ++checked;
            }
        }
        Workload train;
        for (const char* plan : { "tp=4,pp=2,zero=1", "tp=2,pp=4,zero=3,cp=2,recompute=full" }) {
            auto r
                = estimateMemory(m, *parsePlan(plan), train, cluster, {}, Derive::WithDerivations);
            if (r) {
                expectEveryFigureDerived(*r, true);
                ++checked;
            }
        }
    }
    EXPECT_GE(checked, int(models.size()) * 2); // most layouts run on most models
}

// Every figure a stage reports, by name, with the KV cache of each layer kind.
std::vector<std::pair<std::string, std::int64_t>> figuresOf(const RankMemory& r)
{
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const char* f :
        { "weights", "gradients", "optimizer", "activations", "kv_cache", "runtime_reserve",
            "comm_buffers", "moe_dispatch", "zero_buffers", "fragmentation", "buffers", "total" }) {
        out.emplace_back(f, figureOf(r, f).value);
    }
    for (const auto& k : r.kvByKind) {
        out.emplace_back("kv_cache." + model::mixerKindName(k.kind), k.bytes.value);
        out.emplace_back("layers." + model::mixerKindName(k.kind), k.layers);
    }
    out.emplace_back("stage", r.ppStage);
    out.emplace_back("rank", r.rank);
    out.emplace_back("layers", r.layers);
    out.emplace_back("in_flight_micro_batches_x1e6", std::llround(r.inFlightMicroBatches * 1e6));
    return out;
}

// An estimate without the derivations records none and gives exactly the bytes of one with
// them, for every bundled model in layouts that exercise every figure: pipeline stages, experts,
// context parallelism, ZeRO-2/3, interleaving, full recompute and inference.
TEST_F(MemoryFormula, BytesOnlyEstimateGivesTheDerivedEstimatesBytes)
{
    int compared = 0;
    const auto models = model::bundledModels();
    const auto cluster = *hardware::parseCluster("h200:4x8");
    Workload infer;
    infer.mode = Mode::Infer;
    infer.batch = 4;
    const Workload train;
    struct Case {
        const Workload* workload;
        const char* plan;
    };
    const Case cases[] = { { &infer, "tp=8" }, { &infer, "tp=4,pp=2" }, { &infer, "tp=2,ep=4" },
        { &infer, "tp=2,pp=2,cp=2" }, { &train, "tp=4,pp=2,zero=1" },
        { &train, "tp=2,pp=4,zero=3,cp=2,recompute=full" }, { &train, "tp=2,ep=8,zero=2" },
        { &train, "tp=2,pp=4,vpp=2,m=8,recompute=selective" } };
    for (const auto& b : models) {
        SCOPED_TRACE(b.name);
        const auto m = summarizeModel(model::buildLayerGraph(specOf(b.name)));
        for (const Case& c : cases) {
            SCOPED_TRACE(c.plan);
            auto bytesOnly = estimateMemory(m, *parsePlan(c.plan), *c.workload, cluster);
            auto derived = estimateMemory(
                m, *parsePlan(c.plan), *c.workload, cluster, {}, Derive::WithDerivations);
            ASSERT_EQ(bytesOnly.ok(), derived.ok());
            if (!derived) {
                continue;
            }
            ASSERT_EQ(bytesOnly->perRank.size(), derived->perRank.size());
            for (std::size_t i = 0; i < derived->perRank.size(); ++i) {
                EXPECT_TRUE(bytesOnly->perRank[i].derivations.empty());
                EXPECT_FALSE(derived->perRank[i].derivations.empty());
                EXPECT_EQ(figuresOf(bytesOnly->perRank[i]), figuresOf(derived->perRank[i]));
            }
            EXPECT_EQ(bytesOnly->maxTotal, derived->maxTotal);
            EXPECT_EQ(bytesOnly->fits, derived->fits);
            EXPECT_EQ(bytesOnly->notes, derived->notes);
            ++compared;
        }
    }
    EXPECT_GE(compared, int(models.size()) * 4); // most layouts run on most models
}

} // namespace
