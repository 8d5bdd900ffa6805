// Choosing a backend by name: the CPU reference, a plugin whose device is absent (its declared
// coverage still known), unknown names, and manifests naming unknown operators.
#include "extend/plugin_registry.h"

#include <gtest/gtest.h>

namespace day0::extend {
namespace {

PluginRegistry testRegistry() { return PluginRegistry({ DAY0_TEST_PLUGIN_DIR }); }

TEST(BackendSelection, CpuIsAlwaysAvailableAndNativeForEveryOp)
{
    const auto choice = chooseBackend(testRegistry(), "cpu");
    ASSERT_TRUE(choice.ok());
    EXPECT_EQ(choice->name, "day0-cpu");
    ASSERT_TRUE(choice->backend);
    EXPECT_FALSE(choice->unavailable.has_value());
    EXPECT_EQ(choice->declaredOps.size(), exec::allBackendOps().size());
}

TEST(BackendSelection, APluginWithoutItsDeviceKeepsItsDeclaredOpsAndSaysWhy)
{
    const auto registry = testRegistry();
    const PluginInfo* info = registry.find("fakegpu");
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->ops,
        (std::vector<exec::BackendOp> { exec::BackendOp::Linear, exec::BackendOp::RmsNorm }));
    const auto choice = chooseBackend(registry, "fakegpu");
    ASSERT_TRUE(choice.ok());
    EXPECT_FALSE(choice->backend);
    ASSERT_TRUE(choice->unavailable.has_value());
    EXPECT_EQ(choice->unavailable->code, ErrorCode::Unsupported);
    EXPECT_NE(choice->unavailable->message.find("no FAKE device"), std::string::npos);
    EXPECT_EQ(choice->declaredOps.size(), 2u);
}

TEST(BackendSelection, UnknownNamesListWhatIsAvailable)
{
    const auto choice = chooseBackend(testRegistry(), "tpu");
    ASSERT_FALSE(choice.ok());
    EXPECT_EQ(choice.error().code, ErrorCode::BadInput);
    EXPECT_NE(choice.error().message.find("available: cpu, fakegpu"), std::string::npos)
        << choice.error().message;
}

TEST(BackendSelection, AManifestNamingAnUnknownOperatorIsSkippedWithAWarning)
{
    const auto registry = testRegistry();
    EXPECT_EQ(registry.find("badops"), nullptr);
    bool warned = false;
    for (const auto& w : registry.warnings()) {
        warned = warned || w.find("warp_drive") != std::string::npos;
    }
    EXPECT_TRUE(warned);
}

} // namespace
} // namespace day0::extend
