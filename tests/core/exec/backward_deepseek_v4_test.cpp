// DeepSeek-V4's backward pass (exec/backward_deepseek_v4.cpp) against PyTorch autograd of its
// float64 twin (plugins/torch/day0_torch_deepseek_v4.py): a shrunk deepseek-v4-flash with a
// sliding, two CSA (ratio 4, Lightning indexer) and an HCA (ratio 8) layer, hash-routed and
// learned-router MoE, hyper-connections; every parameter and anchor, each twin feature switched
// off moving the comparison beyond its bound; the indexer's weights present and zero; fp32 against
// fp64; and what stays uncovered (emulated bf16, tensor parallelism) refused by name.
#include "backward_twin.h"
#include "checkpoint/shrink.h"
#include "exec/backward.h"
#include "model/config_reader.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace day0 {
namespace {

using test::againstTwin;
using test::maxRel;

/// 20 tokens: the window (4) drops keys, the ratio-8 compressor closes 2 entries and the
/// ratio-4 ones 5, of which the indexer keeps 2 (the later queries see up to 5).
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 120, 77, 31, 200, 9, 150,
    61, 2, 88, 140 };

test::ShrunkGradients shrunkV4(
    const std::filesystem::path& dir, const std::vector<std::int64_t>& ids)
{
    checkpoint::ShrinkOptions options;
    options.unquantized = true; // the twin reads plain float tensors
    return test::shrunkGradients("deepseek-v4-flash", dir, ids, options);
}

TEST(BackwardDeepseekV4, ShrunkModelMatchesTorchAutogradForEveryParameter)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_deepseek_v4";
    const auto s = shrunkV4(dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::DeepseekV4);
    // Every compress ratio the config has, hash-routed and learned-router layers.
    std::vector<std::int64_t> ratios;
    for (const auto& l : s.spec.layers) {
        ratios.push_back(l.compressRatio);
    }
    ASSERT_EQ(ratios, (std::vector<std::int64_t> { 0, 4, checkpoint::kShrunkHcaRatio, 4 }));
    ASSERT_TRUE(s.spec.layers[0].hashRouted && s.spec.layers[1].hashRouted);
    ASSERT_FALSE(s.spec.layers[2].hashRouted || s.spec.layers[3].hashRouted);
    const auto& ca = *s.spec.compressedAttention;
    ASSERT_LT(s.spec.layers[0].slidingWindow, std::int64_t(kIds.size()));
    ASSERT_GE(std::int64_t(kIds.size()) / checkpoint::kShrunkHcaRatio, 2);
    ASSERT_GT(std::int64_t(kIds.size()) / 4, ca.indexerTopK); // the indexer drops entries
    ASSERT_GT(s.spec.swigluLimit, 0.0);

    const auto a = againstTwin(dir, s.spec, s.ours, kIds, 1e-10);
    EXPECT_LE(a.lossDiff, 1e-12 * s.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    EXPECT_EQ(a.activationsCompared, s.ours.activations.size());
    // Experts no token reached: zero gradients, present under their names. (The twin cannot run
    // a prompt shorter than a compressor's window, so no two-token run as for the others.)
    EXPECT_GT(a.zeroExperts, std::size_t(0));

    // The indexer's weights (its wq_b, weights_proj and compressor) in both CSA layers: present,
    // and zero (its top-k passes no gradient back, as the twin's indices carry none).
    std::size_t indexerWeights = 0;
    for (const auto& [name, g] : s.ours.parameters) {
        if (name.find(".attn.indexer.") == std::string::npos) {
            continue;
        }
        ++indexerWeights;
        const auto v = g.toDoubles();
        EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; })) << name;
    }
    EXPECT_EQ(indexerWeights, std::size_t(2 * 6));
    // The selection bias and tid2eid only choose experts: no gradient.
    EXPECT_FALSE(s.ours.parameters.contains("layers.3.ffn.gate.bias"));
    EXPECT_FALSE(s.ours.parameters.contains("layers.0.ffn.gate.tid2eid"));
    // The hash layers' router weight still weights the chosen experts by their scores.
    const auto hashGate = s.ours.parameters.at("layers.0.ffn.gate.weight").toDoubles();
    EXPECT_TRUE(std::any_of(hashGate.begin(), hashGate.end(), [](double x) { return x != 0.0; }));

    // Each feature of the twin switched off moves the comparison beyond its bound.
    for (const char* feature : { "window", "compressor", "overlap", "indexer", "hyper_connections",
             "sinkhorn", "hash_routing", "sqrtsoftplus", "grouped_o_proj", "compress_rope",
             "output_rope", "q_norm", "sinks", "swiglu_clamp", "shared_expert" }) {
        const auto off = againstTwin(
            dir, s.spec, s.ours, kIds, 1e-10, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-18s parameters max rel %.2e (%s)\n", feature, off.params,
            off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }
}

TEST(BackwardDeepseekV4, Fp32AgreesWithFp64AndTheRestIsRefusedByName)
{
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_deepseek_v4_fp32";
    const auto s = shrunkV4(dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::DeepseekV4);
    const auto targets = exec::nextTokenTargets(kIds);
    exec::GradientOptions o;
    o.fp64 = false;
    const auto narrow = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_TRUE(narrow.ok()) << narrow.error().message;
    double fp32 = 0.0;
    std::string worst;
    for (const auto& [name, g] : s.ours.parameters) {
        const double rel = maxRel(g, narrow->parameters.at(name));
        if (rel > fp32) {
            fp32 = rel;
            worst = name;
        }
    }
    std::printf("deepseek_v4 fp32 against fp64: %zu parameters max rel %.2e (%s), loss %.9f vs "
                "%.9f\n",
        s.ours.parameters.size(), fp32, worst.c_str(), narrow->loss, s.ours.loss);
    EXPECT_EQ(narrow->parameters.size(), s.ours.parameters.size());
    EXPECT_LE(fp32, 1e-3) << worst;
    EXPECT_NEAR(narrow->loss, s.ours.loss, 1e-5 * s.ours.loss);
    // Emulated bf16: not modelled for this family, refused by name.
    o.emulated = exec::PrecisionMode::BF16;
    const auto emulated = exec::lossAndGradients(s.spec, s.weights, kIds, targets, o, {});
    ASSERT_FALSE(emulated.ok());
    EXPECT_EQ(emulated.error().code, ErrorCode::Unsupported);
    EXPECT_NE(emulated.error().message.find("DeepSeek-V4"), std::string::npos)
        << emulated.error().message;
    // Tensor parallelism: refused by name.
    exec::GradientOptions tp;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto r = exec::lossAndGradients(s.spec, s.weights, kIds, targets, tp, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("tensor parallelism of DeepSeek-V4"), std::string::npos)
        << r.error().message;
}

TEST(BackwardDeepseekV4, TheReleasedConfigIsCovered)
{
    const auto flash = model::loadModel("deepseek-v4-flash");
    ASSERT_TRUE(flash.ok()) << flash.error().message;
    EXPECT_EQ(test::refusals(*flash), "");
    EXPECT_FALSE(exec::emulatedBackwardUnsupported(*flash).empty());
    // Its native names map to the twin's (day0_torch_deepseek_v4.py hf_name).
    std::map<std::string, numerics::Tensor> native;
    for (const char* name : { "layers.2.attn.indexer.compressor.norm.weight", "layers.0.hc_attn_fn",
             "layers.1.attn.compressor.ape", "layers.1.ffn.experts.3.w2.weight", "hc_head_scale",
             "layers.3.attn.attn_sink", "layers.3.attn.kv_norm.weight" }) {
        native.emplace(name, numerics::Tensor::zeros({ 1 }, DType::F64));
    }
    std::vector<std::string> hf;
    for (const auto& [name, t] : exec::checkpointGradients(*flash, native)) {
        hf.push_back(name);
    }
    EXPECT_EQ(hf,
        (std::vector<std::string> { "model.hc_head.hc_scale", "model.layers.0.attn_hc.fn",
            "model.layers.1.mlp.experts.3.down_proj.weight",
            "model.layers.1.self_attn.compressor.position_bias",
            "model.layers.2.self_attn.compressor.indexer.compressor.kv_norm.weight",
            "model.layers.3.self_attn.kv_norm.weight", "model.layers.3.self_attn.sinks" }));
}

} // namespace
} // namespace day0
