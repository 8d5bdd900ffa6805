#include "detection_suite.h"

#include "actions/tolerances.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/precision_run.h"
#include "numerics/dump_compare.h"

#include <fmt/format.h>

#include <functional>
#include <map>

namespace day0::test {

namespace fs = std::filesystem;

namespace {

constexpr int kTokens = 64;
constexpr std::uint64_t kSeed = 7; // the default table was derived with seed 1

/// A weight source that changes some tensors as they are read.
class PerturbedWeights final : public exec::WeightSource {
public:
    using Change = std::function<Result<numerics::Tensor>(const exec::WeightSource& base)>;
    PerturbedWeights(const exec::WeightSource& base, std::map<std::string, Change> changes)
        : m_base(base)
        , m_changes(std::move(changes))
    {
    }
    [[nodiscard]] bool has(const std::string& name) const override { return m_base.has(name); }
    [[nodiscard]] Result<numerics::Tensor> read(const std::string& name) const override
    {
        const auto it = m_changes.find(name);
        return it == m_changes.end() ? m_base.read(name) : it->second(m_base);
    }
    [[nodiscard]] std::vector<std::string> names() const override { return m_base.names(); }
    [[nodiscard]] std::string describe() const override { return m_base.describe() + " (broken)"; }

private:
    const exec::WeightSource& m_base;
    std::map<std::string, Change> m_changes;
};

/// A tensor of `name` with its float values edited by `edit(values, shape)`.
PerturbedWeights::Change edited(
    std::string name, std::function<void(std::vector<float>&, const numerics::Shape&)> edit)
{
    return [name = std::move(name), edit = std::move(edit)](
               const exec::WeightSource& base) -> Result<numerics::Tensor> {
        auto t = base.read(name);
        if (!t) {
            return t.error();
        }
        auto v = t->toFloats();
        edit(v, t->shape());
        return numerics::Tensor::fromFloats(t->shape(), v);
    };
}

void swapRows(
    std::vector<float>& v, std::int64_t cols, std::int64_t a, std::int64_t b, std::int64_t n)
{
    for (std::int64_t r = 0; r < n; ++r) {
        std::swap_ranges(
            v.begin() + (a + r) * cols, v.begin() + (a + r + 1) * cols, v.begin() + (b + r) * cols);
    }
}

/// One kind of break: what it does to the target's spec and weights, and the first layer it
/// touches.
struct Break {
    std::string kind;
    int layer = 0;
    model::ModelSpec spec;
    std::map<std::string, PerturbedWeights::Change> changes;
};

std::vector<Break> breaksOf(const model::ModelSpec& spec, const exec::WeightSource& weights)
{
    const int k = int(spec.numLayers / 2);
    const std::string layer = fmt::format("model.layers.{}.", k);
    const std::int64_t hidden = spec.hiddenSize;
    const std::int64_t d = spec.headDim;
    const std::int64_t kvHeads = spec.numKvHeads;
    auto scaled = [](double s) {
        return [s](std::vector<float>& v, const numerics::Shape&) {
            for (auto& x : v) {
                x = float(x * s);
            }
        };
    };
    // Every tensor of layer k whose name ends with `suffix` (the experts of a MoE layer too).
    auto named = [&](const std::string& suffix) {
        std::vector<std::string> out;
        for (const auto& n : weights.names()) {
            if (n.starts_with(layer) && n.ends_with(suffix)) {
                out.push_back(n);
            }
        }
        return out;
    };
    std::vector<Break> out;
    auto add = [&](std::string kind, std::map<std::string, PerturbedWeights::Change> changes) {
        out.push_back({ std::move(kind), k, spec, std::move(changes) });
    };
    // A block-FP8 weight's codes mean nothing without their scales: a scaling break scales its
    // weight_scale_inv instead, and other edits leave such tensors alone.
    auto scaleOf = [&](const std::string& n) { return n + "_scale_inv"; };
    auto each = [&](const std::string& suffix, auto edit) {
        std::map<std::string, PerturbedWeights::Change> c;
        for (const auto& n : named(suffix)) {
            if (!weights.has(scaleOf(n))) {
                c[n] = edited(n, edit);
            }
        }
        return c;
    };
    auto eachScaled = [&](const std::string& suffix, double factor) {
        std::map<std::string, PerturbedWeights::Change> c;
        for (const auto& n : named(suffix)) {
            const std::string target = weights.has(scaleOf(n)) ? scaleOf(n) : n;
            c[target] = edited(target, scaled(factor));
        }
        return c;
    };
    add(fmt::format("o_proj ×1.1 in layer {}", k), eachScaled("self_attn.o_proj.weight", 1.1));
    add(fmt::format("down_proj ×1.1 in layer {}", k), eachScaled("down_proj.weight", 1.1));
    add(fmt::format("queries ×1.5 (a wrong softmax scale) in layer {}", k),
        eachScaled("self_attn.q_proj.weight", 1.5));
    add(fmt::format("query heads 0 and 1 swapped in layer {}", k),
        each("self_attn.q_proj.weight",
            [=](std::vector<float>& v, const numerics::Shape&) { swapRows(v, hidden, 0, d, d); }));
    add(fmt::format("RoPE halves of every key head swapped in layer {}", k),
        each("self_attn.k_proj.weight", [=](std::vector<float>& v, const numerics::Shape&) {
            for (std::int64_t h = 0; h < kvHeads; ++h) {
                swapRows(v, hidden, h * d, h * d + d / 2, d / 2);
            }
        }));
    add(fmt::format("value head 0 zeroed in layer {}", k),
        each("self_attn.v_proj.weight", [=](std::vector<float>& v, const numerics::Shape&) {
            std::fill(v.begin(), v.begin() + d * hidden, 0.0f);
        }));
    add(fmt::format("input_layernorm weight lost (ones) in layer {}", k),
        each("input_layernorm.weight", [](std::vector<float>& v, const numerics::Shape&) {
            std::fill(v.begin(), v.end(), 1.0f);
        }));
    add(fmt::format("post_attention_layernorm as 1 + w in layer {}", k),
        each("post_attention_layernorm.weight", [](std::vector<float>& v, const numerics::Shape&) {
            for (auto& x : v) {
                x += 1.0f;
            }
        }));
    {
        // gate_proj and up_proj read from each other (a fused gate_up split in the wrong order).
        std::map<std::string, PerturbedWeights::Change> c;
        for (const auto& gate : named("gate_proj.weight")) {
            const std::string up = gate.substr(0, gate.size() - 16) + "up_proj.weight";
            c[gate] = [up](const exec::WeightSource& b) { return b.read(up); };
            c[up] = [gate](const exec::WeightSource& b) { return b.read(gate); };
            if (weights.has(scaleOf(gate)) && weights.has(scaleOf(up))) {
                c[scaleOf(gate)]
                    = [s = scaleOf(up)](const exec::WeightSource& b) { return b.read(s); };
                c[scaleOf(up)]
                    = [s = scaleOf(gate)](const exec::WeightSource& b) { return b.read(s); };
            }
        }
        add(fmt::format("gate_proj and up_proj swapped in layer {}", k), std::move(c));
    }
    Break theta { "rope_theta ×50 (every layer)", 0, spec, {} };
    theta.spec.ropeTheta *= 50.0;
    out.push_back(std::move(theta));
    Break eps { "RMSNorm epsilon ×10 (every layer)", 0, spec, {} };
    eps.spec.normEps *= 10.0;
    out.push_back(std::move(eps));
    return out;
}

int countFailed(const numerics::DumpComparison& c, std::string* first)
{
    int n = 0;
    for (const auto& row : c.rows) {
        if (row.verdict.status == numerics::VerdictStatus::Fail) {
            if (n++ == 0 && first != nullptr && first->empty()) {
                *first = row.name + ": " + row.verdict.reason;
            }
        }
    }
    return n;
}

std::string modelName(const fs::path& p) { return p.filename().string(); }

/// A suite model: its checkpoint opened and its fp32 engine (the reference, and the maker of
/// its prompts).
struct SuiteModel {
    exec::OpenedCheckpoint opened;
    exec::Engine fp32;

    static Result<SuiteModel> load(const fs::path& checkpoint)
    {
        auto opened = exec::openCheckpoint(checkpoint);
        if (!opened) {
            return opened.error();
        }
        Progress p;
        auto fp32 = exec::Engine::create(opened->spec, *opened->weights, false, p, {});
        if (!fp32) {
            return fp32.error();
        }
        return SuiteModel { std::move(*opened), std::move(*fp32) };
    }
};

} // namespace

Result<std::vector<fs::path>> detectionModels(const fs::path& scratch)
{
    const fs::path data = fs::path(DAY0_TEST_DATA_DIR) / "exec";
    std::vector<fs::path> models { data / "stories260K-hf", data / "tiny-llama" };
    for (const char* name : { "qwen3-30b-a3b", "deepseek-v3" }) {
        const fs::path moe = scratch / (std::string(name) + "-shrunk");
        if (!fs::exists(moe / "config.json")) {
            Progress p;
            auto s = checkpoint::shrinkModel(name, moe, {}, p, {});
            if (!s) {
                return s.error();
            }
        }
        models.push_back(moe);
    }
    return models;
}

Result<std::vector<HealthyOutcome>> runHealthySuite(
    const std::vector<fs::path>& models, const numerics::ToleranceTable& table, int prompts)
{
    std::vector<HealthyOutcome> out;
    for (const auto& m : models) {
        auto loaded = SuiteModel::load(m);
        if (!loaded) {
            return loaded.error();
        }
        const auto* spec = &loaded->opened.spec;
        auto& fp32 = loaded->fp32;
        Progress p;
        for (int r = 0; r < prompts; ++r) {
            auto prompt
                = actions::healthyPrompt(m, fp32, spec->vocabSize, r, kTokens, kSeed, p, {});
            if (!prompt) {
                return prompt.error();
            }
            for (const char* precision :
                { "bf16", "fp16", "fp8", "nvfp4", "mxfp4", "int4", "int4-g32" }) {
                exec::PrecisionRunOptions o;
                o.target = *exec::parsePrecisionPlan(precision);
                o.reference = exec::PrecisionMode::F32;
                o.inject = true;
                o.promptIds = prompt->ids;
                o.newTokens = 1;
                o.table = &table;
                auto run = exec::runWithReference(*spec, *loaded->opened.weights, o, p, {});
                if (!run) {
                    return run.error();
                }
                numerics::CompareOptions c;
                c.table = &table;
                auto propagated
                    = numerics::compareDumps(run->reference->dump, run->target.dump, c, p, {});
                if (!propagated) {
                    return propagated.error();
                }
                HealthyOutcome h { modelName(m), precision, r };
                h.failed = countFailed(*propagated, &h.firstFailure)
                    + countFailed(*run->comparison, &h.firstFailure);
                h.judged = int(propagated->rows.size() + run->comparison->rows.size());
                out.push_back(std::move(h));
            }
        }
    }
    return out;
}

Result<std::vector<BrokenOutcome>> runBrokenSuite(
    const std::vector<fs::path>& models, const numerics::ToleranceTable& table)
{
    std::vector<BrokenOutcome> out;
    for (const auto& m : models) {
        auto loaded = SuiteModel::load(m);
        if (!loaded) {
            return loaded.error();
        }
        const auto* spec = &loaded->opened.spec;
        const auto& weights = loaded->opened.weights;
        auto* healthy = &loaded->fp32;
        Progress p;
        auto prompt
            = actions::healthyPrompt(m, *healthy, spec->vocabSize, 1, kTokens, kSeed, p, {});
        if (!prompt) {
            return prompt.error();
        }
        exec::RunOptions ref;
        ref.promptIds = prompt->ids;
        ref.newTokens = 1;
        auto reference = healthy->run(ref, p, {});
        if (!reference) {
            return reference.error();
        }
        for (auto& b : breaksOf(*spec, *weights)) {
            if (b.changes.empty() && b.spec.ropeTheta == spec->ropeTheta
                && b.spec.normEps == spec->normEps) {
                continue; // nothing of this kind in this model
            }
            PerturbedWeights broken(*weights, b.changes);
            auto engine = exec::Engine::create(b.spec, broken, false, p, {});
            if (!engine) {
                return engine.error().withContext(b.kind);
            }
            numerics::CompareOptions c;
            c.table = &table;
            c.allowMismatch = true; // the broken spec's fingerprint differs
            BrokenOutcome o { modelName(m), b.kind, b.layer };
            {
                auto exact = engine->run(ref, p, {});
                if (!exact) {
                    return exact.error().withContext(b.kind);
                }
                auto fp32 = numerics::compareDumps(reference->dump, exact->dump, c, p, {});
                if (!fp32) {
                    return fp32.error().withContext(b.kind);
                }
                o.noEffect = fp32->failCount == 0;
                o.caughtInFp32 = fp32->failCount > 0 && fp32->firstDivergence
                    && fp32->rows[*fp32->firstDivergence].layer == b.layer;
            }
            exec::RunOptions t = ref;
            t.precision = *exec::parsePrecisionPlan("bf16");
            auto target = engine->run(t, p, {});
            if (!target) {
                return target.error().withContext(b.kind);
            }
            t.injectFrom = &reference->dump;
            auto injected = engine->run(t, p, {});
            if (!injected) {
                return injected.error().withContext(b.kind);
            }
            c.local = &injected->dump;
            auto cmp = numerics::compareDumps(reference->dump, target->dump, c, p, {});
            if (!cmp) {
                return cmp.error().withContext(b.kind);
            }
            o.failed = cmp->failCount > 0;
            if (cmp->firstDivergence) {
                const auto& row = cmp->rows[*cmp->firstDivergence];
                o.firstFailingLayer = row.layer;
                o.firstFailure = row.name + ": " + row.verdict.reason;
            }
            out.push_back(std::move(o));
        }
    }
    return out;
}

} // namespace day0::test
