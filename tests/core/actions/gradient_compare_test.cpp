// Own versus inherited error of gradients (issue #25): a shrunk Llama's backward with one
// layer's gradients rounded to bf16, against the fp64 reference, with the inject-mode gradient
// dump (actions::GradientRequest::inject). The gradient flows from the loss down, so the error
// layer 2's backward makes is inherited by layers 1 and 0 (which it feeds) and not by layer 3;
// the own error lands on layer 2 alone.
#include "actions/compare.h"
#include "actions/gradients.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "numerics/gradient_compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace day0::actions {
namespace {

namespace fs = std::filesystem;

constexpr int kRounded = 2; // of the shrunk model's 4 layers

struct GradientDumps {
    fs::path reference, target, inject;
};

/// This process's folder: CTest runs each test in a process of its own, side by side, and each
/// makes the dumps afresh (a shared folder was removed under a neighbour's feet).
fs::path testDir()
{
    return fs::path(::testing::TempDir()) / ("gradient_compare_test_" + std::to_string(::getpid()));
}

const GradientDumps& dumps()
{
    // Removed when the process ends, after the last test that reads it.
    static const struct Cleanup {
        ~Cleanup()
        {
            std::error_code ec;
            fs::remove_all(testDir(), ec);
        }
    } cleanup;
    static const GradientDumps made = [] {
        setResourceDir(DAY0_RESOURCE_DIR);
        const fs::path dir = testDir();
        fs::remove_all(dir);
        Progress progress;
        const auto shrunk
            = checkpoint::shrinkModel("llama-3.1-8b", dir / "llama", {}, progress, {});
        EXPECT_TRUE(shrunk.ok()) << shrunk.error().message;
        GradientDumps d { dir / "fp64", dir / "rounded", dir / "rounded-inject" };
        const auto pass = [&](const fs::path& out, bool rounded, const fs::path& inject) {
            GradientRequest r;
            r.checkpoint = (dir / "llama").string();
            r.ids = { 3, 17, 42, 99, 7, 250, 11, 5 };
            r.dump = out;
            r.inject = inject;
            if (rounded) {
                r.roundedLayers = { kRounded };
            }
            Progress p;
            const auto done = checkpointGradients(r, p, {});
            EXPECT_TRUE(done.ok()) << done.error().message;
        };
        pass(d.reference, false, {});
        pass(d.target, true, {});
        pass(d.inject, true, d.reference);
        return d;
    }();
    return made;
}

Result<CompareOutcome> compare(bool withInject)
{
    CompareRequest request;
    request.reference = dumps().reference;
    request.target = dumps().target;
    if (withInject) {
        request.local = dumps().inject;
    }
    Progress progress;
    return compareDumpFolders(request, progress, {});
}

const numerics::CaptureComparison* row(const numerics::DumpComparison& c, const std::string& name)
{
    for (const auto& r : c.rows) {
        if (r.name == name) {
            return &r;
        }
    }
    return nullptr;
}

TEST(GradientCompare, OwnErrorLandsOnThePerturbedLayersBackwardNotOnTheLayersItFeeds)
{
    const auto cmp = compare(true);
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    const auto& c = cmp->comparison;
    ASSERT_TRUE(numerics::isGradientComparison(c));
    EXPECT_EQ(c.divergenceBasis, "own");
    const auto layers = numerics::layerBackwardErrors(c);
    ASSERT_EQ(layers.size(), 4U);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& e = layers[i];
        EXPECT_EQ(e.layer, 3 - int(i)) << "backward order: from the last layer down";
        ASSERT_TRUE(e.own) << e.capture;
        if (e.layer == kRounded) {
            EXPECT_EQ(e.capture, "model.layers.1#grad");
            EXPECT_GT(*e.own, 1e-4) << "bf16 rounding is its own error";
            EXPECT_GT(e.accumulated, 1e-4);
        } else {
            EXPECT_LT(*e.own, 1e-13) << "layer " << e.layer << " computes as the reference does";
        }
        if (e.layer < kRounded) {
            // Fed by layer 2: the error is inherited, not its own.
            EXPECT_GT(e.accumulated, 1e-4) << e.capture;
            ASSERT_TRUE(e.inherited);
            EXPECT_GT(*e.inherited, 1e-4) << e.capture;
        }
        if (e.layer > kRounded) {
            EXPECT_LT(e.accumulated, 1e-13) << "layer 3 runs before layer 2 in the backward";
        }
    }
    const auto worst = numerics::largestOwnBackwardError(c);
    ASSERT_TRUE(worst);
    EXPECT_EQ(worst->layer, kRounded);

    // Parameter gradients: layer 1's q_proj inherits, layer 2's has its own error.
    const auto* q1 = row(c, "model.layers.1.self_attn.q_proj.weight#grad");
    const auto* q2 = row(c, "model.layers.2.self_attn.q_proj.weight#grad");
    ASSERT_TRUE(q1 && q1->metrics && q1->own);
    ASSERT_TRUE(q2 && q2->metrics && q2->own);
    EXPECT_GT(q1->metrics->relL2, 1e-4);
    EXPECT_LT(q1->own->relL2, 1e-13);
    EXPECT_GT(q2->own->relL2, 1e-4);

    // First divergence in backward order: the first gradient layer 2's backward rounds.
    ASSERT_TRUE(c.firstDivergence);
    EXPECT_EQ(c.rows[*c.firstDivergence].name, "model.layers.2.post_attention_layernorm#grad");

    const auto json = numerics::comparisonToJson(c);
    EXPECT_EQ(json["gradients"]["order"], "backward");
    ASSERT_EQ(json["gradients"]["layer_backward"].size(), 4U);
    EXPECT_EQ(json["gradients"]["layer_backward"][1]["layer"], kRounded);
}

TEST(GradientCompare, WithoutTheInjectModeDumpEveryLayerBelowShowsOnlyAccumulatedError)
{
    const auto cmp = compare(false);
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    const auto layers = numerics::layerBackwardErrors(cmp->comparison);
    ASSERT_EQ(layers.size(), 4U);
    for (const auto& e : layers) {
        EXPECT_FALSE(e.own) << e.capture;
    }
    EXPECT_FALSE(numerics::largestOwnBackwardError(cmp->comparison));
    EXPECT_EQ(cmp->comparison.divergenceBasis, "accumulated");
}

TEST(GradientCompare, AnInjectReferenceOfOtherIdsOrNoGradientsIsRefusedByName)
{
    (void)dumps();
    const fs::path dir = testDir();
    GradientRequest r;
    r.checkpoint = (dir / "llama").string();
    r.ids = { 3, 17, 42 };
    r.inject = dumps().reference;
    Progress p;
    const auto other = checkpointGradients(r, p, {});
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.error().message.find("other token ids"), std::string::npos)
        << other.error().message;
    r.ids = { 3, 17, 42, 99, 7, 250, 11, 5 };
    r.inject = dumps().inject;
    const auto injected = checkpointGradients(r, p, {});
    ASSERT_FALSE(injected.ok());
    EXPECT_NE(injected.error().message.find("inject-mode dump itself"), std::string::npos)
        << injected.error().message;
}

} // namespace
} // namespace day0::actions
