// The streamed run's memory bound (issue #22): a ~2 GB checkpoint of a Llama with few wide
// layers and random F32 weights, written by day0's own safetensors writer into a temporary
// folder; `day0 run --stream --memory-budget 512M` on it peaks under 512 MiB of resident memory
// (the child's ru_maxrss, as the kernel counts it) while a normal run of the same prompt needs
// more than 2 GiB, and both produce the same tokens.
#include "checkpoint/safetensors_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// The widths of a wide Llama with random weights.
struct Wide {
    std::int64_t hidden = 2048;
    std::int64_t inter = 4096;
    std::int64_t layers = 13;
    std::int64_t vocab = 256;
};

struct Child {
    int code = -1;
    std::uint64_t peakRssBytes = 0; ///< ru_maxrss of the child
    std::string out;
    std::string err;
};

std::string readAll(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}

/// Runs day0 with `args` and waits for it with wait4, so its own peak RSS is known. fork, not
/// posix_spawn: a vfork-style child would be charged the peak of this process's memory (which
/// wrote the checkpoint through a 2 GB mapping) when it execs.
Child runDay0Measured(const std::vector<std::string>& args, const fs::path& dir)
{
    std::vector<std::string> argv { DAY0_CLI_PATH };
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) {
        cargv.push_back(a.data());
    }
    cargv.push_back(nullptr);
    const auto outFile = dir / "child.out";
    const auto errFile = dir / "child.err";
    Child child;
    const pid_t pid = ::fork();
    if (pid < 0) {
        child.err = std::strerror(errno);
        return child;
    }
    if (pid == 0) {
        const int out = ::open(outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open(errFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(out, 1);
        ::dup2(err, 2);
        ::execv(DAY0_CLI_PATH, cargv.data());
        ::_exit(127);
    }
    int status = 0;
    rusage usage {};
    if (::wait4(pid, &status, 0, &usage) == pid && WIFEXITED(status)) {
        child.code = WEXITSTATUS(status);
    }
    child.peakRssBytes = std::uint64_t(usage.ru_maxrss) * 1024; // Linux: kilobytes
    child.out = readAll(outFile);
    child.err = readAll(errFile);
    return child;
}

/// Small random values (xorshift), so the forward stays finite.
day0::checkpoint::TensorSource randomTensor(
    std::string name, std::vector<std::int64_t> shape, std::uint64_t seed, float scale = 0.02f)
{
    day0::checkpoint::TensorSource t;
    t.name = std::move(name);
    t.dtype = day0::DType::F32;
    t.shape = std::move(shape);
    t.fill = [seed, scale](std::span<std::byte> out) -> day0::Result<void> {
        std::uint64_t x = 0x9E3779B97F4A7C15ull ^ (seed * 0xBF58476D1CE4E5B9ull);
        const std::size_t n = out.size() / sizeof(float);
        std::vector<float> chunk(1 << 16);
        for (std::size_t i = 0; i < n; i += chunk.size()) {
            const std::size_t m = std::min(chunk.size(), n - i);
            for (std::size_t k = 0; k < m; ++k) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                chunk[k] = scale * (float(x >> 40) * (1.0f / 16777216.0f) - 0.5f);
            }
            std::memcpy(out.data() + i * sizeof(float), chunk.data(), m * sizeof(float));
        }
        return day0::success();
    };
    return t;
}

day0::checkpoint::TensorSource onesTensor(std::string name, std::int64_t n)
{
    day0::checkpoint::TensorSource t;
    t.name = std::move(name);
    t.dtype = day0::DType::F32;
    t.shape = { n };
    t.fill = [](std::span<std::byte> out) -> day0::Result<void> {
        const float one = 1.0f;
        for (std::size_t i = 0; i < out.size(); i += sizeof(float)) {
            std::memcpy(out.data() + i, &one, sizeof(float));
        }
        return day0::success();
    };
    return t;
}

/// A Llama of `w.layers` wide layers with random F32 weights; returns the file's size.
std::uint64_t writeWideLlama(const fs::path& dir, const Wide& w = {})
{
    const nlohmann::json config = { { "architectures", { "LlamaForCausalLM" } },
        { "model_type", "llama" }, { "hidden_act", "silu" }, { "hidden_size", w.hidden },
        { "intermediate_size", w.inter }, { "max_position_embeddings", 512 },
        { "num_attention_heads", 16 }, { "num_hidden_layers", w.layers },
        { "num_key_value_heads", 16 }, { "rms_norm_eps", 1e-5 }, { "rope_theta", 10000.0 },
        { "tie_word_embeddings", false }, { "torch_dtype", "float32" }, { "vocab_size", w.vocab } };
    std::ofstream(dir / "config.json") << config.dump(2);
    std::vector<day0::checkpoint::TensorSource> tensors;
    std::uint64_t seed = 1;
    tensors.push_back(
        randomTensor("model.embed_tokens.weight", { w.vocab, w.hidden }, seed++, 1.0f));
    for (std::int64_t l = 0; l < w.layers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        tensors.push_back(onesTensor(p + "input_layernorm.weight", w.hidden));
        tensors.push_back(onesTensor(p + "post_attention_layernorm.weight", w.hidden));
        for (const char* proj : { "q_proj", "k_proj", "v_proj", "o_proj" }) {
            tensors.push_back(
                randomTensor(p + "self_attn." + proj + ".weight", { w.hidden, w.hidden }, seed++));
        }
        tensors.push_back(randomTensor(p + "mlp.gate_proj.weight", { w.inter, w.hidden }, seed++));
        tensors.push_back(randomTensor(p + "mlp.up_proj.weight", { w.inter, w.hidden }, seed++));
        tensors.push_back(randomTensor(p + "mlp.down_proj.weight", { w.hidden, w.inter }, seed++));
    }
    tensors.push_back(onesTensor("model.norm.weight", w.hidden));
    tensors.push_back(randomTensor("lm_head.weight", { w.vocab, w.hidden }, seed++));
    auto written = day0::checkpoint::writeSafetensors(dir / "model.safetensors", tensors);
    return written ? *written : 0;
}

TEST(StreamMemory, StreamedRunStaysUnderItsBudgetWhereANormalRunDoesNot)
{
    const fs::path dir
        = fs::temp_directory_path() / fmt::format("day0_stream_memory_{}", ::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
    struct Cleanup {
        fs::path dir;
        ~Cleanup()
        {
            std::error_code ec;
            fs::remove_all(dir, ec); // the 2 GB go whatever the outcome
        }
    } cleanup { dir };
    const std::uint64_t size = writeWideLlama(dir);
    ASSERT_GT(size, std::uint64_t(2) << 30) << "the checkpoint was not written";
    const std::vector<std::string> run { "run", dir.string(), "--ids", "3,1,4,1,5", "--tokens", "2",
        "--json", "-q", "--no-record" };

    auto streamArgs = run;
    streamArgs.insert(streamArgs.end(), { "--stream", "--memory-budget", "512M" });
    const Child streamed = runDay0Measured(streamArgs, dir);
    ASSERT_EQ(streamed.code, 0) << streamed.err;
    const auto s = nlohmann::json::parse(streamed.out);
    const std::uint64_t budget = std::uint64_t(512) << 20;
    EXPECT_LT(streamed.peakRssBytes, budget) << "streamed run peaked at " << streamed.peakRssBytes;
    EXPECT_LT(s["stream"]["peak_rss_bytes"].get<std::uint64_t>(), budget);
    EXPECT_EQ(s["stream"]["memory_budget"].get<std::uint64_t>(), budget);
    // Every step read the whole checkpoint's weights.
    EXPECT_GT(s["stream"]["bytes_read"].get<std::uint64_t>(), 2 * (size - (1 << 20)));

    const Child normal = runDay0Measured(run, dir);
    ASSERT_EQ(normal.code, 0) << normal.err;
    EXPECT_GT(normal.peakRssBytes, std::uint64_t(2) << 30)
        << "a normal run peaked at only " << normal.peakRssBytes;
    const auto n = nlohmann::json::parse(normal.out);
    EXPECT_EQ(s["target"]["generated"], n["target"]["generated"]);
    std::printf("checkpoint %.2f GiB: streamed peak RSS %.1f MiB (budget 512 MiB; VmHWM it "
                "reported %.1f MiB), normal %.1f MiB\n",
        double(size) / double(1 << 30), double(streamed.peakRssBytes) / double(1 << 20),
        double(s["stream"]["peak_rss_bytes"].get<std::uint64_t>()) / double(1 << 20),
        double(normal.peakRssBytes) / double(1 << 20));
}

} // namespace

namespace {

/// A temporary folder removed whatever the outcome.
struct ScratchDir {
    fs::path dir;
    explicit ScratchDir(const std::string& name)
        : dir(fs::temp_directory_path() / fmt::format("{}_{}", name, ::getpid()))
    {
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~ScratchDir()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

// `day0 validate --stream --memory-budget` on a checkpoint half as big again as the budget: each
// step passes or is skipped by name, the whole validation (hashing, sharding and its reassembly
// check, the smoke, the tp=2 run whose ranks stream their rank files, precision with its
// inject-mode and end-to-end runs, and performance) peaks under the budget, while loading the model whole (`day0 run`) takes more than the checkpoint's
// size.
TEST(StreamMemory, StreamedValidationStaysUnderItsBudget)
{
    const ScratchDir scratch("day0_validate_stream_memory");
    const fs::path model = scratch.dir / "model";
    fs::create_directories(model);
    const Wide wide { 1024, 2048, 10, 256 };
    const std::uint64_t size = writeWideLlama(model, wide);
    const std::uint64_t budget = std::uint64_t(256) << 20;
    ASSERT_GT(size, budget + budget / 2) << "the checkpoint was not written";
    const Child manifest
        = runDay0Measured({ "verify", model.string(), "--write-manifest", "-q" }, scratch.dir);
    ASSERT_EQ(manifest.code, 0) << manifest.err;

    const Child streamed = runDay0Measured(
        { "validate", model.string(), "--stream", "--memory-budget", "256M", "--plan", "tp=2",
            "--no-serve", "--tokens", "2", "--eval-sequences", "1", "--eval-length", "4", "--work",
            (scratch.dir / "work").string(), "--json", "-q", "--no-record" },
        scratch.dir);
    ASSERT_EQ(streamed.code, 0) << streamed.err << streamed.out;
    const auto j = nlohmann::json::parse(streamed.out);
    std::map<std::string, std::string> status;
    for (const auto& step : j["steps"]) {
        status[step["id"].get<std::string>()] = step["status"].get<std::string>();
    }
    for (const char* id :
        { "weights", "convert", "shard", "smoke", "multi_rank", "precision", "performance" }) {
        EXPECT_EQ(status[id], "passed") << id;
    }
    // The two tp ranks streamed their rank files, each within half the budget.
    for (const auto& step : j["steps"]) {
        if (step["id"] == "multi_rank") {
            const auto& metrics = step["metrics"];
            ASSERT_TRUE(metrics.contains("stream_rank_peak_bytes")) << step.dump();
            EXPECT_GT(metrics["stream_bytes_read"].get<double>(), 0.0);
            EXPECT_LE(metrics["stream_rank_peak_bytes"].get<double>(), double(budget / 2));
        }
    }
    EXPECT_LT(streamed.peakRssBytes, budget)
        << "streamed validation peaked at " << streamed.peakRssBytes;

    const Child whole = runDay0Measured(
        { "run", model.string(), "--ids", "3,1", "--tokens", "2", "--json", "-q", "--no-record" },
        scratch.dir);
    ASSERT_EQ(whole.code, 0) << whole.err;
    EXPECT_GT(whole.peakRssBytes, size) << "a normal run peaked at only " << whole.peakRssBytes;
    std::printf("checkpoint %.0f MiB: streamed validation peak RSS %.1f MiB (budget 256 MiB), a "
                "normal run %.1f MiB\n",
        double(size) / double(1 << 20), double(streamed.peakRssBytes) / double(1 << 20),
        double(whole.peakRssBytes) / double(1 << 20));
}

} // namespace
