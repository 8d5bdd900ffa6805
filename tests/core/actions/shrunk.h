#pragma once
// A small random checkpoint of a bundled architecture for the actions' tests (the parallel
// proof's shrunk model: 2 layers, 4 heads, 8 experts, vocab 250), made once per name unless
// `fresh`.

#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"
#include "parallel_testkit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace day0::actions::test {

inline std::filesystem::path shrunk(
    const std::string& config, const std::string& name, bool fresh = false)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::path(::testing::TempDir()) / "actions_test" / name;
    if (!fresh && exec::holdsWeights(dir)) {
        return dir;
    }
    std::filesystem::remove_all(dir);
    // The parallel proof's sizes: every plan of its matrix divides them.
    auto made = day0::test::makeShrunkModel(config, dir);
    EXPECT_TRUE(made.ok()) << made.error().message;
    return dir;
}

/// Llama-3.1-8B shrunk to 2 layers of width 64, 8 heads over 2 KV heads (its GQA ratio, its own
/// lm_head), MLP 96, `vocab` rows, seed 7: the training tests' model, remade each call in `name`.
inline std::filesystem::path shrunkGqaLlama(const std::string& name, std::int64_t vocab = 250)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    const auto dir = std::filesystem::path(::testing::TempDir()) / "actions_test" / name;
    checkpoint::ShrinkOptions shrink;
    shrink.layers = 2;
    shrink.hidden = 64;
    shrink.heads = 8;
    shrink.vocab = vocab;
    shrink.intermediate = 96;
    shrink.seed = 7;
    shrink.replace = true;
    Progress progress;
    const auto made = checkpoint::shrinkModel("llama-3.1-8b", dir, shrink, progress, {});
    EXPECT_TRUE(made.ok()) << made.error().message;
    return dir;
}

} // namespace day0::actions::test
