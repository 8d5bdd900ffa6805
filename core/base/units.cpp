#include "base/units.h"

#include <fmt/format.h>

#include <cmath>

namespace day0 {

namespace {

std::string threeFigures(double value, const char* unit)
{
    const double a = std::fabs(value);
    if (a >= 100.0) {
        return fmt::format("{:.0f} {}", value, unit);
    }
    if (a >= 10.0) {
        return fmt::format("{:.1f} {}", value, unit);
    }
    return fmt::format("{:.2f} {}", value, unit);
}

} // namespace

std::string formatBytes(Bytes bytes)
{
    static constexpr const char* kUnits[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = double(bytes.value);
    int unit = 0;
    while (std::fabs(v) >= 1024.0 && unit < 5) {
        v /= 1024.0;
        ++unit;
    }
    if (unit == 0) {
        return fmt::format("{} B", bytes.value);
    }
    return threeFigures(v, kUnits[unit]);
}

std::string formatDuration(Seconds seconds)
{
    const double s = seconds.value;
    const double a = std::fabs(s);
    if (a == 0.0) {
        return "0 s";
    }
    if (a < 1e-6) {
        return threeFigures(s * 1e9, "ns");
    }
    if (a < 1e-3) {
        return threeFigures(s * 1e6, "µs");
    }
    if (a < 1.0) {
        return threeFigures(s * 1e3, "ms");
    }
    if (a < 600.0) {
        return threeFigures(s, "s");
    }
    return threeFigures(s / 60.0, "min");
}

std::string formatExact(std::int64_t count)
{
    const std::string digits = std::to_string(count);
    const std::size_t sign = count < 0 ? 1 : 0;
    std::string out = digits.substr(0, sign);
    for (std::size_t i = sign; i < digits.size(); ++i) {
        if (i > sign && (digits.size() - i) % 3 == 0) {
            out += ',';
        }
        out += digits[i];
    }
    return out;
}

std::string formatCount(double count)
{
    const double a = std::fabs(count);
    if (a >= 1e12) {
        return fmt::format("{:.3g}T", count / 1e12);
    }
    if (a >= 1e9) {
        return fmt::format("{:.3g}B", count / 1e9);
    }
    if (a >= 1e6) {
        return fmt::format("{:.3g}M", count / 1e6);
    }
    if (a >= 1e3) {
        return fmt::format("{:.3g}K", count / 1e3);
    }
    return fmt::format("{:.0f}", count);
}

std::string formatFlopRate(double flopsPerSecond)
{
    const double a = std::fabs(flopsPerSecond);
    if (a >= 1e15) {
        return threeFigures(flopsPerSecond / 1e15, "PFLOP/s");
    }
    if (a >= 1e12) {
        return threeFigures(flopsPerSecond / 1e12, "TFLOP/s");
    }
    return threeFigures(flopsPerSecond / 1e9, "GFLOP/s");
}

} // namespace day0
