#include "history/timestamp.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <optional>

namespace day0::history {

namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

// Reads exactly `width` digits at `pos`.
bool readDigits(std::string_view text, std::size_t& pos, int width, int& out)
{
    if (pos + std::size_t(width) > text.size()) {
        return false;
    }
    int value = 0;
    for (int i = 0; i < width; ++i) {
        const char c = text[pos + std::size_t(i)];
        if (!std::isdigit(static_cast<unsigned char>(c))) {
            return false;
        }
        value = value * 10 + (c - '0');
    }
    pos += std::size_t(width);
    out = value;
    return true;
}

bool expect(std::string_view text, std::size_t& pos, char c)
{
    if (pos < text.size() && text[pos] == c) {
        ++pos;
        return true;
    }
    return false;
}

std::optional<Timestamp> parseAge(std::string_view text, Timestamp reference)
{
    if (text.size() < 2) {
        return std::nullopt;
    }
    const char unit = text.back();
    std::int64_t count = 0;
    const auto digits = text.substr(0, text.size() - 1);
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || count < 0) {
        return std::nullopt;
    }
    std::int64_t unitSeconds = 0;
    switch (unit) {
    case 'm':
        unitSeconds = 60;
        break;
    case 'h':
        unitSeconds = 3600;
        break;
    case 'd':
        unitSeconds = 86400;
        break;
    case 'w':
        unitSeconds = std::int64_t(7) * 86400;
        break;
    default:
        return std::nullopt;
    }
    return reference - seconds(count * unitSeconds);
}

std::optional<Timestamp> parseCalendar(std::string_view text)
{
    std::size_t pos = 0;
    std::tm tm {};
    int year = 0;
    int month = 0;
    int day = 0;
    if (!readDigits(text, pos, 4, year) || !expect(text, pos, '-')
        || !readDigits(text, pos, 2, month) || !expect(text, pos, '-')
        || !readDigits(text, pos, 2, day)) {
        return std::nullopt;
    }
    int hour = 0;
    int minute = 0;
    int second = 0;
    int micros = 0;
    if (pos < text.size() && (text[pos] == 'T' || text[pos] == ' ')) {
        ++pos;
        if (!readDigits(text, pos, 2, hour) || !expect(text, pos, ':')
            || !readDigits(text, pos, 2, minute)) {
            return std::nullopt;
        }
        if (expect(text, pos, ':') && !readDigits(text, pos, 2, second)) {
            return std::nullopt;
        }
        if (expect(text, pos, '.')) {
            int scale = 100000;
            const std::size_t start = pos;
            while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
                micros += (text[pos] - '0') * scale;
                scale /= 10;
                ++pos;
            }
            if (pos == start) {
                return std::nullopt;
            }
        }
    }
    const bool utc = expect(text, pos, 'Z');
    if (pos != text.size() || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23
        || minute > 59 || second > 60) {
        return std::nullopt;
    }
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    tm.tm_isdst = -1;
    const std::time_t t = utc ? ::timegm(&tm) : std::mktime(&tm);
    if (t == std::time_t(-1) && !(utc && year == 1969)) {
        return std::nullopt;
    }
    return Timestamp(seconds(t)) + microseconds(micros);
}

} // namespace

Timestamp now()
{
    return std::chrono::time_point_cast<microseconds>(std::chrono::system_clock::now());
}

std::string formatIso(Timestamp time)
{
    const auto secs = std::chrono::floor<seconds>(time);
    const auto micros = (time - secs).count();
    const std::time_t t = secs.time_since_epoch().count();
    std::tm tm {};
    ::gmtime_r(&t, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900,
        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
}

std::string formatLocal(Timestamp time)
{
    const std::time_t t = std::chrono::floor<seconds>(time).time_since_epoch().count();
    std::tm tm {};
    ::localtime_r(&t, &tm);
    return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

Result<Timestamp> parseTime(std::string_view text, Timestamp reference)
{
    if (auto age = parseAge(text, reference)) {
        return *age;
    }
    if (auto calendar = parseCalendar(text)) {
        return *calendar;
    }
    return Error::badInput(
        fmt::format("'{}' is not a time: use 2025-07-11, 2025-07-11T09:30[:05][Z] "
                    "(local time unless Z), or an age such as 90m, 12h, 7d, 2w",
            text));
}

} // namespace day0::history
