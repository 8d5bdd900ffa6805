// Hostile input (issue #15): each finding of the fuzzing pass, with its small input in
// tests/data/hostile/. Every one must end in exit 1 or 2 with a message naming the file or the
// flag, never a crash (exit 128+), an internal error (3) or exit 0 with a wrong answer. No
// timing assertions: CTest's timeout catches a hang.
#include "cli_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

std::string hostile(const std::string& name)
{
    return (fs::path(DAY0_TEST_DATA_DIR) / "hostile" / name).string();
}

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

// Runs a shell line (for limits and redirections runDay0 does not set up); exit status, and
// stderr in `err`.
int shell(const std::string& line, std::string& err)
{
    const std::string errFile = scratchDir("hostile_shell_err") + "/err";
    const std::string cmd = fmt::format("{} 2>'{}'", line, errFile);
    const int status = std::system(cmd.c_str());
    std::ifstream in(errFile);
    err.assign(std::istreambuf_iterator<char>(in), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Names under `dir`, hidden ones included: what a failed command left behind.
std::vector<std::string> entries(const fs::path& dir)
{
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        out.push_back(e.path().filename().string());
    }
    return out;
}

} // namespace

TEST(HostileInput, DeeplyNestedJsonIsRefusedByEveryReader)
{
    // 2,000 levels (the fuzzer's 80,000 overflowed the stack after the parser).
    const std::vector<std::vector<std::string>> cases = {
        { "inspect", hostile("deep_config.json") },
        { "inspect", "--tensors", hostile("deep_header.safetensors") },
        { "verify", hostile("deep_header.safetensors") },
        { "verify", hostile("deep_index") },
        { "runs", "import", hostile("deep_runs.json") },
    };
    for (const auto& args : cases) {
        const auto r = runDay0(args);
        EXPECT_EQ(r.exitCode, 2) << args[0] << " " << args.back() << ": " << r.err;
        EXPECT_NE(r.err.find("nested deeper than 256 levels"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(fs::path(args.back()).filename().string()), std::string::npos)
            << r.err;
    }
}

TEST(HostileInput, ANumberBeyondADoubleIsMalformedNotAnInternalError)
{
    const auto r = runDay0({ "inspect", hostile("number_overflow_config.json") });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("number_overflow_config.json: malformed JSON"), std::string::npos)
        << r.err;
}

TEST(HostileInput, SizesBeyondAnyModelAreRefusedByName)
{
    // 10^6 layers in 300 bytes took 22 GB; hidden 2^40 printed -6.2e18 parameters; sizes each
    // allowed can still multiply past a 64-bit count.
    const std::vector<std::pair<std::string, std::string>> cases = {
        { "many_layers_config.json", "'num_hidden_layers' is 1000000, more than the 4096" },
        { "huge_hidden_config.json", "'hidden_size' is 1099511627776, more than the 1048576" },
        { "overflowing_product_config.json", "more than the 10^16 Day0 counts exactly" },
    };
    for (const auto& [file, message] : cases) {
        const auto r = runDay0({ "inspect", hostile(file), "--json" });
        EXPECT_EQ(r.exitCode, 2) << file << ": " << r.err;
        EXPECT_NE(r.err.find(file + ": "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST(HostileInput, NumericFlagsAreValidated)
{
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--headroom", "nan" },
            "--headroom: nan is not a finite number" },
        { { "memory", "llama-3.1-8b", "--cluster", "h200:1x8", "--plan", "tp=8", "--reserve",
              "nan" },
            "--reserve: nan is not a finite number" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--micro-batches", "0" },
            "--micro-batches: 0 is out of range [1, 16777216]" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--efficiency", "inf" },
            "--efficiency: inf is not a finite number" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--fp8-efficiency", "0" },
            "--fp8-efficiency: 0 is out of range" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--tp", "8,0" },
            "--tp: 0 is out of range" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:4x8", "--seq", "-5" },
            "--seq: -5 is out of range" },
        { { "convert", kTiny, "--dtype", "bf16", "--out", "x", "-j", "100000" },
            "--jobs: 100000 is out of range [1, 256]" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:100000x100000" },
            "100000 GPUs per node (domain 8) is more than the 1024 Day0 plans for" },
        { { "plan", "llama-3.1-8b", "--cluster", "h200:300000x8" },
            "300000 nodes × 8 GPUs is more than the 262144 GPUs Day0 plans for" },
    };
    for (const auto& c : cases) {
        const auto r = runDay0(c.args);
        EXPECT_EQ(r.exitCode, 2) << c.args[0] << ": " << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST(HostileInput, AMissingValueNeverSwallowsTheNextFlag)
{
    const std::string dir = scratchDir("hostile_swallow");
    const auto r = runDay0({ "shrink", "llama-3.1-8b", "--out", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(
        r.err.find("--out: expected a value, got the option '--no-record'"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists("--no-record"));
}

TEST(HostileInput, AFullStdoutIsAnError)
{
    for (const std::string json : { "", " --json" }) {
        std::string err;
        const int code = shell(
            fmt::format("DAY0_STORE=/dev/null '{}' inspect llama-3.1-8b --no-record{} >/dev/full",
                DAY0_CLI_PATH, json),
            err);
        EXPECT_EQ(code, 2) << err;
        EXPECT_NE(err.find("writing standard output"), std::string::npos) << err;
    }
}

TEST(HostileInput, ACatastrophicTokenizerRegexStopsWithAnError)
{
    const fs::path dir = scratchDir("hostile_regex");
    fs::copy(kTiny, dir / "model");
    fs::copy_file(hostile("backtracking_tokenizer.json"), dir / "model" / "tokenizer.json");
    const auto r = runDay0({ "run", (dir / "model").string(), "--prompt",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "--tokens", "1", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("tokenizer.json: pre-tokenizer regex '(a+)+$'"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("U_REGEX_TIME_OUT"), std::string::npos) << r.err;
}

TEST(HostileInput, ATokenizerValueOfTheWrongTypeNamesTheFile)
{
    const fs::path dir = scratchDir("hostile_tokenizer_type");
    fs::copy(kTiny, dir / "model");
    fs::copy_file(hostile("wrong_type_tokenizer.json"), dir / "model" / "tokenizer.json");
    const auto r = runDay0(
        { "run", (dir / "model").string(), "--prompt", "hello", "--tokens", "1", "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(
        r.err.find("tokenizer.json: token '0' has id \"seven\", not an integer"), std::string::npos)
        << r.err;
}

// A full disk, simulated by a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so writes
// fail with EFBIG as they would with ENOSPC): mounting a small tmpfs needs privileges CI may
// not have. Every writer must exit 2 naming what it could not write and leave nothing behind.
TEST(HostileInput, AFullDiskFailsCleanly)
{
    const fs::path dir = scratchDir("hostile_full_disk");
    // Inputs are made before the limit.
    ASSERT_EQ(runDay0({ "shrink", "llama-3.1-8b", "--out", (dir / "small").string(), "-q",
                          "--no-record" })
                  .exitCode,
        0);
    fs::create_directories(dir / "out");
    const std::string limited
        = fmt::format("trap '' XFSZ; ulimit -f 64; DAY0_STORE=/dev/null exec '{}'", DAY0_CLI_PATH);
    const std::string small = (dir / "small").string();
    const std::string out = (dir / "out").string();
    const std::vector<std::string> commands = {
        fmt::format("{} shrink llama-3.1-8b --out '{}/shrunk' -q --no-record", limited, out),
        fmt::format(
            "{} convert '{}' --dtype f32 --out '{}/f32' -q --no-record", limited, small, out),
        fmt::format(
            "{} shard '{}' --plan tp=2 --out '{}/ranks' -q --no-record", limited, small, out),
        fmt::format("{} run '{}' --ids 1,2,3 --tokens 2 --dump '{}/dump' -q --no-record", limited,
            small, out),
    };
    for (const auto& line : commands) {
        std::string err;
        const int code = shell("sh -c \"" + line + "\"", err);
        EXPECT_EQ(code, 2) << line << "\n" << err;
        EXPECT_EQ(err.find("internal error"), std::string::npos) << err;
        EXPECT_NE(err.find("File too large"), std::string::npos) << line << "\n" << err;
        // Nothing left: no output folder, no hidden temporary.
        const auto left = entries(dir / "out");
        EXPECT_TRUE(left.empty()) << line << " left " << fmt::format("{}", fmt::join(left, ", "));
        for (const auto& name : left) {
            fs::remove_all(dir / "out" / name);
        }
    }
}

TEST(HostileInput, VerifyFindsAnIncompleteShardSeriesAndSummarisesTheCascade)
{
    // 3 of 5 "-of-00005" shards left by an interrupted copy, without the index: it passed.
    const fs::path dir = scratchDir("hostile_series");
    ASSERT_EQ(runDay0({ "shrink", "kimi-k2", "--out", (dir / "full").string(), "--max-shard-size",
                          "0.5", "-q", "--no-record" })
                  .exitCode,
        0);
    fs::create_directories(dir / "part");
    fs::copy_file(dir / "full" / "config.json", dir / "part" / "config.json");
    for (const char* shard : { "model-00001-of-00005.safetensors",
             "model-00002-of-00005.safetensors", "model-00003-of-00005.safetensors" }) {
        fs::copy_file(dir / "full" / shard, dir / "part" / shard);
    }
    const auto r = runDay0({ "verify", (dir / "part").string(), "--no-record" });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(
        r.err.find("incomplete checkpoint: 3 of the 5 shards its names count"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("missing shard 4, 5"), std::string::npos) << r.err;
    // The real error once, the missing tensors that follow from it in one line.
    std::size_t lines = 0;
    for (const char c : r.err) {
        lines += c == '\n' ? 1 : 0;
    }
    EXPECT_LE(lines, 3u) << r.err;
    EXPECT_NE(r.err.find("tensors do not match config.json, following from the problems above"),
        std::string::npos)
        << r.err;
}

TEST(HostileInput, VerifyAcceptsDay0sOwnShardOutputAndChecksItsPlan)
{
    const fs::path dir = scratchDir("hostile_rank_shards");
    ASSERT_EQ(runDay0({ "shrink", "kimi-k2", "--out", (dir / "s").string(), "-q", "--no-record" })
                  .exitCode,
        0);
    ASSERT_EQ(runDay0({ "shard", (dir / "s").string(), "--plan", "pp=2", "--out",
                          (dir / "ranks").string(), "-q", "--no-record" })
                  .exitCode,
        0);
    const auto ok = runDay0({ "verify", (dir / "ranks").string(), "--json", "--no-record" });
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
    EXPECT_EQ(ok.json()["format"], "per-rank shards");
    EXPECT_TRUE(ok.json()["problems"].empty());
    // The second stage's file replaced by the first's: its layers are not the ones planned.
    fs::remove(dir / "ranks" / "day0-manifest.json");
    fs::copy_file(dir / "ranks" / "rank-00000.safetensors",
        dir / "ranks" / "rank-00001.safetensors", fs::copy_options::overwrite_existing);
    const auto bad = runDay0({ "verify", (dir / "ranks").string(), "--no-record" });
    EXPECT_EQ(bad.exitCode, 2) << bad.err;
    EXPECT_NE(bad.err.find("rank-00001.safetensors: tensor '"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("is planned on this rank by"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("more structural problems"), std::string::npos) << bad.err;
}

TEST(HostileInput, AFifoIsRefusedNotWaitedOn)
{
    const fs::path dir = scratchDir("hostile_fifo");
    const std::string fifo = (dir / "config.json").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto r = runDay0({ "inspect", fifo });
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
}

TEST(HostileInput, ALargeSafetensorsHeaderReadsInLinearTime)
{
    // 80,000 one-element tensors (5 MB of header, made here rather than kept in tests/data):
    // nlohmann's callback parser took quadratic time (30 s for 40,000). The bound only catches
    // that: a linear reading takes about a second.
    const fs::path dir = scratchDir("hostile_big_header");
    std::string header = "{";
    for (int i = 0; i < 80000; ++i) {
        header += fmt::format(
            "{}\"t.{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
            i == 0 ? "" : ",", i, 4 * i, 4 * i + 4);
    }
    header += "}";
    {
        std::ofstream out(dir / "big.safetensors", std::ios::binary);
        const std::uint64_t n = header.size();
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << header << std::string(4 * 80000, '\0');
    }
    std::string err;
    const int code = shell(fmt::format("DAY0_STORE=/dev/null timeout 120 '{}' inspect --tensors "
                                       "'{}' --json --no-record >/dev/null",
                               DAY0_CLI_PATH, (dir / "big.safetensors").string()),
        err);
    EXPECT_EQ(code, 0) << "exit 124 is the 120 s bound: " << err;
}

TEST(HostileInput, AnNsysExportWithARecursiveViewIsRefused)
{
    // testcuda_rtx4060ti_report1.sqlite with StringIds replaced by a view that recurses for
    // ever: reading it never returned. Views are not read.
    std::string err;
    const int code = shell(fmt::format("DAY0_STORE=/dev/null timeout 120 '{}' trace import '{}' "
                                       "--no-record >/dev/null",
                               DAY0_CLI_PATH, hostile("recursive_view.sqlite.gz")),
        err);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("recursive_view.sqlite.gz: missing table StringIds"), std::string::npos)
        << err;
}
