// The files checkpoint_bench reads, written once per run into a temporary folder (removed at
// exit): shard files for the hashes, one BF16, one FP8 and one FP4 tensor for the conversions,
// and a BF16 Llama checkpoint for the streamed run. Included by checkpoint_bench.cpp (and its
// checkpoint_bench_stream.h) only.
#pragma once

#include "checkpoint/safetensors_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace day0::bench::checkpoint_files {

namespace fs = std::filesystem;
namespace ck = day0::checkpoint;

/// DAY0_BENCH_QUICK=1 (CTest): small files.
inline bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

constexpr std::int64_t kFp4Cols = 2048;

struct Fixture {
    fs::path dir;
    std::vector<std::string> shards;
    std::uint64_t shardBytes = 0;
    fs::path tensorFile;
    std::uint64_t tensorBytes = 0;
    fs::path fp8File; ///< one F8E4M3 tensor of as many elements as the BF16 one
    std::uint64_t fp8Bytes = 0;
    fs::path fp4File; ///< FP4 codes of as many elements (two a byte), NVFP4 and MXFP4 scales
    std::uint64_t fp4Bytes = 0; ///< the codes' bytes
    fs::path streamDir; ///< a BF16 Llama checkpoint for the streamed run
    std::uint64_t streamBytes = 0;
    bool openssl = false;
    std::vector<float> out;

    Fixture()
    {
        dir = fs::temp_directory_path() / fmt::format("day0_checkpoint_bench_{}", ::getpid());
        fs::create_directories(dir);
        const int files = quick() ? 4 : 8;
        const std::size_t size = quick() ? (std::size_t(8) << 20) : (std::size_t(128) << 20);
        std::vector<char> data(size);
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        for (auto& c : data) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            c = char(x);
        }
        for (int i = 0; i < files; ++i) {
            const auto name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, files);
            data[0] = char(i);
            std::ofstream(dir / name, std::ios::binary)
                .write(data.data(), std::streamsize(data.size()));
            shards.push_back(name);
            shardBytes += size;
        }
        // One BF16 tensor for the load benchmark.
        const std::int64_t n = std::int64_t(size / 2);
        tensorBytes = std::uint64_t(n) * 2;
        tensorFile = dir / "tensor.safetensors";
        std::vector<ck::TensorSource> t;
        t.push_back(ck::tensorFromBytes("w", day0::DType::BF16, { n },
            std::as_bytes(std::span(data.data(), std::size_t(tensorBytes)))));
        if (!ck::writeSafetensors(tensorFile, t).ok()) {
            std::abort();
        }
        fp8Bytes = std::uint64_t(n);
        fp8File = dir / "fp8.safetensors";
        std::vector<ck::TensorSource> f8;
        f8.push_back(ck::tensorFromBytes("w", day0::DType::F8E4M3, { n },
            std::as_bytes(std::span(data.data(), std::size_t(fp8Bytes)))));
        if (!ck::writeSafetensors(fp8File, f8).ok()) {
            std::abort();
        }
        writeFp4(data, n);
        out.assign(std::size_t(n), 1.0f); // touched once, so page faults stay out of the loop
        writeStreamCheckpoint();
        openssl = std::system("command -v openssl > /dev/null 2>&1") == 0;
    }

    /// `n` E2M1 codes as a [n / 2048, 2048] matrix (random bytes), with one E4M3 scale per 16
    /// (NVFP4's groups) and one E8M0 scale per 32 (MXFP4's), as U8 tensors.
    void writeFp4(const std::vector<char>& data, std::int64_t n)
    {
        const std::int64_t rows = n / kFp4Cols;
        fp4Bytes = std::uint64_t(rows * kFp4Cols / 2);
        fp4File = dir / "fp4.safetensors";
        std::vector<std::uint8_t> e4m3(std::size_t(rows * kFp4Cols / 16));
        std::vector<std::uint8_t> e8m0(std::size_t(rows * kFp4Cols / 32));
        for (std::size_t i = 0; i < e4m3.size(); ++i) {
            e4m3[i] = std::uint8_t(0x30 + std::uint8_t(data[i]) % 0x30); // 2^-1 to 2^5
        }
        for (std::size_t i = 0; i < e8m0.size(); ++i) {
            e8m0[i] = std::uint8_t(118 + std::uint8_t(data[i]) % 16); // 2^-9 to 2^6
        }
        std::vector<ck::TensorSource> t;
        t.push_back(ck::tensorFromBytes("w", day0::DType::U8, { rows, kFp4Cols / 2 },
            std::as_bytes(std::span(data.data(), std::size_t(fp4Bytes)))));
        t.push_back(ck::tensorFromBytes("nvfp4_scale", day0::DType::U8, { rows, kFp4Cols / 16 },
            std::as_bytes(std::span(e4m3))));
        t.push_back(ck::tensorFromBytes("mxfp4_scale", day0::DType::U8, { rows, kFp4Cols / 32 },
            std::as_bytes(std::span(e8m0))));
        if (!ck::writeSafetensors(fp4File, t).ok()) {
            std::abort();
        }
    }

    /// A Llama of wide BF16 layers (64 MiB quick, 1 GiB otherwise) with random weights.
    void writeStreamCheckpoint()
    {
        const std::int64_t hidden = 1024;
        const std::int64_t inter = 2816;
        const std::int64_t layers = quick() ? 2 : 40;
        streamDir = dir / "stream";
        fs::create_directories(streamDir);
        const nlohmann::json config = { { "architectures", { "LlamaForCausalLM" } },
            { "model_type", "llama" }, { "hidden_act", "silu" }, { "hidden_size", hidden },
            { "intermediate_size", inter }, { "max_position_embeddings", 512 },
            { "num_attention_heads", 8 }, { "num_hidden_layers", layers },
            { "num_key_value_heads", 8 }, { "rms_norm_eps", 1e-5 }, { "rope_theta", 10000.0 },
            { "tie_word_embeddings", false }, { "torch_dtype", "bfloat16" },
            { "vocab_size", 256 } };
        std::ofstream(streamDir / "config.json") << config.dump(2);
        std::vector<ck::TensorSource> tensors;
        const auto add = [&](std::string name, std::vector<std::int64_t> shape) {
            ck::TensorSource t;
            t.name = std::move(name);
            t.dtype = day0::DType::BF16;
            t.shape = std::move(shape);
            t.fill = [](std::span<std::byte> bytes) -> day0::Result<void> {
                std::uint64_t x = 0x2545F4914F6CDD1Dull;
                for (std::size_t i = 0; i + 2 <= bytes.size(); i += 2) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    // Sign and mantissa random, magnitude about 2^-7.
                    const auto bits = std::uint16_t((x & 0x807F) | 0x3C00);
                    std::memcpy(bytes.data() + i, &bits, 2);
                }
                return day0::success();
            };
            tensors.push_back(std::move(t));
        };
        add("model.embed_tokens.weight", { 256, hidden });
        for (std::int64_t l = 0; l < layers; ++l) {
            const std::string p = fmt::format("model.layers.{}.", l);
            add(p + "input_layernorm.weight", { hidden });
            add(p + "post_attention_layernorm.weight", { hidden });
            for (const char* proj : { "q_proj", "k_proj", "v_proj", "o_proj" }) {
                add(p + "self_attn." + proj + ".weight", { hidden, hidden });
            }
            add(p + "mlp.gate_proj.weight", { inter, hidden });
            add(p + "mlp.up_proj.weight", { inter, hidden });
            add(p + "mlp.down_proj.weight", { hidden, inter });
        }
        add("model.norm.weight", { hidden });
        add("lm_head.weight", { 256, hidden });
        auto written = ck::writeSafetensors(streamDir / "model.safetensors", tensors);
        if (!written) {
            std::abort();
        }
        streamBytes = *written;
    }
    ~Fixture()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

inline Fixture& fixture()
{
    static Fixture f;
    return f;
}

/// The FP8 tensor read as a [rows, 2048] matrix with 128x128 block scales (DeepSeek-V3's
/// layout), and its scales: floats, as the checkpoint's F32 `weight_scale_inv` read as double.
constexpr std::int64_t kFp8Cols = 2048;
constexpr std::int64_t kFp8Block = 128;

inline const std::vector<double>& fp8Scales()
{
    static const std::vector<double> scales = [] {
        const auto rows = std::int64_t(fixture().fp8Bytes) / kFp8Cols;
        std::vector<double> s(
            std::size_t(((rows + kFp8Block - 1) / kFp8Block) * (kFp8Cols / kFp8Block)));
        for (std::size_t i = 0; i < s.size(); ++i) {
            s[i] = double(float((1.0 + double(i % 17) / 64.0) / 448.0));
        }
        return s;
    }();
    return scales;
}

} // namespace day0::bench::checkpoint_files
