#include "torch_twin.h"

#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "numerics/metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace day0::test {

std::filesystem::path bridgeScript()
{
    return std::filesystem::path(DAY0_TEST_DATA_DIR) / ".." / ".." / "plugins" / "torch"
        / "day0_dump.py";
}

bool torchAvailable()
{
    static const bool available
        = std::system(fmt::format("{} -c 'import torch, numpy' >/dev/null 2>&1", kPython).c_str())
        == 0;
    return available;
}

double logitsMaxRel(const numerics::Tensor& theirs, const numerics::Tensor& ours)
{
    const auto r = theirs.toDoubles();
    const auto t = ours.toDoubles();
    EXPECT_EQ(r.size(), t.size());
    double absMax = 0.0;
    for (const double v : r) {
        absMax = std::max(absMax, std::fabs(v));
    }
    double maxRel = 0.0;
    for (std::size_t i = 0; i < std::min(r.size(), t.size()); ++i) {
        maxRel
            = std::max(maxRel, std::fabs(t[i] - r[i]) / std::max(std::fabs(r[i]), 1e-2 * absMax));
    }
    return maxRel;
}

namespace {

// Selections compare as sets per row: the twin's top-k need not list them in our order.
void countSelectionRows(const numerics::Tensor& theirs, const numerics::Tensor& ours, Agreement& a)
{
    const auto rows = theirs.shape().empty() ? 0 : theirs.shape()[0];
    a.selectionRows += std::size_t(rows);
    if (theirs.shape() != ours.shape()) {
        a.selectionRowsDiffering += std::size_t(rows);
        return;
    }
    auto r = theirs.toDoubles();
    auto t = ours.toDoubles();
    const std::size_t width = rows > 0 ? r.size() / std::size_t(rows) : 0;
    for (std::size_t i = 0; i < std::size_t(rows); ++i) {
        const auto from = std::ptrdiff_t(i * width);
        const auto to = std::ptrdiff_t((i + 1) * width);
        std::sort(r.begin() + from, r.begin() + to);
        std::sort(t.begin() + from, t.begin() + to);
        if (!std::equal(r.begin() + from, r.begin() + to, t.begin() + from)) {
            ++a.selectionRowsDiffering;
        }
    }
}

} // namespace

Agreement checkpointAgainstTorch(const std::filesystem::path& dir, const std::string& twinEnv,
    const std::vector<std::int64_t>& prompt, bool fp64, std::int64_t linearAttentionChunk)
{
    Agreement a;
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    const auto weights = exec::openCheckpointWeights(dir / "ckpt");
    EXPECT_TRUE(weights.ok()) << weights.error().message;
    if (!spec.ok() || !weights.ok()) {
        return a;
    }
    Progress p;
    auto engine = exec::Engine::create(*spec, **weights, fp64, p, {});
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    if (!engine.ok()) {
        return a;
    }
    exec::RunOptions o;
    o.precision = *exec::parsePrecisionPlan(fp64 ? "fp64" : "fp32");
    o.promptIds = prompt;
    o.newTokens = 3;
    o.linearAttentionChunk = linearAttentionChunk;
    const auto ours = engine->run(o, p, {});
    EXPECT_TRUE(ours.ok()) << ours.error().message;
    if (!ours.ok()) {
        return a;
    }
    const std::string command = fmt::format(
        "{} {} {} {} --ids {} --tokens 3 --forced {} --dtype float64 --out {} > {} 2>&1", twinEnv,
        kPython, bridgeScript().string(), (dir / "ckpt").string(), fmt::join(o.promptIds, ","),
        fmt::join(ours->generated.begin(), ours->generated.end() - 1, ","),
        (dir / "torch").string(), (dir / "torch.log").string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const auto theirs = checkpoint::readDump(dir / "torch");
    EXPECT_TRUE(theirs.ok()) << (theirs.ok() ? "" : theirs.error().message);
    if (!theirs.ok()) {
        return a;
    }
    EXPECT_EQ(theirs->info.fingerprint, ours->dump.info.fingerprint);
    a.logitsMaxRel = logitsMaxRel(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"));
    {
        const auto r = theirs->tensor("lm_head")->toDoubles();
        const auto t = ours->dump.tensor("lm_head")->toDoubles();
        double largest = 0.0;
        double worst = 0.0;
        for (std::size_t i = 0; i < std::min(r.size(), t.size()); ++i) {
            largest = std::max(largest, std::fabs(r[i]));
            worst = std::max(worst, std::fabs(t[i] - r[i]));
        }
        a.logitsMaxAbsOverMax = largest > 0 ? worst / largest : worst;
    }
    a.logitsRelL2
        = numerics::compareTensors(*theirs->tensor("lm_head"), *ours->dump.tensor("lm_head"))
              ->relL2;
    for (const auto& c : theirs->captures()) {
        const auto* mine = ours->dump.tensor(c.name);
        if (mine == nullptr || c.name.ends_with("#topk")) {
            a.common += mine != nullptr ? 1 : 0;
            if (mine != nullptr) {
                countSelectionRows(*theirs->tensor(c.name), *mine, a);
            }
            continue;
        }
        ++a.common;
        const auto err = numerics::compareTensors(*theirs->tensor(c.name), *mine);
        if (err.ok() && err->relL2 > a.worstCaptureRelL2) {
            a.worstCaptureRelL2 = err->relL2;
            a.worstCapture = c.name;
        }
    }
    return a;
}

Result<model::ModelSpec> shrinkForTwin(const std::string& model, const std::filesystem::path& dir,
    const checkpoint::ShrinkOptions& options)
{
    std::filesystem::remove_all(dir);
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(model, dir / "ckpt", options, p, {});
    if (!shrunk) {
        return shrunk.error();
    }
    return exec::loadCheckpointModel(dir / "ckpt");
}

void expectEachFeatureMatters(const std::filesystem::path& dir,
    const std::vector<std::string>& features, const std::vector<std::int64_t>& prompt, bool fp64,
    std::int64_t linearAttentionChunk)
{
    for (const auto& feature : features) {
        SCOPED_TRACE(feature);
        const auto off = checkpointAgainstTorch(
            dir, fmt::format("DAY0_TWIN_WITHOUT={}", feature), prompt, fp64, linearAttentionChunk);
        std::printf("  without %-20s logits max rel %.2e\n", feature.c_str(), off.logitsMaxRel);
        EXPECT_GT(off.logitsMaxRel, 1e-3);
    }
}

} // namespace day0::test
