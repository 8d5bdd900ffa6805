#include "parallel_testkit.h"

#include "base/python_json.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

namespace day0::test {

namespace {

Result<ShrunkModel> shrinkAndOpen(const std::string& name, const std::string& config,
    const std::filesystem::path& dir, std::int64_t layers, std::uint64_t seed)
{
    checkpoint::ShrinkOptions o;
    o.layers = layers;
    o.hidden = 64;
    o.heads = 4;
    o.experts = 8;
    o.vocab = 250; // not a multiple of tp: uneven vocab-parallel slices
    o.intermediate = 96;
    o.seed = seed;
    o.replace = true;
    Progress progress;
    auto summary = checkpoint::shrinkModel(config, dir, o, progress, {});
    if (!summary) {
        return summary.error();
    }
    ShrunkModel m;
    m.name = name;
    m.dir = dir;
    auto spec = exec::loadCheckpointModel(dir);
    if (!spec) {
        return spec.error();
    }
    m.spec = std::move(*spec);
    auto weights = exec::openCheckpointWeights(dir);
    if (!weights) {
        return weights.error();
    }
    m.weights = std::move(*weights);
    auto id = parallel::checkpointFingerprint(dir);
    if (!id) {
        return id.error();
    }
    m.checkpointId = *id;
    return m;
}

} // namespace

Result<ShrunkModel> makeShrunkModel(
    const std::string& config, const std::filesystem::path& dir, std::uint64_t seed)
{
    return shrinkAndOpen(config, config, dir, 2, seed);
}

Result<ShrunkModel> makeShrunkHybrid(
    const std::string& name, const std::filesystem::path& dir, std::uint64_t seed)
{
    if (name == "gemma-4-e2b") {
        // Six layers: sliding ×3, full, then a KV-shared sliding and a KV-shared full layer
        // (reading layers 2 and 3, their MLPs double-wide), with per-layer input embeddings.
        const auto config = std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
            / "gemma-4-E2B-it.json";
        return shrinkAndOpen(name, config.string(), dir, 6, seed);
    }
    if (name == "kimi-linear-48b-a3b") {
        // Shrink keeps layers 0 (KDA, dense MLP), 1 and 2 (KDA, MoE) and 3 (MLA without RoPE,
        // MoE), with 2 KDA heads of 16.
        const auto config = std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
            / "kimi-linear-48b-a3b.json";
        return shrinkAndOpen(name, config.string(), dir, 4, seed);
    }
    const bool k3 = name == "kimi-linear-k3-additions";
    // "deepseek-v4-flash-released": its released format (FP8 with E8M0 `.scale` blocks, FP4
    // experts), which the forward reads dequantised.
    const bool released = name == "deepseek-v4-flash-released";
    const bool v4 = name == "deepseek-v4-flash" || released;
    if (name != "nemotron-h" && name != "nemotron-3-super" && name != "minimax-m3-kv2" && !k3
        && !v4) {
        // A bundled Nemotron-H keeps its three kinds of layer (M, E, *) in 4 layers; Qwen3-Next
        // its pattern of three Gated DeltaNet layers and one full attention layer.
        const bool four = name.starts_with("nemotron") || name.starts_with("qwen3-next")
            || name == "minimax-m3";
        const bool six = name.starts_with("gemma"); // five sliding layers and a full one
        return shrinkAndOpen(name, name, dir, six ? 6 : four ? 4 : 2, seed);
    }
    const bool super = name == "nemotron-3-super";
    const bool minimax = name == "minimax-m3-kv2";
    const auto bundled = k3 ? std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
            / "kimi-linear-48b-a3b.json"
                            : std::filesystem::path(DAY0_RESOURCE_DIR) / "configs"
            / (minimax      ? "minimax-m3.json"
                    : super ? "nemotron-3-super-120b-fp8.json"
                    : v4    ? "deepseek-v4-flash.json"
                            : "nemotron-3-nano-30b.json");
    std::ifstream in(bundled);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Super's time_step_limit holds Infinity, as Python writes it.
    auto parsed = parsePythonJsonOrdered(text, bundled.string());
    if (!parsed) {
        return parsed.error();
    }
    auto config = parsed->value;
    if (k3) {
        // Kimi-K3's additions on Kimi-Linear (each computed by the single-rank engine): the
        // latent MoE with its norm, the MLA output gate, the KDA safe gate and full-rank gate.
        config["routed_expert_hidden_size"] = 1152;
        config["latent_moe_use_norm"] = true;
        config["mla_use_output_gate"] = true;
        config["linear_attn_config"]["gate_lower_bound"] = -5.0;
        config["linear_attn_config"]["use_full_rank_gate"] = true;
    } else if (minimax) {
        // Two query heads per KV head: shrunk to 4 heads, it keeps 2 KV groups and 2 index heads.
        config["num_attention_heads"] = 8;
    } else if (v4 && !released) {
        config.erase("quantization_config");
        config.erase("expert_dtype");
    } else if (released) {
        // As published: shrink writes its FP8 `.scale` blocks and FP4 experts.
    } else if (super) {
        // Its ModelOpt FP8, which shrink does not generate: the shrunk copy is unquantised.
        config.erase("quantization_config");
    } else {
        config["hybrid_override_pattern"] = "MM*-";
        config["num_hidden_layers"] = 4;
    }
    // Shrink records its source's path in day0-shrink.json, which the checkpoint's fingerprint
    // covers: every rank of an mpirun (each shrinking into its own folder) must name the same
    // file. Written under a unique name and renamed, so a rank never reads a partial file.
    const auto shared = std::filesystem::temp_directory_path() / ("day0-parallel-" + name);
    std::filesystem::create_directories(shared);
    const auto path = shared / "config.json";
    const auto partial = shared / fmt::format("config.json.{}.{}", ::getpid(), seed);
    std::ofstream(partial) << dumpPythonJson(config, 2);
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    if (ec) {
        return Error::badInput(fmt::format("{}: {}", path.string(), ec.message()));
    }
    return shrinkAndOpen(name, path.string(), dir / "ckpt", 4, seed);
}

std::string MatrixPlan::label() const { return parallel::layoutString(layout, microBatches); }

std::vector<MatrixPlan> matrixPlans(const model::ModelSpec& spec, int maxWorld)
{
    std::vector<MatrixPlan> out;
    for (const int pp : { 1, 2 }) {
        for (const int tp : { 1, 2, 4 }) {
            for (const int ep : { 1, 2, 4 }) {
                if (ep > 1 && !spec.moe) {
                    continue;
                }
                MatrixPlan p;
                p.layout.tp = tp;
                p.layout.pp = pp;
                p.layout.ep = ep;
                p.layout.dp = tp * pp <= 4 ? 4 / (tp * pp) : 1;
                p.microBatches = pp > 1 ? 2 : 1;
                if ((p.layout.dp * tp) % ep != 0 || p.layout.worldSize() > maxWorld) {
                    continue;
                }
                out.push_back(p);
                if (tp > 1) {
                    p.layout.sp = true; // the same plan with sequence parallelism
                    out.push_back(p);
                }
            }
        }
    }
    return out;
}

std::filesystem::path processScratch(const std::string& name)
{
    static std::map<std::string, std::filesystem::path> made;
    auto it = made.find(name);
    if (it == made.end()) {
        auto dir
            = std::filesystem::temp_directory_path() / fmt::format("day0-{}-{}", name, ::getpid());
        std::filesystem::create_directories(dir);
        it = made.emplace(name, std::move(dir)).first;
    }
    return it->second;
}

namespace {

template <typename Make>
const ShrunkModel& cached(const std::string& name, const std::filesystem::path& scratch, Make make)
{
    static std::map<std::filesystem::path, ShrunkModel> cache;
    const auto dir = scratch / name;
    auto it = cache.find(dir);
    if (it == cache.end()) {
        auto m = make(name, dir, std::uint64_t(7));
        if (!m) {
            throw std::runtime_error(fmt::format("shrunk {}: {}", name, m.error().message));
        }
        it = cache.emplace(dir, std::move(*m)).first;
    }
    return it->second;
}

} // namespace

const ShrunkModel& cachedShrunkModel(const std::string& name, const std::filesystem::path& scratch)
{
    return cached(name, scratch, makeShrunkModel);
}

const ShrunkModel& cachedShrunkHybrid(const std::string& name, const std::filesystem::path& scratch)
{
    return cached(name, scratch, makeShrunkHybrid);
}

MatrixPlan planOf(int tp, int pp, int ep, int dp, bool sp)
{
    MatrixPlan p;
    p.layout.tp = tp;
    p.layout.pp = pp;
    p.layout.ep = ep;
    p.layout.dp = dp;
    p.layout.sp = sp;
    p.microBatches = pp > 1 ? 2 : 1;
    return p;
}

parallel::ParallelRunOptions runOptions(const ShrunkModel& m, const MatrixPlan& p,
    std::vector<std::vector<std::int64_t>> prompts, std::int64_t newTokens)
{
    parallel::ParallelRunOptions o;
    o.layout = p.layout;
    o.microBatches = p.microBatches;
    o.prompts = prompts.empty() ? matrixPrompts(p.layout.dp * p.microBatches, m.spec.vocabSize)
                                : std::move(prompts);
    o.newTokens = newTokens;
    o.checkpointId = m.checkpointId;
    return o;
}

std::vector<std::vector<std::int64_t>> matrixPrompts(int sequences, std::int64_t vocab)
{
    std::vector<std::vector<std::int64_t>> prompts;
    for (int s = 0; s < sequences; ++s) {
        std::vector<std::int64_t> p;
        const int length = 3 + (s * 2) % 5;
        for (int i = 0; i < length; ++i) {
            p.push_back((7 + 31 * s + 13 * i) % vocab);
        }
        prompts.push_back(std::move(p));
    }
    return prompts;
}

Result<double> compareWithSingleRank(const ShrunkModel& model,
    const std::vector<parallel::SequenceResult>& sequences, std::int64_t newTokens)
{
    Progress progress;
    auto engine = exec::Engine::create(model.spec, *model.weights, false, progress, {});
    if (!engine) {
        return engine.error();
    }
    double worst = 0.0;
    for (std::size_t s = 0; s < sequences.size(); ++s) {
        const auto& seq = sequences[s];
        exec::RunOptions o;
        o.precision = *exec::parsePrecisionPlan("fp32");
        o.promptIds = seq.prompt;
        o.newTokens = newTokens;
        o.capture.filters = { "lm_head" };
        auto single = engine->run(o, progress, {});
        if (!single) {
            return single.error();
        }
        if (single->generated != seq.generated) {
            return Error::internal(fmt::format("sequence {}: generated {} but the single rank {}",
                s, fmt::join(seq.generated, ","), fmt::join(single->generated, ",")));
        }
        const auto* ref = single->dump.tensor("lm_head");
        if (ref == nullptr) {
            return Error::internal("the single-rank run captured no lm_head");
        }
        const auto values = ref->toDoubles();
        if (values.size() != seq.logits.size()) {
            return Error::internal(fmt::format("sequence {}: {} logits, the single rank has {}", s,
                seq.logits.size(), values.size()));
        }
        double maxRef = 0.0;
        double maxDiff = 0.0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            maxRef = std::max(maxRef, std::abs(values[i]));
            maxDiff = std::max(maxDiff, std::abs(double(seq.logits[i]) - values[i]));
        }
        worst = std::max(worst, maxDiff / std::max(maxRef, 1e-30));
    }
    return worst;
}

Result<double> singleRankFp32Floor(const ShrunkModel& model,
    const std::vector<parallel::SequenceResult>& sequences, std::int64_t newTokens)
{
    Progress progress;
    auto fp32 = exec::Engine::create(model.spec, *model.weights, false, progress, {});
    if (!fp32) {
        return fp32.error();
    }
    auto fp64 = exec::Engine::create(model.spec, *model.weights, true, progress, {});
    if (!fp64) {
        return fp64.error();
    }
    double worst = 0.0;
    for (const auto& seq : sequences) {
        std::vector<double> logits[2];
        for (const bool wide : { false, true }) {
            exec::RunOptions o;
            o.precision = *exec::parsePrecisionPlan(wide ? "fp64" : "fp32");
            o.promptIds = seq.prompt;
            o.newTokens = newTokens;
            o.capture.filters = { "lm_head" };
            auto run = (wide ? *fp64 : *fp32).run(o, progress, {});
            if (!run) {
                return run.error();
            }
            const auto* t = run->dump.tensor("lm_head");
            if (t == nullptr) {
                return Error::internal("the single-rank run captured no lm_head");
            }
            logits[wide ? 1 : 0] = t->toDoubles();
        }
        double maxRef = 0.0;
        double maxDiff = 0.0;
        for (std::size_t i = 0; i < std::min(logits[0].size(), logits[1].size()); ++i) {
            maxRef = std::max(maxRef, std::abs(logits[1][i]));
            maxDiff = std::max(maxDiff, std::abs(logits[0][i] - logits[1][i]));
        }
        worst = std::max(worst, maxDiff / std::max(maxRef, 1e-30));
    }
    return worst;
}

FaultyWeights::FaultyWeights(
    const exec::WeightSource& inner, std::string tensor, double delaySeconds)
    : m_inner(inner)
    , m_tensor(std::move(tensor))
    , m_delay(delaySeconds)
{
}

bool FaultyWeights::has(const std::string& name) const { return m_inner.has(name); }

Result<numerics::Tensor> FaultyWeights::read(const std::string& name) const
{
    if (name == m_tensor) {
        if (m_delay <= 0.0) {
            return Error::badInput(fmt::format("cannot read '{}': disk error", name));
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(m_delay));
    }
    return m_inner.read(name);
}

std::vector<std::string> FaultyWeights::names() const { return m_inner.names(); }

} // namespace day0::test
