// fp32 prefill on the CPU reference engine, as a ratio to the same model's forward in PyTorch
// (Debian's python3-torch through plugins/torch/day0_torch_models.py), measured in the same run:
// a Llama of random weights, and a shrunk gpt-oss-20b (sinks, windows, MXFP4 experts dequantised
// on load, biased experts with the clamped SwiGLU), Gemma-4 and Qwen3.5 (Gated DeltaNet). Without
// torch the PyTorch baseline is skipped and said so. A long Qwen3.5 decode shows its per-token
// time stays flat (the recurrent state does not grow).
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/forward.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

using namespace day0;

namespace {

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

struct Model {
    model::ModelSpec spec;
    std::map<std::string, numerics::Tensor> weights;
    std::int64_t tokens = 0;
};

const Model& benchModel()
{
    static const Model m = [] {
        Model r;
        auto& s = r.spec;
        s.name = "bench-llama";
        s.modelType = "llama";
        s.family = model::Family::Llama;
        s.hiddenSize = quick() ? 128 : 1024;
        s.numLayers = quick() ? 2 : 4;
        s.numHeads = quick() ? 4 : 16;
        s.numKvHeads = quick() ? 2 : 4;
        s.headDim = 32 * (quick() ? 1 : 2);
        s.intermediateSize = quick() ? 256 : 2816;
        s.vocabSize = quick() ? 512 : 8192;
        s.maxPositions = 4096;
        s.normEps = 1e-5;
        s.ropeTheta = 500000.0;
        s.attention = model::AttentionKind::GQA;
        s.layers.assign(std::size_t(s.numLayers), model::LayerSpec {});
        r.tokens = quick() ? 16 : 256;
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (const auto& req : exec::detail::requiredWeights(s)) {
            std::vector<float> v(static_cast<std::size_t>(numerics::numelOf(req.shape)));
            const float scale = req.shape.size() == 2 && req.name != "model.embed_tokens.weight"
                ? 1.0f / std::sqrt(float(req.shape[1]))
                : 1.0f;
            for (auto& x : v) {
                x = req.shape.size() == 1 ? 1.0f + 0.1f * normal(rng) : scale * normal(rng);
            }
            r.weights[req.name] = numerics::Tensor::fromFloats(req.shape, v);
        }
        return r;
    }();
    return m;
}

std::vector<std::int64_t> promptIds(const Model& m)
{
    std::vector<std::int64_t> ids(static_cast<std::size_t>(m.tokens));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        ids[i] = std::int64_t((i * 7919 + 13) % std::size_t(m.spec.vocabSize));
    }
    return ids;
}

/// Seconds of one PyTorch float32 forward of the checkpoint in `dir` over `tokens` prompt tokens
/// of the same ids as promptIds (median of several), or a negative value with the reason printed
/// when torch is not available.
double torchForwardSeconds(
    const std::filesystem::path& dir, std::int64_t vocab, std::int64_t tokens)
{
    const auto plugin
        = std::filesystem::path(DAY0_TEST_DATA_DIR) / ".." / ".." / "plugins" / "torch";
    const std::string script = fmt::format(
        "import sys, time, torch\n"
        "sys.path.insert(0, '{}')\n"
        "import day0_torch_models\n"
        "model, _ = day0_torch_models.load('{}', torch.float32)\n"
        "ids = torch.tensor([[(i * 7919 + 13) % {} for i in range({})]])\n"
        "times = []\n"
        "with torch.no_grad():\n"
        "    model(ids)\n"
        "    for _ in range({}):\n"
        "        t0 = time.perf_counter(); model(ids); times.append(time.perf_counter() - t0)\n"
        "times.sort(); print(times[len(times) // 2])\n",
        plugin.string(), dir.string(), vocab, tokens, quick() ? 1 : 5);
    std::ofstream(dir / "bench.py") << script;
    FILE* pipe = ::popen(
        fmt::format("/usr/bin/python3 {} 2>/dev/null", (dir / "bench.py").string()).c_str(), "r");
    if (pipe == nullptr) {
        return -1.0;
    }
    char buffer[64] = {};
    const bool read = std::fgets(buffer, sizeof buffer, pipe) != nullptr;
    const int rc = ::pclose(pipe);
    if (!read || rc != 0) {
        std::fprintf(stderr,
            "exec_bench: no PyTorch baseline for %s (/usr/bin/python3 with torch not "
            "available)\n",
            dir.filename().string().c_str());
        return -1.0;
    }
    return std::atof(buffer);
}

/// The Llama's PyTorch time (its weights written to a checkpoint once).
double torchSeconds()
{
    static const double seconds = [] {
        const Model& m = benchModel();
        const auto dir = std::filesystem::temp_directory_path() / "day0_exec_bench";
        std::filesystem::create_directories(dir);
        std::vector<checkpoint::NamedTensor> tensors;
        for (const auto& [name, t] : m.weights) {
            tensors.push_back({ name, t });
        }
        if (!checkpoint::writeTensorFile(dir / "model.safetensors", tensors).ok()) {
            return -1.0;
        }
        const auto& s = m.spec;
        const nlohmann::json config = { { "model_type", "llama" }, { "hidden_size", s.hiddenSize },
            { "num_hidden_layers", s.numLayers }, { "num_attention_heads", s.numHeads },
            { "num_key_value_heads", s.numKvHeads }, { "head_dim", s.headDim },
            { "intermediate_size", s.intermediateSize }, { "vocab_size", s.vocabSize },
            { "rms_norm_eps", s.normEps }, { "rope_theta", s.ropeTheta } };
        std::ofstream(dir / "config.json") << config.dump();
        return torchForwardSeconds(dir, s.vocabSize, m.tokens);
    }();
    return seconds;
}

/// The fastest prefill of `o` over the benchmark's iterations, in seconds; negative (and the
/// benchmark marked skipped) when a run fails.
double bestPrefill(
    benchmark::State& state, exec::Engine& engine, const exec::RunOptions& o, Progress& progress)
{
    double best = 1e30;
    for (auto _ : state) {
        auto r = engine.run(o, progress, {});
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            return -1.0;
        }
        best = std::min(best, r->prefillSeconds);
    }
    return best;
}

void BM_Fp32Prefill(benchmark::State& state)
{
    const Model& m = benchModel();
    exec::MemoryWeights weights(m.weights);
    Progress progress;
    auto engine = exec::Engine::create(m.spec, weights, false, progress, {});
    if (!engine) {
        state.SkipWithError(engine.error().message.c_str());
        return;
    }
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = promptIds(m);
    o.newTokens = 1;
    o.capture.filters = { "lm_head" };
    const double best = bestPrefill(state, *engine, o, progress);
    if (best < 0) {
        return;
    }
    const double torch = torchSeconds();
    state.counters["tokens"] = double(m.tokens);
    state.counters["day0_ms"] = best * 1e3;
    if (torch > 0) {
        state.counters["pytorch_ms"] = torch * 1e3;
        state.counters["ratio_to_pytorch"] = best / torch;
    }
}
BENCHMARK(BM_Fp32Prefill)->Unit(benchmark::kMillisecond);

void BM_Bf16EmulatedPrefill(benchmark::State& state)
{
    // Emulation cost: the same prefill in emulated bf16, as a ratio to the fp32 one.
    const Model& m = benchModel();
    exec::MemoryWeights weights(m.weights);
    Progress progress;
    auto engine = exec::Engine::create(m.spec, weights, false, progress, {});
    exec::RunOptions o;
    o.promptIds = promptIds(m);
    o.newTokens = 1;
    o.capture.filters = { "lm_head" };
    o.precision = *exec::parsePrecisionPlan("fp32");
    const double fp32 = engine->run(o, progress, {})->prefillSeconds;
    o.precision = *exec::parsePrecisionPlan("bf16");
    double best = 1e30;
    for (auto _ : state) {
        best = std::min(best, engine->run(o, progress, {})->prefillSeconds);
    }
    state.counters["ratio_to_fp32"] = best / fp32;
}
BENCHMARK(BM_Bf16EmulatedPrefill)->Unit(benchmark::kMillisecond);

/// A shrunk bundled model's checkpoint and its engine.
struct ShrunkEngine {
    exec::OpenedCheckpoint opened;
    std::optional<exec::Engine> engine;
};

/// Shrinks `model` into `dir` (cleared first) and creates its engine; nullopt, with the benchmark
/// skipped saying why, when either fails.
std::optional<ShrunkEngine> shrunkEngine(benchmark::State& state, const std::string& model,
    const std::filesystem::path& dir, const checkpoint::ShrinkOptions& so, Progress& progress)
{
    std::filesystem::remove_all(dir);
    if (const auto shrunk = checkpoint::shrinkModel(model, dir, so, progress, {}); !shrunk) {
        state.SkipWithError(shrunk.error().message.c_str());
        return std::nullopt;
    }
    auto opened = exec::openCheckpoint(dir);
    if (!opened) {
        state.SkipWithError(opened.error().message.c_str());
        return std::nullopt;
    }
    auto engine = exec::Engine::create(opened->spec, *opened->weights, false, progress, {});
    if (!engine) {
        state.SkipWithError(engine.error().message.c_str());
        return std::nullopt;
    }
    ShrunkEngine out { std::move(*opened), std::nullopt };
    out.engine.emplace(std::move(*engine));
    return out;
}

/// fp32 prefill of a shrunk bundled model on the engine against its PyTorch twin's float32
/// forward of the same checkpoint, in the same run.
void shrunkPrefill(benchmark::State& state, const char* model, const checkpoint::ShrinkOptions& so)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir
        = std::filesystem::temp_directory_path() / (std::string("day0_exec_bench_") + model);
    Progress progress;
    auto shrunk = shrunkEngine(state, model, dir, so, progress);
    if (!shrunk) {
        return;
    }
    const auto* opened = &shrunk->opened;
    auto& engine = shrunk->engine;
    const std::int64_t tokens = quick() ? 16 : 256;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds.resize(std::size_t(tokens));
    for (std::size_t i = 0; i < o.promptIds.size(); ++i) {
        o.promptIds[i] = std::int64_t((i * 7919 + 13) % std::size_t(opened->spec.vocabSize));
    }
    o.newTokens = 1;
    o.capture.filters = { "lm_head" };
    const double best = bestPrefill(state, *engine, o, progress);
    if (best < 0) {
        return;
    }
    const double torch = torchForwardSeconds(dir, opened->spec.vocabSize, tokens);
    state.counters["tokens"] = double(tokens);
    state.counters["day0_ms"] = best * 1e3;
    if (torch > 0) {
        state.counters["pytorch_ms"] = torch * 1e3;
        state.counters["ratio_to_pytorch"] = best / torch;
    }
}

void BM_GptOssFp32Prefill(benchmark::State& state)
{
    // A shrunk gpt-oss-20b: its sinks, alternating windows, 16 biased experts with the clamped
    // SwiGLU, dequantised from MXFP4 on load.
    checkpoint::ShrinkOptions so;
    so.layers = quick() ? 2 : 4;
    so.hidden = quick() ? 128 : 512;
    so.intermediate = quick() ? 128 : 512;
    so.experts = 16;
    shrunkPrefill(state, "gpt-oss-20b", so);
}
BENCHMARK(BM_GptOssFp32Prefill)->Unit(benchmark::kMillisecond);

void BM_Gemma4Fp32Prefill(benchmark::State& state)
{
    // A shrunk Gemma-4 26B-A4B: sliding and full layers with their own RoPE, keys as values on
    // the full ones, the experts beside the dense MLP, soft-capped logits.
    checkpoint::ShrinkOptions so;
    so.hidden = quick() ? 128 : 512;
    so.experts = 16;
    shrunkPrefill(state, "gemma-4-26b-a4b", so);
}
BENCHMARK(BM_Gemma4Fp32Prefill)->Unit(benchmark::kMillisecond);

void BM_Qwen35Fp32Prefill(benchmark::State& state)
{
    // A shrunk Qwen3.5-27B: three Gated DeltaNet layers (chunked delta rule in prefill) and a
    // gated full-attention layer; the twin runs the same chunked form.
    checkpoint::ShrinkOptions so;
    so.hidden = quick() ? 128 : 512;
    shrunkPrefill(state, "qwen3.5-27b", so);
}
BENCHMARK(BM_Qwen35Fp32Prefill)->Unit(benchmark::kMillisecond);

void BM_Qwen35LongDecode(benchmark::State& state)
{
    // Greedy decode of a shrunk Qwen3.5-27B: the linear-attention layers keep a fixed-size state,
    // so a step's time should not grow with the context (only its one full-attention layer in
    // four reads a growing KV cache). Reports the mean time of the last 100 steps over the first
    // 100.
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::temp_directory_path() / "day0_exec_bench_qwen35_decode";
    checkpoint::ShrinkOptions so;
    so.hidden = quick() ? 128 : 512;
    Progress progress;
    auto shrunk = shrunkEngine(state, "qwen3.5-27b", dir, so, progress);
    if (!shrunk) {
        return;
    }
    auto& engine = shrunk->engine;
    const std::int64_t steps = quick() ? 200 : 1000;
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan("fp32");
    o.promptIds = { 5, 17, 42, 99, 7, 3, 11, 23 };
    o.newTokens = steps + 1;
    o.capture.filters = { "lm_head" };
    o.capture.statsOnly = true;
    double ratio = 0.0;
    double first = 0.0;
    for (auto _ : state) {
        auto r = engine->run(o, progress, {});
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            return;
        }
        const auto& t = r->decodeStepSeconds;
        double head = 0.0;
        double tail = 0.0;
        for (std::size_t i = 0; i < 100; ++i) {
            head += t[i];
            tail += t[t.size() - 1 - i];
        }
        first = head / 100.0;
        ratio = tail / head;
    }
    state.counters["steps"] = double(steps);
    state.counters["first100_ms_per_token"] = first * 1e3;
    state.counters["last100_over_first100"] = ratio;
}
BENCHMARK(BM_Qwen35LongDecode)->Unit(benchmark::kMillisecond)->Iterations(1);

} // namespace

BENCHMARK_MAIN();
