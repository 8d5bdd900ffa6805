// The backward pass of MiniMax-M3's text decoder (exec/backward_minimax_m3.cpp and the standard
// layer) against PyTorch autograd of its float64 twin (plugins/torch/day0_torch_minimax_m3.py):
// every parameter (the index branch's present and zero, idle experts zero) and every anchor of
// a shrunk checkpoint with MSA and full-attention layers, dense and MoE layers, on a prompt long
// enough that the block selection drops blocks; the kept blocks the twin's; each twin feature
// switched off moves the gradients beyond the bound; fp32 against fp64; and what stays
// uncovered (emulated bf16, tensor parallelism) refused by name.
#include "backward_twin.h"
#include "checkpoint/shrink.h"
#include "checkpoint/tensor_file.h"
#include "exec/backward.h"
#include "exec/checkpoint_weights.h"
#include "exec/forward.h"
#include "model/config_reader.h"
#include "tiny_models.h"
#include "torch_twin.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace day0 {
namespace {

using numerics::Tensor;
using test::againstTwin;
using test::maxRel;
using test::refusals;

/// 12 tokens: 6 key blocks of checkpoint::kShrunkSparseBlockSize (2), of which a query keeps
/// kShrunkSparseTopKBlocks (2): the later queries drop most of their blocks.
const std::vector<std::int64_t> kIds { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8, 31, 77 };

/// The features of the twin (DAY0_TWIN_WITHOUT) whose absence must move the gradients.
const std::vector<std::string> kFeatures { "msa", "block_max", "local_block", "index_norm",
    "index_rope", "gemma_norm", "swiglu_clamp", "swiglu_up_one", "shared_expert",
    "routed_scaling" };

/// The blocks the kept-block captures of `routing` drop: for each row (query i, index head),
/// the causally visible blocks it does not keep, summed.
std::int64_t droppedBlocks(const exec::GradientResult& ours, const model::BlockSparseSpec& bs,
    std::int64_t n, std::size_t& captures)
{
    std::int64_t dropped = 0;
    captures = 0;
    for (const auto& [name, t] : ours.routing) {
        if (!name.ends_with(".self_attn.indexer#topk")) {
            continue;
        }
        ++captures;
        const auto ids = t.toDoubles();
        for (std::int64_t row = 0; row < n * bs.indexHeads; ++row) {
            const std::int64_t i = row / bs.indexHeads;
            const std::int64_t visible = i / bs.blockSize + 1;
            std::int64_t kept = 0;
            for (std::int64_t s = 0; s < bs.topKBlocks; ++s) {
                kept += ids[std::size_t(row * bs.topKBlocks + s)] >= 0 ? 1 : 0;
            }
            dropped += visible - kept;
        }
    }
    return dropped;
}

TEST(BackwardMiniMaxM3, ShrunkMiniMaxM3MatchesTorchAutogradThroughItsBlockSelection)
{
    if (!test::torchAvailable()) {
        GTEST_SKIP() << test::kPython << " has no torch/numpy";
    }
    const auto dir = std::filesystem::temp_directory_path() / "day0_backward_minimax_m3";
    const auto s = test::shrunkGradients("minimax-m3", dir, kIds);
    ASSERT_EQ(s.spec.family, model::Family::MiniMaxM3);
    ASSERT_TRUE(s.spec.blockSparse && s.spec.normOffset && s.spec.qkNorm);
    ASSERT_LT(s.spec.partialRotaryFactor, 1.0);
    ASSERT_GT(s.spec.swigluLimit, 0.0);
    ASSERT_TRUE(s.spec.moe && s.spec.moe->expertScoreBias && s.spec.moe->sharedIntermediate > 0);
    ASSERT_NE(s.spec.moe->routedScalingFactor, 1.0);
    bool full = false;
    bool msa = false;
    bool dense = false;
    bool moe = false;
    for (const auto& layer : s.spec.layers) {
        full = full || layer.mixer == model::MixerKind::Attention;
        msa = msa || layer.mixer == model::MixerKind::BlockSparse;
        dense = dense || !layer.moe();
        moe = moe || layer.moe();
    }
    ASSERT_TRUE(full && msa && dense && moe);
    const auto& bs = *s.spec.blockSparse;
    std::size_t selections = 0;
    const std::int64_t dropped = droppedBlocks(s.ours, bs, std::int64_t(kIds.size()), selections);
    std::printf("minimax-m3: %zu MSA layers drop %lld visible key blocks over %zu tokens\n",
        selections, static_cast<long long>(dropped), kIds.size());
    EXPECT_GT(selections, 0u);
    EXPECT_GT(dropped, 0);

    // Every parameter and anchor within 1e-6 of autograd's, the loss within 1e-12.
    const auto a = againstTwin(dir, s.spec, s.ours, kIds);
    EXPECT_LE(a.lossDiff, 1e-12 * s.ours.loss);
    EXPECT_LE(a.params, 1e-6) << a.worstParam;
    EXPECT_LE(a.activations, 1e-6) << a.worstActivation;
    EXPECT_EQ(a.paramsCompared, a.paramsOurs);
    EXPECT_GT(a.activationsCompared, std::size_t(0));
    const auto theirs = checkpoint::readDump(dir / "torch");
    ASSERT_TRUE(theirs.ok()) << theirs.error().message;
    for (const auto& [name, g] : s.ours.activations) {
        EXPECT_NE(theirs->tensor(name), nullptr) << name << ": no anchor of the twin's";
    }
    // The kept blocks are the twin's, row by row.
    std::size_t comparedSelections = 0;
    for (const auto& [name, t] : s.ours.routing) {
        if (!name.ends_with(".indexer#topk")) {
            continue;
        }
        const Tensor* ref = theirs->tensor(name);
        ASSERT_NE(ref, nullptr) << name;
        EXPECT_EQ(ref->toDoubles(), t.toDoubles()) << name;
        ++comparedSelections;
    }
    EXPECT_EQ(comparedSelections, selections);
    // The index branch's weights: present, and zero (the discrete choice passes no gradient).
    std::size_t indexWeights = 0;
    for (const auto& [name, g] : s.ours.parameters) {
        if (name.find(".self_attn.index_") == std::string::npos) {
            continue;
        }
        ++indexWeights;
        const auto v = g.toDoubles();
        EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; })) << name;
    }
    EXPECT_EQ(indexWeights, 4 * selections);
    // Each feature switched off in the twin moves some parameter gradient beyond the bound.
    for (const auto& feature : kFeatures) {
        const auto off = againstTwin(
            dir, s.spec, s.ours, kIds, 1e-12, fmt::format("DAY0_TWIN_WITHOUT={}", feature));
        std::printf("  twin without %-14s parameters max rel %.2e (%s)\n", feature.c_str(),
            off.params, off.worstParam.c_str());
        EXPECT_GT(off.params, 1e-3) << feature;
    }

    // Two tokens: experts no token reaches get zero gradients, present under their names.
    const std::vector<std::int64_t> two { 11, 80 };
    exec::GradientOptions o;
    o.activations = true;
    o.engineNorms = true; // s.weights are the engine's: (1 + w) already
    const auto idle
        = exec::lossAndGradients(s.spec, s.weights, two, exec::nextTokenTargets(two), o, {});
    ASSERT_TRUE(idle.ok()) << idle.error().message;
    const auto i = againstTwin(dir, s.spec, *idle, two);
    EXPECT_LE(i.params, 1e-6) << i.worstParam;
    EXPECT_EQ(i.paramsCompared, i.paramsOurs);
    EXPECT_GT(i.zeroExperts, std::size_t(0));

    // fp32 against fp64: every parameter within 1e-4.
    const auto targets = exec::nextTokenTargets(kIds);
    exec::GradientOptions narrow;
    narrow.fp64 = false;
    narrow.engineNorms = true;
    const auto fp32 = exec::lossAndGradients(s.spec, s.weights, kIds, targets, narrow, {});
    ASSERT_TRUE(fp32.ok()) << fp32.error().message;
    double worst = 0.0;
    std::string worstName;
    for (const auto& [name, g] : s.ours.parameters) {
        const double rel = maxRel(g, fp32->parameters.at(name));
        if (rel >= worst) {
            worst = rel;
            worstName = name;
        }
    }
    std::printf("minimax-m3 fp32 against fp64: parameters max rel %.2e (%s), loss %.9f vs %.9f\n",
        worst, worstName.c_str(), fp32->loss, s.ours.loss);
    EXPECT_LE(worst, 1e-4) << worstName;
    EXPECT_NEAR(fp32->loss, s.ours.loss, 1e-5 * s.ours.loss);
    // Emulated bf16 is refused by name.
    narrow.emulated = exec::PrecisionMode::BF16;
    const auto bf16 = exec::lossAndGradients(s.spec, s.weights, kIds, targets, narrow, {});
    ASSERT_FALSE(bf16.ok());
    EXPECT_EQ(bf16.error().code, ErrorCode::Unsupported);
    EXPECT_NE(bf16.error().message.find("MiniMax-M3"), std::string::npos) << bf16.error().message;
    // So is tensor parallelism.
    exec::GradientOptions tp;
    tp.engineNorms = true;
    tp.tpSum = [](void*, std::int64_t, DType) { return success(); };
    const auto split = exec::lossAndGradients(s.spec, s.weights, kIds, targets, tp, {});
    ASSERT_FALSE(split.ok());
    EXPECT_EQ(split.error().code, ErrorCode::Unsupported);
    EXPECT_NE(split.error().message.find("tensor parallelism of MiniMax-M3"), std::string::npos)
        << split.error().message;
    std::filesystem::remove_all(dir);
}

TEST(BackwardMiniMaxM3, WhatItDoesNotModelIsRefusedByName)
{
    const auto m3 = model::loadModel("minimax-m3");
    ASSERT_TRUE(m3.ok()) << m3.error().message;
    EXPECT_EQ(refusals(*m3), "");
    const auto refuses = [](const model::ModelSpec& spec, const std::string& part) {
        const auto missing = refusals(spec);
        EXPECT_NE(missing.find(part), std::string::npos) << missing;
    };
    auto heads = *m3;
    heads.blockSparse->indexHeads = heads.numKvHeads + 1;
    refuses(heads, "index heads other than the KV heads");
    auto init = *m3;
    init.blockSparse->initBlocks = 1;
    refuses(init, "sparse_init_block");
    auto lse = *m3;
    lse.blockSparse->scoreType = "lse";
    refuses(lse, "scored other than by max");
    auto unclamped = *m3;
    unclamped.swigluLimit = 0.0;
    refuses(unclamped, "swigluoai without swiglu_limit");
    // MSA layers and swigluoai in another family stay refused.
    auto llama = test::tinyLlama().spec;
    llama.layers[0].mixer = model::MixerKind::BlockSparse;
    refuses(llama, "token mixers other than full causal attention");
    auto act = test::tinyLlama().spec;
    act.hiddenAct = "swigluoai";
    refuses(act, "MLP activations other than silu");
    // The emulated backward names it.
    const auto emulated
        = fmt::format("{}", fmt::join(exec::emulatedBackwardUnsupported(*m3), "; "));
    EXPECT_NE(emulated.find("MiniMax-M3"), std::string::npos) << emulated;
}

} // namespace
} // namespace day0
