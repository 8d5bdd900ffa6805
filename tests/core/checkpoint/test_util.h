#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace day0::checkpoint::test {

/// A fresh, empty scratch folder for one test: under the running test's name, so that tests
/// CTest runs in parallel (one process each) never share one.
inline std::filesystem::path scratch(const std::string& name)
{
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string owner = info == nullptr
        ? std::string("global")
        : std::string(info->test_suite_name()) + "." + info->name();
    const auto dir = std::filesystem::temp_directory_path() / "day0_checkpoint_test" / owner / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

/// Bytes of a safetensors file with the given header text and data (no checks: for broken files).
inline std::string rawSafetensors(const std::string& header, const std::string& data)
{
    std::string out(8, '\0');
    const std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) {
        out[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
    }
    return out + header + data;
}

inline void writeBytes(const std::filesystem::path& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::filesystem::path testData(const std::string& name)
{
    return std::filesystem::path(DAY0_TEST_DATA_DIR) / "checkpoint" / name;
}

} // namespace day0::checkpoint::test
