#pragma once

// The default tolerance table's two error rates, measured: healthy runs (bf16, fp16, fp8 of a
// trained and of random shrunk models, on prompts the table was not derived from) must pass, and
// deliberately broken targets (a layer's weights scaled, heads swapped, a RoPE half-swap, a norm
// weight lost, gate and up swapped, a wrong rope_theta, a norm epsilon off by 10×, ...) must fail
// at the first broken layer. Shared by tests/core/exec/detection_suite_test.cpp and
// tests/bench/precision_detection_bench.cpp.

#include "base/result.h"
#include "numerics/tolerance.h"

#include <filesystem>
#include <string>
#include <vector>

namespace day0::test {

struct HealthyOutcome {
    std::string model;
    std::string precision;
    int prompt = 0;
    int failed = 0; ///< captures that failed (propagated and inject-mode comparisons together)
    int judged = 0;
    std::string firstFailure; ///< its verdict, when one failed
};

struct BrokenOutcome {
    std::string model;
    std::string kind; ///< "o_proj ×1.1 in layer 2"
    int brokenLayer = 0; ///< the first layer the break touches
    bool failed = false; ///< the comparison failed
    int firstFailingLayer = -1; ///< layer of its first divergence (-1: none or outside layers)
    std::string firstFailure;
    /// The broken model's fp32 outputs equal the healthy one's within fp32's tolerance (a q_proj
    /// scale under Qwen3's q norm, a norm weight of ones replaced by ones): nothing to catch.
    bool noEffect = false;
    /// The same break with the target in fp32 fails first at the broken layer (the fp32 leg of
    /// day0 run --fp32-leg).
    bool caughtInFp32 = false;
    /// The bf16 comparison fails first at the broken layer.
    [[nodiscard]] bool caught() const { return failed && firstFailingLayer == brokenLayer; }
    /// The bf16 comparison or its fp32 leg fails first at the broken layer.
    [[nodiscard]] bool caughtWithFp32Leg() const { return caught() || caughtInFp32; }
};

/// The models of the suite: stories260K (trained), the random tiny Llama and random shrunk
/// Qwen3-30B-A3B and DeepSeek-V3 (block-FP8 weights, MLA, a sigmoid router), made into `scratch`
/// when missing.
Result<std::vector<std::filesystem::path>> detectionModels(const std::filesystem::path& scratch);

/// Every model × bf16/fp16/fp8/nvfp4/mxfp4/int4/int4-g32 × `prompts` prompts (seed 7: not the
/// derivation's prompts).
Result<std::vector<HealthyOutcome>> runHealthySuite(
    const std::vector<std::filesystem::path>& models, const numerics::ToleranceTable& table,
    int prompts);

/// Every model × every kind of break, the target in bf16 with inject mode (and in fp32, to tell
/// a break bf16 cannot resolve from one the table misses).
Result<std::vector<BrokenOutcome>> runBrokenSuite(
    const std::vector<std::filesystem::path>& models, const numerics::ToleranceTable& table);

} // namespace day0::test
