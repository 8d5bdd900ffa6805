// day0 links no Qt (issue #16): the report figures come from libday0_figures at run time, so a
// headless machine needs no GUI libraries for the CLI.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

TEST(Linkage, Day0LinksNoQt)
{
    const std::string cmd = std::string("ldd '") + DAY0_CLI_PATH + "'";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
    ASSERT_NE(pipe, nullptr);
    std::string libs;
    std::array<char, 4096> buffer {};
    while (std::fgets(buffer.data(), int(buffer.size()), pipe.get()) != nullptr) {
        libs += buffer.data();
    }
    ASSERT_NE(libs.find("libc.so"), std::string::npos) << libs;
    EXPECT_EQ(libs.find("libQt"), std::string::npos) << libs;
}
