// The memory figures of a streamed run (layer_stream.h): --memory-budget's sizes and the peak
// resident set.
#include "exec/layer_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

namespace day0::exec {

namespace {

Result<std::uint64_t> parseSizeOf(std::string_view text, std::string_view flag)
{
    const auto bad = [&] {
        return Error::badInput(
            fmt::format("{}: '{}' is not a size (e.g. 512M, 2G, 1.5GiB, 4096 bytes)", flag, text));
    };
    double value = 0.0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || !(value > 0.0) || !std::isfinite(value)) {
        return bad();
    }
    std::string unit(end, text.data() + text.size());
    std::transform(
        unit.begin(), unit.end(), unit.begin(), [](char c) { return char(::toupper(c)); });
    if (unit.ends_with("IB")) {
        unit.erase(unit.size() - 2);
    } else if (unit.size() == 2 && unit.back() == 'B') {
        unit.pop_back();
    }
    double scale = 1.0;
    if (unit.empty() || unit == "B") {
        scale = 1.0;
    } else if (unit == "K") {
        scale = 1024.0;
    } else if (unit == "M") {
        scale = 1024.0 * 1024.0;
    } else if (unit == "G") {
        scale = 1024.0 * 1024.0 * 1024.0;
    } else if (unit == "T") {
        scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
    } else {
        return bad();
    }
    return std::uint64_t(std::llround(value * scale));
}

} // namespace

Result<std::uint64_t> parseMemorySize(std::string_view text)
{
    return parseSizeOf(text, "--memory-budget");
}

Result<MemoryBudget> parseMemoryBudget(std::string_view budget, std::string_view perRank)
{
    if (!budget.empty() && !perRank.empty()) {
        return Error::badInput("--memory-budget and --memory-budget-per-rank are two meanings of "
                               "one bound: give one");
    }
    MemoryBudget out;
    out.perRank = !perRank.empty();
    if (const auto text = out.perRank ? perRank : budget; !text.empty()) {
        auto bytes
            = parseSizeOf(text, out.perRank ? "--memory-budget-per-rank" : "--memory-budget");
        if (!bytes) {
            return bytes.error();
        }
        out.bytes = *bytes;
    }
    return out;
}

std::uint64_t peakResidentBytes()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
            return std::uint64_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;
        }
    }
    return 0;
}

} // namespace day0::exec
