#pragma once
// A small random checkpoint of a bundled architecture for the actions' tests: 2 layers, hidden
// 64, 4 heads, 8 experts where the family has them, made once per test binary and name.

#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "exec/checkpoint_weights.h"

#include <gtest/gtest.h>

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
    checkpoint::ShrinkOptions o;
    o.layers = 2;
    o.hidden = 64;
    o.heads = 4;
    o.experts = 8;
    o.vocab = 250; // not a multiple of tp: uneven vocab-parallel slices
    o.intermediate = 96;
    o.replace = true;
    Progress progress;
    auto r = checkpoint::shrinkModel(config, dir, o, progress, {});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return dir;
}

} // namespace day0::actions::test
