// day0 run --grad on a shrunk Llama: the gradient dump's names (<anchor>#grad,
// <parameter>#grad), its comparison with the PyTorch twin's autograd dump by name (day0 compare
// finds no divergence), and what --grad refuses by name.
#include "cli_runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

using day0::test::captureNames;
using day0::test::runDay0;
using day0::test::scratchDir;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

/// `day0 run CKPT --grad --precision P --ids IDS --dump OUT --json`.
day0::test::CliResult gradPass(const std::string& checkpoint, const std::string& precision,
    const std::string& ids, const std::string& out)
{
    return runDay0({ "run", checkpoint, "--grad", "--precision", precision, "--ids", ids, "--dump",
        out, "--json", "--no-record", "-q" });
}

/// A bf16 pass beside the fp64 one of the same ids: both ran, the bf16 one says so, its loss is
/// within 1% of fp64's but not equal, and its dump holds the same captures.
void expectBf16BesideFp64(const day0::test::CliResult& wide, const std::string& wideDump,
    const day0::test::CliResult& bf16, const std::string& bf16Dump)
{
    ASSERT_EQ(wide.exitCode, 0) << wide.err;
    ASSERT_EQ(bf16.exitCode, 0) << bf16.err;
    EXPECT_EQ(bf16.json()["precision"], "bf16");
    const double l64 = wide.json()["loss"].get<double>();
    const double l16 = bf16.json()["loss"].get<double>();
    EXPECT_NE(l16, l64);
    EXPECT_NEAR(l16, l64, 1e-2 * l64);
    EXPECT_EQ(captureNames(bf16Dump), captureNames(wideDump));
}

} // namespace

TEST(CliGrad, GradientDumpOfAShrunkLlamaLinesUpWithTorchAutograd)
{
    const std::string dir = scratchDir("grad_cli");
    const auto shrunk
        = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::string ids = "3,17,42,99,7,250";
    const auto r = runDay0({ "run", dir + "/llama", "--grad", "--precision", "fp64", "--ids", ids,
        "--dump", dir + "/fp64", "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto j = r.json();
    EXPECT_GT(j["loss"].get<double>(), 0.0);
    EXPECT_EQ(j["counted"], 5); // the last id has no next token
    EXPECT_EQ(j["activations"], 4 * 5 + 3); // 4 layers × 5 anchors, embedding, norm, head
    EXPECT_GT(j["grad_norm"].get<double>(), 0.0);
    const auto names = captureNames(dir + "/fp64");
    for (const char* name :
        { "lm_head", "lm_head#grad", "model.embed_tokens#grad", "model.layers.0#grad",
            "model.layers.3.mlp#grad", "model.layers.0.self_attn.q_proj.weight#grad",
            "model.embed_tokens.weight#grad", "lm_head.weight#grad", "model.norm.weight#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    EXPECT_EQ(
        names.size(), std::size_t(1 + j["activations"].get<int>() + j["parameters"].get<int>()));

    // The twin's autograd dump compares by name: no capture diverges.
    if (std::system(fmt::format("{} -c 'import torch, numpy' >/dev/null 2>&1", kPython).c_str())
        == 0) {
        const auto script = std::filesystem::path(DAY0_TEST_DATA_DIR) / ".." / ".." / "plugins"
            / "torch" / "day0_dump.py";
        ASSERT_EQ(std::system(fmt::format("{} {} {}/llama --grad --ids {} --dtype float64 --out "
                                          "{}/torch > {}/torch.log 2>&1",
                      kPython, script.string(), dir, ids, dir, dir)
                                  .c_str()),
            0);
        const auto c = runDay0({ "compare", dir + "/torch", dir + "/fp64", "--json", "-q" });
        ASSERT_EQ(c.exitCode, 0) << c.out << c.err;
        const auto cmp = c.json();
        EXPECT_TRUE(cmp["first_divergence"].is_null()) << cmp["first_divergence"].dump();
        EXPECT_TRUE(cmp["only_in_reference"].empty()) << cmp["only_in_reference"].dump();
        EXPECT_TRUE(cmp["only_in_target"].empty()) << cmp["only_in_target"].dump();
        EXPECT_EQ(cmp["captures"].size(), names.size());
        for (const auto& row : cmp["captures"]) {
            // The logits' gradient is compared as a tensor, not as a distribution.
            EXPECT_EQ(row.contains("logits"), row["name"] == "lm_head") << row["name"];
        }
    }

    // fp32: the same names. It is recorded as a run, its loss and gradient norm as metrics.
    const std::string store = dir + "/runs.sqlite";
    const auto f = runDay0({ "run", dir + "/llama", "--grad", "--ids", ids, "--dump", dir + "/fp32",
        "--json", "--store", store, "-q" });
    ASSERT_EQ(f.exitCode, 0) << f.err;
    EXPECT_NEAR(f.json()["loss"].get<double>(), j["loss"].get<double>(), 1e-4);
    EXPECT_EQ(captureNames(dir + "/fp32"), names);
    ASSERT_TRUE(f.json()["run_id"].is_number()) << f.out;
    const auto show = runDay0({ "runs", "show", std::to_string(f.json()["run_id"].get<int>()),
        "--json", "--store", store });
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const auto run = show.json();
    EXPECT_EQ(run["precision"], "fp32");
    bool loss = false;
    for (const auto& m : run["metrics"]) {
        loss = loss || (m["name"] == "loss" && m["value"] == f.json()["loss"]);
    }
    EXPECT_TRUE(loss) << run["metrics"].dump();
}

TEST(CliGrad, RefusesWhatHasNoBackwardByName)
{
    const std::string dir = scratchDir("grad_cli_refusals");
    const auto shrunk
        = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    auto r = runDay0({ "run", dir + "/llama", "--grad", "--precision", "fp8", "--ids", "1,2,3",
        "--no-record", "-q" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--precision other than fp64/fp32/bf16/fp16"), std::string::npos) << r.err;
    r = runDay0({ "run", dir + "/llama", "--grad", "--reference", "fp64", "--ids", "1,2,3",
        "--no-record", "-q" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--reference"), std::string::npos) << r.err;
    r = runDay0({ "run", dir + "/llama", "--grad", "--ids", "1,2,3", "--targets", "2,3",
        "--no-record", "-q" });
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("targets"), std::string::npos) << r.err;
    const auto gptOss
        = runDay0({ "shrink", "gpt-oss-20b", "--out", dir + "/gpt-oss", "-q", "--no-record" });
    ASSERT_EQ(gptOss.exitCode, 0) << gptOss.err;
    // gpt-oss's emulated bf16 backward runs (core/exec backward_bf16_frontier_test judges it).
    r = runDay0({ "run", dir + "/gpt-oss", "--grad", "--precision", "bf16", "--ids", "1,2,3",
        "--json", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_GT(r.json()["loss"].get<double>(), 0.0);
    // In fp64 it runs, and the dump names its parameters as the checkpoint does.
    r = runDay0({ "run", dir + "/gpt-oss", "--grad", "--ids", "1,2,3,4,5,6", "--dump",
        dir + "/gpt-oss-grad", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto names = captureNames(dir + "/gpt-oss-grad");
    for (const char* name :
        { "model.layers.0.self_attn.sinks#grad", "model.layers.0.mlp.experts.gate_up_proj#grad",
            "model.layers.0.mlp.experts.down_proj_bias#grad", "model.layers.0.mlp.router.bias#grad",
            "model.layers.0.self_attn.o_proj.bias#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    // The summary counts the parameters as the dump names them (the fused experts once each,
    // not the engine's per-expert pieces).
    const auto summary = runDay0({ "run", dir + "/gpt-oss", "--grad", "--ids", "1,2,3,4,5,6",
        "--json", "--no-record", "-q" });
    ASSERT_EQ(summary.exitCode, 0) << summary.err;
    // The dump holds the logits, every anchor's gradient, every parameter's gradient and each
    // MoE layer's routing as a forward dump names it (the softmax router's logits and choices).
    const auto j = summary.json();
    const std::size_t routing = day0::test::routingCaptures(names);
    EXPECT_TRUE(names.contains("model.layers.0.mlp.router"));
    EXPECT_TRUE(names.contains("model.layers.0.mlp.router#topk"));
    EXPECT_EQ(
        j["parameters"].get<std::size_t>() + j["activations"].get<std::size_t>() + 1 + routing,
        names.size());
    const auto choices = std::count_if(
        names.begin(), names.end(), [](const std::string& n) { return n.ends_with("#topk"); });
    EXPECT_GT(choices, 0);
    EXPECT_EQ(routing, 2 * std::size_t(choices));
}

TEST(CliGrad, Bf16GradientsCompareWithTheFp64OnesInDay0Compare)
{
    const std::string dir = scratchDir("grad_cli_bf16");
    const auto shrunk
        = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::string ids = "3,17,42,99,7,250,128,64";
    const auto wide = gradPass(dir + "/llama", "fp64", ids, dir + "/fp64");
    const auto bf16 = gradPass(dir + "/llama", "bf16", ids, dir + "/bf16");
    expectBf16BesideFp64(wide, dir + "/fp64", bf16, dir + "/bf16");
    if (HasFatalFailure()) {
        return;
    }

    // day0 compare lines the gradients up by name; each parameter's gradient is off by what
    // bf16 rounding explains.
    const auto c
        = runDay0({ "compare", dir + "/fp64", dir + "/bf16", "--json", "--no-record", "-q" });
    ASSERT_LE(c.exitCode, 1) << c.err;
    const auto cmp = c.json();
    EXPECT_TRUE(cmp["only_in_reference"].empty());
    EXPECT_TRUE(cmp["only_in_target"].empty());
    int parameters = 0;
    double smallest = 1.0;
    double largest = 0.0;
    for (const auto& row : cmp["captures"]) {
        const auto name = row["name"].get<std::string>();
        if (!name.ends_with(".weight#grad")) {
            continue;
        }
        ++parameters;
        const double rel = row["metrics"]["rel_l2"].get<double>();
        smallest = std::min(smallest, rel);
        largest = std::max(largest, rel);
    }
    std::printf("bf16 against fp64: %d parameter gradients, rel_l2 %.2e..%.2e\n", parameters,
        smallest, largest);
    EXPECT_GT(parameters, 30);
    EXPECT_GE(smallest, 1e-4);
    EXPECT_LE(largest, 5e-2);
}

/// The relative L2 of every parameter gradient of `target` against `reference`, by day0 compare.
std::vector<double> parameterErrors(const std::string& reference, const std::string& target)
{
    const auto c = runDay0({ "compare", reference, target, "--json", "--no-record", "-q" });
    EXPECT_LE(c.exitCode, 1) << c.err;
    std::vector<double> errors;
    if (c.exitCode > 1) {
        return errors;
    }
    const auto cmp = c.json();
    EXPECT_TRUE(cmp["only_in_reference"].empty());
    EXPECT_TRUE(cmp["only_in_target"].empty());
    for (const auto& row : cmp["captures"]) {
        if (row["name"].get<std::string>().ends_with(".weight#grad")) {
            // Null: not finite (a gradient where the reference has none), the worst of all.
            const auto& rel = row["metrics"]["rel_l2"];
            errors.push_back(
                rel.is_number() ? rel.get<double>() : std::numeric_limits<double>::infinity());
        }
    }
    std::sort(errors.begin(), errors.end());
    return errors;
}

TEST(CliGrad, Bf16GradientsOfMultiHeadLatentAttentionModels)
{
    // DeepSeek-V3 and Kimi-K2 (MLA, sigmoid group-limited routing, shared expert), shrunk: the
    // bf16 pass's gradients against fp64's are bf16-sized where a token reaches them and stay
    // zero where none does (routed experts no token chose: rel_l2 0 against an all-zero
    // reference), and they are not fp32's (the rounding happens).
    const std::string dir = scratchDir("grad_cli_mla_bf16");
    const std::string ids = "3,17,42,99,7,249,128,64,5,31";
    for (const std::string model : { "deepseek-v3", "kimi-k2" }) {
        SCOPED_TRACE(model);
        const std::string ckpt = dir + "/" + model;
        const auto shrunk = runDay0({ "shrink", model, "--out", ckpt, "-q", "--no-record" });
        ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
        const auto wide = gradPass(ckpt, "fp64", ids, ckpt + "-fp64");
        const auto fp32 = gradPass(ckpt, "fp32", ids, ckpt + "-fp32");
        const auto bf16 = gradPass(ckpt, "bf16", ids, ckpt + "-bf16");
        ASSERT_EQ(fp32.exitCode, 0) << fp32.err;
        expectBf16BesideFp64(wide, ckpt + "-fp64", bf16, ckpt + "-bf16");
        if (HasFatalFailure()) {
            return;
        }
        auto toWide = parameterErrors(ckpt + "-fp64", ckpt + "-bf16");
        auto toFp32 = parameterErrors(ckpt + "-fp32", ckpt + "-bf16");
        auto fp32ToWide = parameterErrors(ckpt + "-fp64", ckpt + "-fp32");
        ASSERT_GT(toWide.size(), 30u);
        // Idle experts: zero in every pass.
        const auto idle = std::count(toWide.begin(), toWide.end(), 0.0);
        EXPECT_EQ(std::count(toFp32.begin(), toFp32.end(), 0.0), idle);
        toWide.erase(toWide.begin(), toWide.begin() + idle);
        toFp32.erase(toFp32.begin(), toFp32.begin() + idle);
        std::printf("%s bf16 against fp64: %zu parameter gradients rel_l2 %.2e..%.2e (median "
                    "%.2e), %lld idle; against fp32 %.2e..%.2e; fp32 against fp64 at most %.2e; "
                    "loss fp64 %.6f bf16 %.6f\n",
            model.c_str(), toWide.size(), toWide.front(), toWide.back(), toWide[toWide.size() / 2],
            static_cast<long long>(idle), toFp32.front(), toFp32.back(), fp32ToWide.back(),
            wide.json()["loss"].get<double>(), bf16.json()["loss"].get<double>());
        EXPECT_GE(toWide.front(), 1e-4);
        EXPECT_GE(toWide[toWide.size() / 2], 1e-3);
        EXPECT_LE(toWide.back(), 5e-2);
        EXPECT_GE(toFp32.front(), 1e-4);
        EXPECT_LE(fp32ToWide.back(), 1e-4);
    }
}

TEST(CliGrad, InjectModeGradientsSeparateEachLayersOwnErrorInDay0Compare)
{
    const std::string dir = scratchDir("grad_cli_inject");
    const auto shrunk
        = runDay0({ "shrink", "llama-3.1-8b", "--out", dir + "/llama", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    const std::string ids = "3,17,42,99,7,250";
    const auto pass = [&](const std::string& precision, const std::string& out,
                          const std::string& inject) {
        std::vector<std::string> args = { "run", dir + "/llama", "--grad", "--precision", precision,
            "--ids", ids, "--dump", dir + "/" + out, "--json", "--no-record", "-q" };
        if (!inject.empty()) {
            args.push_back("--inject-from");
            args.push_back(dir + "/" + inject);
        }
        return runDay0(args);
    };
    ASSERT_EQ(pass("fp64", "fp64", "").exitCode, 0);
    ASSERT_EQ(pass("fp32", "fp32", "").exitCode, 0);
    const auto injected = pass("fp32", "fp32-inject", "fp64");
    ASSERT_EQ(injected.exitCode, 0) << injected.err;
    EXPECT_EQ(injected.json()["mode"], "inject");

    const auto c = runDay0({ "compare", dir + "/fp64", dir + "/fp32", "--local",
        dir + "/fp32-inject", "--json", "--no-record", "-q" });
    ASSERT_LE(c.exitCode, 1) << c.err;
    const auto cmp = c.json();
    ASSERT_TRUE(cmp["gradients"].is_object()) << c.out;
    EXPECT_EQ(cmp["gradients"]["order"], "backward");
    const auto& layers = cmp["gradients"]["layer_backward"];
    ASSERT_EQ(layers.size(), 4U);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& e = layers[i];
        EXPECT_EQ(e["layer"], 3 - int(i));
        ASSERT_TRUE(e["own"].is_number()) << e.dump();
        // fp32 rounding in every layer's backward: an own error of fp32's size, below the
        // accumulated one the layers after it hand down.
        EXPECT_GT(e["own"].get<double>(), 0.0) << e.dump();
        EXPECT_LT(e["own"].get<double>(), 1e-4) << e.dump();
    }
    EXPECT_EQ(layers[3]["capture"], "model.embed_tokens#grad");

    const auto text = runDay0({ "compare", dir + "/fp64", dir + "/fp32", "--local",
        dir + "/fp32-inject", "--no-record", "-q" });
    EXPECT_NE(text.out.find("gradients flow backward"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("largest own error: layer"), std::string::npos) << text.out;

    // Injecting a forward dump, or a gradient dump of other ids, is refused by name.
    const auto forward = runDay0({ "run", dir + "/llama", "--precision", "fp32", "--ids", ids,
        "--tokens", "1", "--dump", dir + "/forward", "--no-record", "-q" });
    ASSERT_EQ(forward.exitCode, 0) << forward.err;
    const auto r = pass("fp32", "bad", "forward");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("not a gradient dump"), std::string::npos) << r.err;
    const auto other = runDay0({ "run", dir + "/llama", "--grad", "--ids", "1,2,3", "--inject-from",
        dir + "/fp64", "--no-record", "-q" });
    EXPECT_EQ(other.exitCode, 2);
    EXPECT_NE(other.err.find("other token ids"), std::string::npos) << other.err;
    const auto noGrad = runDay0({ "run", dir + "/llama", "--ids", ids, "--inject-from",
        dir + "/fp64", "--no-record", "-q" });
    EXPECT_EQ(noGrad.exitCode, 2);
    EXPECT_NE(noGrad.err.find("add --grad"), std::string::npos) << noGrad.err;
}

TEST(CliGrad, Gemma4TextModelRunsAndTrainsTheRestIsRefusedByName)
{
    const std::string dir = scratchDir("grad_cli_gemma4");
    // A Gemma-4 release as shipped (Gemma4ForConditionalGeneration) has a vision tower: refused
    // by name, by --grad and by train.
    const auto full = runDay0({ "shrink", "gemma-4-26b-a4b", "--out", dir + "/multimodal",
        "--layers", "2", "-q", "--no-record" });
    ASSERT_EQ(full.exitCode, 0) << full.err;
    auto r
        = runDay0({ "run", dir + "/multimodal", "--grad", "--ids", "1,2,3", "--no-record", "-q" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("does not cover the vision tower"), std::string::npos) << r.err;
    {
        std::ofstream out(dir + "/ids.txt");
        out << "1 4 9 16 25 36 49 64 81 99\n2 3 5 7 11 13 17 19 23 29\n";
    }
    r = runDay0({ "train", dir + "/multimodal", "--data", dir + "/ids.txt", "--steps", "2",
        "--batch", "1", "--seq", "8", "--quiet", "--no-record" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("does not cover the vision tower"), std::string::npos) << r.err;
    // Its text model on its own (Gemma4ForCausalLM): the gradients of every parameter under the
    // checkpoint's names, the fused experts and the router's scales included, layer_scalar
    // (a buffer) without one.
    {
        std::ifstream in(std::filesystem::path(DAY0_TEST_DATA_DIR) / "model" / "configs"
            / "frontier" / "google--gemma-4-26B-A4B.json");
        const auto source = nlohmann::ordered_json::parse(in);
        auto text = source.at("text_config");
        text["architectures"] = { "Gemma4ForCausalLM" };
        text["tie_word_embeddings"] = true;
        std::filesystem::create_directories(dir + "/text-config");
        std::ofstream(dir + "/text-config/config.json") << text.dump(2);
    }
    const auto shrunk = runDay0({ "shrink", dir + "/text-config/config.json", "--out",
        dir + "/text", "--layers", "2", "-q", "--no-record" });
    ASSERT_EQ(shrunk.exitCode, 0) << shrunk.err;
    r = runDay0({ "run", dir + "/text", "--grad", "--ids", "1,2,3,4,5,6", "--dump",
        dir + "/text-grad", "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto names = captureNames(dir + "/text-grad");
    for (const char* name :
        { "model.layers.0.experts.gate_up_proj#grad", "model.layers.0.experts.down_proj#grad",
            "model.layers.0.router.scale#grad", "model.layers.0.router.per_expert_scale#grad",
            "model.layers.1.self_attn.k_proj.weight#grad",
            "model.layers.0.post_feedforward_layernorm_2.weight#grad", "model.layers.0.router#grad",
            "model.layers.0.experts#grad" }) {
        EXPECT_TRUE(names.contains(name)) << name;
    }
    EXPECT_FALSE(names.contains("model.layers.0.layer_scalar#grad"));
    // The emulated bf16 backward runs (core/exec backward_bf16_frontier_test judges it);
    // tensor-parallel training is refused by name.
    r = runDay0({ "run", dir + "/text", "--grad", "--precision", "bf16", "--ids", "1,2,3", "--json",
        "--no-record", "-q" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_GT(r.json()["loss"].get<double>(), 0.0);
    r = runDay0({ "train", dir + "/text", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--json", "--quiet", "--no-record" });
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.json()["loss"].size(), 2u);
    r = runDay0({ "train", dir + "/text", "--data", dir + "/ids.txt", "--steps", "2", "--batch",
        "1", "--seq", "8", "--plan", "tp=2", "--quiet", "--no-record" });
    EXPECT_NE(r.exitCode, 0);
    EXPECT_NE(r.err.find("tensor-parallel training of"), std::string::npos) << r.err;
}
