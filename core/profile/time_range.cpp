#include "profile/time_range.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace day0::profile {

namespace {

constexpr double kLimitNs = 4611686018427387904.0; // 2^62, the trace model's time domain

std::string_view trim(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.remove_suffix(1);
    }
    return s;
}

} // namespace

TimeRange TimeRange::shifted(std::int64_t origin) const
{
    auto shift = [origin](std::int64_t v, std::int64_t open) {
        if (v == open) {
            return v;
        }
        std::int64_t out = 0;
        if (__builtin_add_overflow(v, origin, &out)) {
            return origin > 0 ? INT64_MAX : INT64_MIN;
        }
        return out;
    };
    return { shift(start, INT64_MIN), shift(end, INT64_MAX) };
}

Result<std::int64_t> parseDurationNs(std::string_view text)
{
    const std::string_view t = trim(text);
    std::size_t numberEnd = 0;
    while (numberEnd < t.size()
        && (std::isdigit(static_cast<unsigned char>(t[numberEnd])) || t[numberEnd] == '.'
            || t[numberEnd] == 'e' || t[numberEnd] == 'E' || t[numberEnd] == '+'
            || t[numberEnd] == '-')) {
        // 'e' starts an exponent only after a digit and before a digit or sign ("1e6ns").
        if ((t[numberEnd] == 'e' || t[numberEnd] == 'E')
            && (numberEnd + 1 >= t.size()
                || !(std::isdigit(static_cast<unsigned char>(t[numberEnd + 1]))
                    || t[numberEnd + 1] == '-' || t[numberEnd + 1] == '+'))) {
            break;
        }
        ++numberEnd;
    }
    const std::string number(t.substr(0, numberEnd));
    const std::string_view unit = trim(t.substr(numberEnd));
    double value = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || ptr != number.data() + number.size()) {
        return Error::badInput(fmt::format(
            "'{}': expected a time such as 1500, 20us, 1.5ms or 2s (ns without a unit)", text));
    }
    double scale = 0;
    if (unit.empty() || unit == "ns") {
        scale = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s") {
        scale = 1e3;
    } else if (unit == "ms") {
        scale = 1e6;
    } else if (unit == "s") {
        scale = 1e9;
    } else {
        return Error::badInput(
            fmt::format("'{}': unknown time unit '{}' (use ns, us, ms or s)", text, unit));
    }
    const double ns = std::nearbyint(value * scale);
    if (!std::isfinite(ns) || ns < 0 || ns > kLimitNs) {
        return Error::badInput(
            fmt::format("'{}': a time must be between 0 and 2^62 ns (about 146 years)", text));
    }
    return std::int64_t(ns);
}

Result<TimeRange> parseTimeRange(std::string_view text)
{
    const auto colon = text.find(':');
    if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
        return Error::badInput(fmt::format(
            "'{}': expected START:END, e.g. 1.5ms:3ms (either end may be left empty)", text));
    }
    TimeRange range;
    const std::string_view a = trim(text.substr(0, colon));
    const std::string_view b = trim(text.substr(colon + 1));
    if (!a.empty()) {
        auto v = parseDurationNs(a);
        if (!v) {
            return v.error();
        }
        range.start = *v;
    }
    if (!b.empty()) {
        auto v = parseDurationNs(b);
        if (!v) {
            return v.error();
        }
        range.end = *v;
    }
    if (range.end <= range.start) {
        return Error::badInput(
            fmt::format("'{}': the end of the range must come after its start", text));
    }
    return range;
}

} // namespace day0::profile
