#include "extend/plugin_registry.h"

#include <gtest/gtest.h>

using namespace day0;
using namespace day0::extend;

TEST(PluginRegistry, FindsPluginsByMetadataAndReportsBrokenOnes)
{
    PluginRegistry registry({ DAY0_TEST_PLUGIN_DIR });
    ASSERT_NE(registry.find("selftest"), nullptr);
    EXPECT_EQ(registry.find("selftest")->kind, "communicator");
    EXPECT_EQ(registry.find("broken"), nullptr);
    ASSERT_EQ(registry.warnings().size(), 1u);
    EXPECT_NE(registry.warnings()[0].find("'kind' is missing"), std::string::npos)
        << registry.warnings()[0];
}

TEST(PluginRegistry, LoadsACommunicatorThatWorks)
{
    PluginRegistry registry({ DAY0_TEST_PLUGIN_DIR });
    auto comm = createCommunicator(registry, "selftest");
    ASSERT_TRUE(comm.ok()) << comm.error().message;
    EXPECT_EQ((*comm)->size(), 1);
    float x = 2.5f;
    ASSERT_TRUE((*comm)->allReduce(&x, &x, 1, DType::F32, comm::ReduceOp::Sum).ok());
    EXPECT_EQ(x, 2.5f);
}

TEST(PluginRegistry, ErrorsNameThePlugin)
{
    PluginRegistry registry({ DAY0_TEST_PLUGIN_DIR });
    auto missing = createCommunicator(registry, "cuda");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("plugin 'cuda' is not installed (found: selftest)"),
        std::string::npos)
        << missing.error().message;
    auto failing = createCommunicator(registry, "selftest", "{\"fail\": true}");
    ASSERT_FALSE(failing.ok());
    EXPECT_EQ(failing.error().message, "plugin 'selftest': asked to fail");
}
