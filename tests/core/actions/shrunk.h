#pragma once
// A small random checkpoint of a bundled architecture for the actions' tests (the parallel
// proof's shrunk model: 2 layers, 4 heads, 8 experts, vocab 250), made once per name unless
// `fresh`.

#include "base/resources.h"
#include "exec/checkpoint_weights.h"
#include "parallel_testkit.h"

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
    // The parallel proof's sizes: every plan of its matrix divides them.
    auto made = day0::test::makeShrunkModel(config, dir);
    EXPECT_TRUE(made.ok()) << made.error().message;
    return dir;
}

} // namespace day0::actions::test
