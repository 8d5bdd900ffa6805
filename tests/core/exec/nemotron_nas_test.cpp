// Nemotron-NAS (DeciLM) on the engine against its PyTorch twin: every layer its own block, with
// no-op attention and feed-forward blocks, linear replacements, per-layer KV heads and MLP widths.
#include "base/json_util.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "torch_twin.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

using namespace day0;
using test::checkpointAgainstTorch;
using test::kPython;
using test::torchAvailable;

namespace {

/// Shrinks `source` (a bundled name or a config file) into `dir / "ckpt"`, checks the engine and
/// the twin agree and returns the shrunk spec's layer kinds.
std::set<std::pair<model::MixerKind, model::FfnKind>> checkShrunk(
    const std::string& source, const std::filesystem::path& dir)
{
    std::filesystem::remove_all(dir);
    Progress p;
    const auto shrunk = checkpoint::shrinkModel(source, dir / "ckpt", {}, p, {});
    EXPECT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto spec = exec::loadCheckpointModel(dir / "ckpt");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    std::set<std::pair<model::MixerKind, model::FfnKind>> kinds;
    std::set<std::int64_t> widths;
    for (const auto& l : spec->layers) {
        kinds.insert({ l.mixer, l.ffn });
        widths.insert(l.ffnWidth);
    }
    EXPECT_GE(widths.size(), 3u); // per-layer MLP widths
    const auto a = checkpointAgainstTorch(dir, "", { 5, 17, 42, 99, 7, 3, 11, 23, 64, 8 });
    std::printf("%s: logits max rel %.2e, rel L2 %.2e; worst capture %s %.2e over %zu\n",
        source.c_str(), a.logitsMaxRel, a.logitsRelL2, a.worstCapture.c_str(), a.worstCaptureRelL2,
        a.common);
    EXPECT_LE(a.logitsMaxAbsOverMax, 1e-4);
    EXPECT_LE(a.logitsMaxRel, 1e-4);
    EXPECT_LE(a.logitsRelL2, 1e-6);
    EXPECT_LE(a.worstCaptureRelL2, 1e-5) << a.worstCapture;
    EXPECT_GE(a.common, 20u);
    std::filesystem::remove_all(dir);
    return kinds;
}

} // namespace

TEST(NemotronNas, ShrunkSuper49bAgreesWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto kinds = checkShrunk("llama-3.3-nemotron-super-49b",
        std::filesystem::temp_directory_path() / "day0_torch_nemotron_nas");
    // The 49B's blocks: attention or no-op attention, each with a dense MLP.
    EXPECT_TRUE(kinds.contains({ model::MixerKind::Attention, model::FfnKind::Dense }));
    EXPECT_TRUE(kinds.contains({ model::MixerKind::None, model::FfnKind::Dense }));
}

TEST(NemotronNas, LinearAndNoOpBlocksAgreeWithPyTorch)
{
    if (!torchAvailable()) {
        GTEST_SKIP() << kPython
                     << " has no torch/numpy (apt-get install python3-torch python3-numpy)";
    }
    // The 49B's config with the kinds other DeciLM models use (the 51B's and 253B's linear
    // replacements, a no-op feed-forward): one block of each.
    setResourceDir(DAY0_RESOURCE_DIR);
    auto config = readJsonFile(resourceDir() / "configs" / "llama-3.3-nemotron-super-49b.json");
    ASSERT_TRUE(config.ok());
    auto& blocks = (*config)["block_configs"];
    blocks[1]["attention"]["replace_with_linear"] = true;
    blocks[1]["attention"]["n_heads_in_group"] = nullptr;
    blocks[2]["ffn"]["replace_with_linear"] = true;
    blocks[3]["ffn"]["no_op"] = true;
    const auto dir = std::filesystem::temp_directory_path() / "day0_torch_nemotron_nas_linear";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << config->dump(1);
    const auto kinds = checkShrunk((dir / "config.json").string(), dir / "run");
    EXPECT_TRUE(kinds.contains({ model::MixerKind::Linear, model::FfnKind::Dense }));
    EXPECT_TRUE(kinds.contains({ model::MixerKind::Attention, model::FfnKind::Linear }));
    EXPECT_TRUE(kinds.contains({ model::MixerKind::Attention, model::FfnKind::None }));
    std::filesystem::remove_all(dir);
}
