#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace day0 {

/// A count of bytes (signed, so that differences and deficits are expressible).
struct Bytes {
    std::int64_t value = 0;

    constexpr Bytes() = default;
    constexpr explicit Bytes(std::int64_t v)
        : value(v)
    {
    }
    constexpr auto operator<=>(const Bytes&) const = default;
    constexpr Bytes operator+(Bytes o) const { return Bytes(value + o.value); }
    constexpr Bytes operator-(Bytes o) const { return Bytes(value - o.value); }
    constexpr Bytes& operator+=(Bytes o)
    {
        value += o.value;
        return *this;
    }
    [[nodiscard]] constexpr double gib() const
    {
        return double(value) / (1024.0 * 1024.0 * 1024.0);
    }
    static constexpr Bytes fromGiB(double g)
    {
        return Bytes(std::int64_t(g * 1024.0 * 1024.0 * 1024.0));
    }
};

/// A duration in seconds.
struct Seconds {
    double value = 0.0;

    constexpr Seconds() = default;
    constexpr explicit Seconds(double v)
        : value(v)
    {
    }
    constexpr auto operator<=>(const Seconds&) const = default;
    constexpr Seconds operator+(Seconds o) const { return Seconds(value + o.value); }
    constexpr Seconds& operator+=(Seconds o)
    {
        value += o.value;
        return *this;
    }
};

/// A number of floating-point operations (a multiply-add counts as 2).
struct Flops {
    double value = 0.0;

    constexpr Flops() = default;
    constexpr explicit Flops(double v)
        : value(v)
    {
    }
    constexpr auto operator<=>(const Flops&) const = default;
};

/// "1.50 GiB", "512 B", "-3.20 MiB": binary units, three significant figures.
std::string formatBytes(Bytes bytes);
/// "12.3 ms", "4.56 s", "850 ns".
std::string formatDuration(Seconds seconds);
/// "1.03T", "37.6B", "151M", "4.1K": parameter and token counts.
std::string formatCount(double count);
/// "116,829,156,672": every digit, grouped by thousands.
std::string formatExact(std::int64_t count);
/// "989 TFLOP/s".
std::string formatFlopRate(double flopsPerSecond);

} // namespace day0
