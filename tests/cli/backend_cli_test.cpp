// day0 opcheck/run --backend: the CPU reference, an unknown backend, the CUDA plugin, which on a
// machine without a GPU must name the missing device and still list its coverage, and a run on
// the host-simulated test backend (tests/plugins/hostsim_plugin.cpp): dispatch, fallback with
// reasons, failure and the recorded run.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace day0::test {
namespace {

TEST(BackendCli, UnknownBackendIsAUsageErrorListingTheAvailableOnes)
{
    const auto r = runDay0({ "opcheck", "qwen3-8b", "--backend", "tpu-v9" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--backend tpu-v9"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("available: cpu"), std::string::npos) << r.err;
}

TEST(BackendCli, CpuBackendIsTheDefault)
{
    const auto r = runDay0({ "opcheck", "qwen3-0.6b", "--backend", "cpu", "--tokens", "2",
        "--max-outputs", "64", "--json" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["backends"][0]["name"], "day0-cpu");
}

TEST(BackendCli, CudaOpcheckNamesTheMissingDeviceOrRunsOnIt)
{
    const auto r = runDay0({ "opcheck", "deepseek-v3", "--backend", "cuda", "--tokens", "2",
        "--max-outputs", "64", "--json" });
    if (r.exitCode == 2
        && (r.err.find("not installed") != std::string::npos
            || r.err.find("no such backend plugin is installed") != std::string::npos)) {
        GTEST_SKIP() << "the cuda plugin is not built here (no CUDA toolkit): " << r.err;
    }
    const auto json = r.json();
    if (r.exitCode == 2) {
        EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
        EXPECT_EQ(json["available"], false);
        EXPECT_EQ(json["backend"], "cuda");
        bool mla = false;
        for (const auto& row : json["coverage"]) {
            mla = mla || (row["op"] == "attention_mla" && row["native"] == true);
        }
        EXPECT_TRUE(mla) << json.dump();
    } else {
        // A GPU is present: the operators ran on it.
        EXPECT_EQ(r.exitCode, 0) << r.err;
        EXPECT_EQ(json["backends"][0]["name"], "cuda");
        EXPECT_FALSE(json["backends"][0]["coverage"].empty());
    }
}

TEST(BackendCli, RunWithAnUnknownBackendFailsBeforeLoadingWeights)
{
    const auto dir = scratchDir("backend_run");
    const auto shrunk = runDay0({ "shrink", "qwen3-0.6b", "--out", dir + "/m", "-q" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const auto r = runDay0({ "run", dir + "/m", "--backend", "tpu-v9", "--ids", "1,2" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--backend tpu-v9"), std::string::npos) << r.err;
}

#ifdef DAY0_HOSTSIM_PLUGIN_DIR
/// The test backend plugin is found through DAY0_PLUGIN_PATH, which the day0 child inherits.
class HostSimRun : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        ::setenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR, 1);
        s_dir = scratchDir("backend_hostsim");
        const auto shrunk = runDay0({ "shrink", "qwen3-0.6b", "--out", s_dir + "/m", "-q" });
        ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    }
    static void TearDownTestSuite() { ::unsetenv("DAY0_PLUGIN_PATH"); }

    static nlohmann::json op(const nlohmann::json& backend, const std::string& name)
    {
        for (const auto& o : backend["ops"]) {
            if (o["op"] == name) {
                return o;
            }
        }
        ADD_FAILURE() << name << " not in " << backend.dump();
        return {};
    }

    static inline std::string s_dir;
};

TEST_F(HostSimRun, TheTargetRunsOnThePluginAndAgreesWithTheCpuReference)
{
    const std::string store = s_dir + "/runs.sqlite";
    const auto r = runDay0({ "run", s_dir + "/m", "--ids", "1,2,3,4", "--tokens", "3", "--backend",
        "hostsim", "--reference", "fp32", "--json", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    const nlohmann::json backend = j["target"]["backend"];
    EXPECT_EQ(backend["backend"], "hostsim");
    EXPECT_EQ(backend["device"], "host simulation (test plugin)");
    EXPECT_EQ(j["reference"]["backend"]["backend"], "day0-cpu");
    // The declared operators ran natively; rope, which it lacks, fell back and says why.
    for (const char* name : { "embedding", "rms_norm", "rms_norm_residual", "linear",
             "attention_prefill", "attention_decode", "gated_activation" }) {
        const auto o = op(backend, name);
        EXPECT_GT(o.value("native_calls", 0), 0) << name;
        EXPECT_EQ(o.value("fallback_calls", -1), 0) << name;
    }
    const auto rope = op(backend, "rope");
    EXPECT_EQ(rope["native_calls"], 0);
    EXPECT_GT(rope.value("fallback_calls", 0), 0);
    EXPECT_EQ(rope["fallback_reason"], "not implemented by hostsim");
    // Its own kernels: close to the CPU's fp32, not identical.
    const nlohmann::json comparison = j["comparison"];
    EXPECT_EQ(comparison["status"], "pass");
    EXPECT_EQ(comparison["counts"].value("fail", -1), 0);
    EXPECT_EQ(j["target"]["generated"], j["reference"]["generated"]);
    bool differs = false;
    for (const auto& row : comparison["captures"]) {
        differs = differs || row["metrics"].value("rel_l2", 0.0) > 0.0;
    }
    EXPECT_TRUE(differs) << "the plugin's kernels gave the CPU's bits exactly";

    const auto show = runDay0(
        { "runs", "show", std::to_string(j["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_EQ(show.json()["backend"], "hostsim");
    EXPECT_NE(show.out.find("host simulation (test plugin)"), std::string::npos);
}

TEST_F(HostSimRun, DeclinedPrecisionsFallBackAndTheTextSaysWhy)
{
    const auto r = runDay0({ "run", s_dir + "/m", "--ids", "1,2,3", "--tokens", "2", "--backend",
        "hostsim", "--precision", "bf16" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("backend hostsim (host simulation (test plugin)): 0 operator calls "
                         "native"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("hostsim computes fp32 only, not bf16"), std::string::npos) << r.out;
}

TEST_F(HostSimRun, AFailingBackendStopsTheRunWithAnInternalError)
{
    ::setenv("DAY0_HOSTSIM_FAIL", "attention_prefill", 1);
    const auto r = runDay0({ "run", s_dir + "/m", "--ids", "1,2,3", "--tokens", "2", "--backend",
        "hostsim", "--dump", s_dir + "/failed" });
    ::unsetenv("DAY0_HOSTSIM_FAIL");
    EXPECT_EQ(r.exitCode, 3);
    EXPECT_NE(r.err.find("backend hostsim: attention_prefill: hostsim: attention_prefill failed"),
        std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(s_dir + "/failed/manifest.json"));
}

TEST_F(HostSimRun, ValidateRunsThePrecisionAndPerformanceStepsOnTheBackend)
{
    const std::string store = s_dir + "/validate.sqlite";
    const auto r
        = runDay0({ "validate", "qwen3-0.6b", "--backend", "hostsim", "--precision", "fp32",
            "--plan", "tp=2", "--work", s_dir + "/validate", "--json", "-q", "--store", store });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["backend"], "hostsim (host simulation (test plugin))");
    int seen = 0;
    for (const auto& step : j["steps"]) {
        if (step["id"] == "precision" || step["id"] == "performance") {
            ++seen;
            EXPECT_NE(step["summary"].get<std::string>().find("on hostsim"), std::string::npos)
                << step["summary"];
            EXPECT_GT(step["metrics"].value("backend_native_calls", 0.0), 0.0);
            EXPECT_GT(step["metrics"].value("backend_fallback_calls", 0.0), 0.0); // rope
        }
        if (step["id"] == "smoke") {
            EXPECT_FALSE(step["metrics"].contains("backend_native_calls"));
        }
    }
    EXPECT_EQ(seen, 2);
    const auto show = runDay0(
        { "runs", "show", std::to_string(j["run_id"].get<int>()), "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_EQ(show.json()["backend"], "hostsim");
}

TEST_F(HostSimRun, ValidatingALowerPrecisionOnABackendRunsItsFp32Leg)
{
    const auto r
        = runDay0({ "validate", "qwen3-0.6b", "--backend", "hostsim", "--precision", "bf16",
            "--plan", "tp=2", "--work", s_dir + "/validate-bf16", "--json", "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    bool found = false;
    for (const auto& step : j["steps"]) {
        if (step["id"] == "precision") {
            found = true;
            EXPECT_NE(step["summary"].get<std::string>().find("its fp32 leg on hostsim: pass"),
                std::string::npos)
                << step["summary"];
            EXPECT_EQ(step["metrics"].value("fp32_leg_fail", -1.0), 0.0);
        }
    }
    EXPECT_TRUE(found);
}

TEST_F(HostSimRun, EveryRankOfAPlanComputesOnItsOwnBackend)
{
    const auto cpu = runDay0({ "run", s_dir + "/m", "--plan", "tp=2", "--ids", "1,2,3,4",
        "--tokens", "3", "--json", "--no-record" });
    ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
    const auto r = runDay0({ "run", s_dir + "/m", "--plan", "tp=2", "--ids", "1,2,3,4", "--tokens",
        "3", "--backend", "hostsim", "--json", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["sequences"][0]["generated"], cpu.json()["sequences"][0]["generated"]);
    EXPECT_EQ(j["backend"]["backend"], "hostsim");
    EXPECT_EQ(cpu.json()["backend"]["backend"], "day0-cpu");
    ASSERT_EQ(j["ranks"].size(), 2U);
    for (const auto& rank : j["ranks"]) {
        EXPECT_GT(rank.value("backend_native_calls", 0), 0) << rank.dump();
        EXPECT_GT(rank.value("backend_fallback_calls", 0), 0) << rank.dump(); // rope
    }
    EXPECT_EQ(op(j["backend"], "rope")["fallback_reason"], "not implemented by hostsim");

    const auto missing
        = runDay0({ "run", s_dir + "/m", "--plan", "tp=2", "--ids", "1,2", "--backend", "tpu-v9" });
    EXPECT_EQ(missing.exitCode, 2);
    EXPECT_NE(missing.err.find("--backend tpu-v9"), std::string::npos) << missing.err;
}

TEST_F(HostSimRun, TheDeviceProfilersRecordsJoinTheRunsTraceOnItsClock)
{
    const std::string trace = s_dir + "/profiled.json";
    const auto r = runDay0({ "run", s_dir + "/m", "--ids", "1,2,3", "--tokens", "2", "--backend",
        "hostsim", "--profiler", "fakeprof", "--trace", trace, "-q", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::ifstream in(trace);
    const auto j = nlohmann::json::parse(in);
    std::int64_t layerStart = -1;
    std::int64_t kernelStart = -1;
    bool flow = false;
    for (const auto& e : j["traceEvents"]) {
        const std::string name = e.value("name", "");
        if (name == "model.layers.0" && layerStart < 0) {
            layerStart = std::int64_t(e.value("ts", 0.0));
        }
        if (name == "fake_gemm_kernel") {
            kernelStart = std::int64_t(e.value("ts", 0.0));
        }
        flow = flow || e.value("ph", "") == "s" || e.value("ph", "") == "f";
    }
    ASSERT_GE(layerStart, 0) << "the engine's scopes";
    ASSERT_GE(kernelStart, 0) << "the profiler's kernel";
    EXPECT_TRUE(flow) << "the launch flow";
    // One clock: the kernel sits inside the run, not decades away.
    EXPECT_LT(std::abs(kernelStart - layerStart), std::int64_t(60'000'000)) << "µs apart";

    // A profiler that is not installed leaves the host side and says so.
    const auto missing
        = runDay0({ "run", s_dir + "/m", "--ids", "1,2", "--tokens", "1", "--backend", "hostsim",
            "--profiler", "nope", "--trace", s_dir + "/host.json", "-q", "--no-record" });
    EXPECT_EQ(missing.exitCode, 0) << missing.err;
    EXPECT_NE(
        missing.err.find("--profiler nope: the trace has the host side only"), std::string::npos)
        << missing.err;
    EXPECT_TRUE(std::filesystem::exists(s_dir + "/host.json"));
}

TEST_F(HostSimRun, TheFp64ReferenceCannotRunOnABackend)
{
    const auto r = runDay0(
        { "run", s_dir + "/m", "--ids", "1,2", "--backend", "hostsim", "--precision", "fp64" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("fp64 reference runs on day0-cpu only"), std::string::npos) << r.err;
}

TEST_F(HostSimRun, TheFp32LegRunsThePluginInFp32AgainstTheReference)
{
    // A bf16 target on the plugin, and the same plugin in fp32 judged by the fp32 rules: both
    // pass for a sound plugin, and the leg's dump is written beside the others.
    const std::string dumps = s_dir + "/fp32-leg";
    auto r = runDay0({ "run", s_dir + "/m", "--ids", "1,2,3,4", "--tokens", "2", "--backend",
        "hostsim", "--precision", "bf16", "--reference", "fp32", "--fp32-leg", "--dump", dumps,
        "--json", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = r.json();
    EXPECT_EQ(j["comparison"]["status"], "pass");
    EXPECT_EQ(j["fp32_leg"]["precision"], "fp32");
    EXPECT_EQ(j["fp32_leg"]["backend"]["backend"], "hostsim");
    EXPECT_EQ(j["fp32_leg"]["comparison"]["status"], "pass");
    EXPECT_TRUE(
        std::filesystem::exists(std::filesystem::path(dumps) / "target-fp32" / "dump.json"));
    r = runDay0({ "run", s_dir + "/m", "--ids", "1,2", "--precision", "bf16", "--reference", "fp32",
        "--fp32-leg" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("without --backend"), std::string::npos) << r.err;
}
#endif

} // namespace
} // namespace day0::test
