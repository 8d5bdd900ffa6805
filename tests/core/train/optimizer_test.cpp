// AdamW, the LR schedules and global-norm clipping against torch.optim.AdamW, LambdaLR and
// torch.nn.utils.clip_grad_norm_ (Debian's python3-torch 1.13) on the same numbers.
#include "base/file_util.h"
#include "base/json_util.h"
#include "train/optimizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

using namespace day0;
using namespace day0::train;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool torchAvailable()
{
    static const bool available
        = std::system(fmt::format("{} -c 'import torch' >/dev/null 2>&1", kPython).c_str()) == 0;
    return available;
}

/// How our optimizer's trajectory agrees with torch's.
struct Agreement {
    std::size_t values = 0; ///< parameter values compared (all steps)
    std::size_t bitIdentical = 0;
    double maxRel = 0.0; ///< max |ours - torch| / max(|torch|, 1e-30) over parameters
    double maxAbsOverMax = 0.0; ///< max |ours - torch| / max |torch| of each step
    double maxNormRel = 0.0; ///< same for the total norm clip_grad_norm_ returned
    std::size_t lrDiffering = 0; ///< steps whose learning rate differs in any bit
};

double rel(double ours, double theirs)
{
    return std::fabs(ours - theirs) / std::max(std::fabs(theirs), 1e-30);
}

/// One optimizer problem: random parameters and gradients over three tensors.
struct Problem {
    DType arith = DType::F32;
    LrSchedule schedule;
    double maxNorm = 1.0;
    int steps = 10;
    FlatLayout layout = FlatLayout::of(
        { { "a.weight", { 7, 5 } }, { "a.bias", { 13 } }, { "b.weight", { 4, 3, 2 } } });
    AdamWOptions options { 0.9, 0.95, 1e-8, 0.1 };
    std::vector<double> params;
    std::vector<std::vector<double>> grads;

    Problem(DType a, LrSchedule sched, double bound, int n, std::uint64_t seed)
        : arith(a)
        , schedule(sched)
        , maxNorm(bound)
        , steps(n)
    {
        auto asArith = [&](double v) { return arith == DType::F32 ? double(float(v)) : v; };
        std::mt19937_64 rng(seed);
        std::normal_distribution<double> normal(0.0, 1.0);
        for (std::int64_t i = 0; i < layout.total; ++i) {
            params.push_back(asArith(normal(rng) * 0.5));
        }
        // Gradient scales from far below to far above the clipping bound, and a few tiny
        // values where ε matters.
        for (int s = 0; s < steps; ++s) {
            const double scale = std::pow(10.0, double(s % 5) - 2.0);
            grads.emplace_back();
            for (std::int64_t i = 0; i < layout.total; ++i) {
                grads.back().push_back(
                    asArith(i % 17 == 0 ? 1e-9 * normal(rng) : scale * normal(rng)));
            }
        }
    }

    [[nodiscard]] nlohmann::json toJson() const
    {
        nlohmann::json j;
        j["dtype"] = arith == DType::F32 ? "float32" : "float64";
        for (const auto& p : layout.parameters) {
            j["shapes"].push_back(p.shape);
        }
        j["params"] = params;
        j["grads"] = grads;
        j["beta1"] = options.beta1;
        j["beta2"] = options.beta2;
        j["eps"] = options.eps;
        j["weight_decay"] = options.weightDecay;
        j["max_norm"] = maxNorm;
        j["schedule"]
            = { { "kind", schedule.kind == ScheduleKind::Constant ? "constant" : "cosine" },
                  { "peak", schedule.peak }, { "floor", schedule.floor },
                  { "warmup", schedule.warmupSteps }, { "total", schedule.totalSteps } };
        return j;
    }

    /// Runs our optimizer over the problem and compares each step with torch's answer.
    [[nodiscard]] Agreement compare(const nlohmann::json& theirs) const
    {
        Agreement a;
        auto p = params;
        AdamWState state { std::vector<double>(p.size()), std::vector<double>(p.size()) };
        EXPECT_EQ(theirs.size(), std::size_t(steps));
        for (int s = 0; s < steps && s < int(theirs.size()); ++s) {
            const auto& t = theirs[std::size_t(s)];
            const double lr = schedule.at(s);
            a.lrDiffering += lr != t["lr"].get<double>() ? 1 : 0;
            auto g = grads[std::size_t(s)];
            const ClipResult clip = clipGradNorm(g, layout, maxNorm, arith);
            a.maxNormRel
                = std::max(a.maxNormRel, rel(clip.totalNorm, t["total_norm"].get<double>()));
            EXPECT_TRUE(adamwStep(p, g, state, s + 1, lr, options, arith).ok());
            const auto expected = t["params"].get<std::vector<double>>();
            EXPECT_EQ(expected.size(), p.size());
            double largest = 0.0;
            double worst = 0.0;
            for (std::size_t i = 0; i < p.size() && i < expected.size(); ++i) {
                ++a.values;
                a.bitIdentical += p[i] == expected[i] ? 1 : 0;
                a.maxRel = std::max(a.maxRel, rel(p[i], expected[i]));
                largest = std::max(largest, std::fabs(expected[i]));
                worst = std::max(worst, std::fabs(p[i] - expected[i]));
            }
            a.maxAbsOverMax = std::max(a.maxAbsOverMax, worst / largest);
        }
        std::printf("%s AdamW vs torch, max_norm %g: %zu/%zu values bit-identical, max rel %.3e "
                    "(|d|/max %.3e); total norm max rel %.3e\n",
            std::string(dtypeName(arith)).c_str(), maxNorm, a.bitIdentical, a.values, a.maxRel,
            a.maxAbsOverMax, a.maxNormRel);
        return a;
    }
};

/// Torch's answers to `problems` (one Python run: importing torch takes seconds).
std::vector<nlohmann::json> torchAnswers(const std::vector<Problem>& problems)
{
    nlohmann::json all = nlohmann::json::array();
    for (const auto& p : problems) {
        all.push_back(p.toJson());
    }
    const auto dir
        = std::filesystem::temp_directory_path() / fmt::format("day0_train_adamw_{}", ::getpid());
    std::filesystem::create_directories(dir);
    EXPECT_TRUE(writeFileAtomic(dir / "problem.json", dumpJson(all)).ok());
    const auto command = fmt::format("{} {}/torch_adamw.py {} {}", kPython, DAY0_TRAIN_TEST_DIR,
        (dir / "problem.json").string(), (dir / "answer.json").string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    auto answer = readJsonFile(dir / "answer.json");
    std::filesystem::remove_all(dir);
    if (!answer.ok()) {
        ADD_FAILURE() << answer.error().message;
        return {};
    }
    return (*answer)["answers"].get<std::vector<nlohmann::json>>();
}

} // namespace

TEST(AdamW, MatchesTorchBitForBitAndClipsToAnUlpOfItsNorm)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython << " has no torch (apt-get install python3-torch)";
    }
    const LrSchedule cosine { ScheduleKind::WarmupCosine, 3e-2, 3e-3, 3, 20 };
    const LrSchedule constant { ScheduleKind::Constant, 1e-2, 0.0, 4, 15 };
    // A bound no gradient reaches: clip_grad_norm_ multiplies by exactly 1, so the trajectory
    // is the optimizer's and the schedule's alone; then a bound that clips most steps.
    const std::vector<Problem> problems { { DType::F32, cosine, 1e30, 20, 1 },
        { DType::F64, constant, 1e30, 15, 2 }, { DType::F32, cosine, 1.0, 20, 3 },
        { DType::F64, constant, 0.5, 15, 4 } };
    const auto answers = torchAnswers(problems);
    ASSERT_EQ(answers.size(), problems.size());
    std::vector<Agreement> a;
    for (std::size_t i = 0; i < problems.size(); ++i) {
        a.push_back(problems[i].compare(answers[i]));
        EXPECT_EQ(a[i].lrDiffering, 0u) << i;
        EXPECT_GT(a[i].values, 0u) << i;
    }
    // Unclipped: AdamW and LambdaLR's schedule bit for bit, fp32 and fp64.
    EXPECT_EQ(a[0].bitIdentical, a[0].values);
    EXPECT_EQ(a[1].bitIdentical, a[1].values);
    // Clipped: torch.norm's reduction order is not ours, so the total norm (and with it the
    // clip coefficient) agrees to one ulp (2^-23 = 1.19e-7 in fp32); the parameters then stay
    // within 1e-7 of their largest magnitude in fp32 and 1e-15 in fp64.
    EXPECT_LE(a[2].maxNormRel, 1.2e-7);
    EXPECT_LE(a[2].maxAbsOverMax, 1e-7);
    EXPECT_LE(a[3].maxNormRel, 2.3e-16);
    EXPECT_LE(a[3].maxAbsOverMax, 1e-15);
}

TEST(AdamW, WeightDecayIsDecoupledAndEpsSitsOutsideTheRoot)
{
    // One element, by hand: p=1, g=0.5, lr=0.1, wd=0.1, β=(0.9,0.999), ε=1e-3, step 1.
    // Decoupled: p·(1-lr·wd) = 0.99; m̂ = g, v̂ = g², so the update is lr·g/(|g|+ε).
    std::vector<double> p { 1.0 };
    const std::vector<double> g { 0.5 };
    AdamWState s { { 0.0 }, { 0.0 } };
    ASSERT_TRUE(adamwStep(p, g, s, 1, 0.1, { 0.9, 0.999, 1e-3, 0.1 }, DType::F64).ok());
    const double expected = 0.99 - 0.1 * 0.5 / (0.5 + 1e-3);
    EXPECT_NEAR(p[0], expected, 1e-15);
    EXPECT_NEAR(s.expAvg[0], 0.05, 1e-16);
    EXPECT_NEAR(s.expAvgSq[0], 0.001 * 0.25, 1e-18);
    // Adam with L2 in the gradient (coupled) would have given a different value.
    const double coupledGrad = 0.5 + 0.1 * 1.0;
    EXPECT_GT(std::fabs(p[0] - (1.0 - 0.1 * coupledGrad / (coupledGrad + 1e-3))), 1e-3);
    // Only F32 and F64 arithmetic is modelled.
    EXPECT_FALSE(adamwStep(p, g, s, 2, 0.1, {}, DType::BF16).ok());
    EXPECT_FALSE(adamwStep(p, g, s, 0, 0.1, {}, DType::F64).ok());
}

TEST(LrSchedule, WarmupCosineReachesItsFloorAndConstantHolds)
{
    const LrSchedule cosine { ScheduleKind::WarmupCosine, 1.0, 0.1, 4, 14 };
    EXPECT_DOUBLE_EQ(cosine.at(0), 0.25);
    EXPECT_DOUBLE_EQ(cosine.at(3), 1.0);
    EXPECT_DOUBLE_EQ(cosine.at(4), 1.0);
    EXPECT_NEAR(cosine.at(9), 0.55, 1e-15); // half way down
    EXPECT_NEAR(cosine.at(14), 0.1, 1e-15);
    EXPECT_NEAR(cosine.at(100), 0.1, 1e-15);
    for (std::int64_t s = 4; s < 14; ++s) {
        EXPECT_GT(cosine.at(s), cosine.at(s + 1));
    }
    const LrSchedule constant { ScheduleKind::Constant, 2e-3, 0.0, 0, 10 };
    EXPECT_EQ(constant.at(0), 2e-3);
    EXPECT_EQ(constant.at(99), 2e-3);

    auto parsed = LrSchedule::parse("cosine:0.5,warmup=3,floor=0.05", 30);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(parsed->kind, ScheduleKind::WarmupCosine);
    EXPECT_EQ(parsed->peak, 0.5);
    EXPECT_EQ(parsed->warmupSteps, 3);
    EXPECT_EQ(parsed->floor, 0.05);
    EXPECT_FALSE(LrSchedule::parse("linear:0.1", 10).ok());
    EXPECT_FALSE(LrSchedule::parse("cosine:abc", 10).ok());
    EXPECT_FALSE(LrSchedule::parse("constant:0.1,floor=0.01", 10).ok());
    EXPECT_FALSE(LrSchedule::parse("cosine:0.1,floor=0.2", 10).ok());
}

TEST(ClipGradNorm, ScalesOnlyAboveTheBoundAndReturnsTheNormBefore)
{
    const FlatLayout layout = FlatLayout::of({ { "x", { 2 } }, { "y", { 1 } } });
    std::vector<double> g { 3.0, 0.0, 4.0 };
    const ClipResult big = clipGradNorm(g, layout, 1.0, DType::F64);
    EXPECT_DOUBLE_EQ(big.totalNorm, 5.0);
    EXPECT_DOUBLE_EQ(big.coefficient, 1.0 / (5.0 + 1e-6));
    EXPECT_NEAR(g[0], 3.0 / (5.0 + 1e-6), 1e-15);
    std::vector<double> small { 0.3, 0.0, 0.4 };
    const ClipResult none = clipGradNorm(small, layout, 1.0, DType::F64);
    EXPECT_DOUBLE_EQ(none.coefficient, 1.0);
    EXPECT_EQ(small[0], 0.3);
}
