#include "option_checks.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace day0::cli {

namespace {

// The accepted range of a numeric option; `openLow` / `openHigh` exclude the bound itself.
struct Range {
    double low = 0.0;
    double high = 0.0;
    bool openLow = false;
    bool openHigh = false;
    bool minusOneForAll = false; ///< "-1: all" (trace --top)
};

constexpr double kTokens = double(1 << 26); // 67M tokens of sequence or context
constexpr double kBatch = double(1 << 24);
constexpr double kRanks = double(1 << 20);

// By long option name; the same name means the same kind of quantity in every verb.
const Range* rangeOf(std::string_view name, bool integral)
{
    struct Entry {
        std::string_view name;
        Range range;
    };
    static const Entry kFloats[] = {
        { "efficiency", { 0.0, 1.0, true, false } },
        { "fp8-efficiency", { 0.0, 1.0, true, false } },
        { "headroom", { 0.0, 1.0, false, true } },
        { "fragmentation", { 0.0, 1.0, false, true } },
        { "expert-load", { 1.0, 1e6 } },
        { "reserve", { 0.0, 1e6 } },
        { "nccl", { 0.0, 1e6 } },
        { "tpot-ms", { 0.0, 1e9, true, false } },
        { "kv-cache-fraction", { 0.0, 1.0, true, false } },
        { "max-shard-size", { 0.0, 1e9, true, false } },
        { "comm-timeout", { 0.0, 1e6, true, false } },
        { "threshold", { 0.0, 1e9 } },
    };
    static const Entry kInts[] = {
        { "seq", { 1, kTokens } },
        { "context", { 1, kTokens } },
        { "prefill-chunk", { 1, kTokens } },
        { "prompt", { 0, kTokens } },
        { "output", { 0, kTokens } },
        { "batch", { 1, kBatch } },
        { "global-batch", { 1, kBatch } },
        { "micro-batch", { 1, kBatch } },
        { "micro-batches", { 1, kBatch } },
        { "max-batch", { 1, kBatch } },
        { "tp", { 1, kRanks } },
        { "pp", { 1, kRanks } },
        { "ep", { 1, kRanks } },
        { "cp", { 1, kRanks } },
        { "zero", { 0, 3 } },
        { "top", { 1, kRanks, false, false, true } },
        { "jobs", { 1, double(kMaxJobs) } },
        { "tokens", { 1, kRanks } },
        { "max-outputs", { 1, double(1 << 30) } },
        { "limit", { 1, double(1 << 30) } },
        { "device", { 0, kRanks } },
        { "rank", { 0, kRanks } },
        { "experts", { 1, kBatch } },
        { "heads", { 1, kBatch } },
        { "hidden", { 1, kBatch } },
        { "intermediate", { 1, kBatch } },
        { "layers", { 1, kBatch } },
        { "vocab", { 1, kBatch } },
        { "fp8-block", { 1, double(1 << 16) } },
        { "window", { 1, double(1 << 30) } },
    };
    static const Range kAnyFloat { 0.0, 1e18 };
    static const Range kAnyInt { 0.0, double(INT_MAX) };
    for (const auto& e :
        integral ? std::span<const Entry>(kInts) : std::span<const Entry>(kFloats)) {
        if (e.name == name) {
            return &e.range;
        }
    }
    return integral ? &kAnyInt : &kAnyFloat;
}

std::string describe(const Range& r, bool integral)
{
    const auto bound = [integral](double v) {
        return integral ? fmt::format("{}", std::int64_t(v)) : fmt::format("{:g}", v);
    };
    return fmt::format(
        "{}{}, {}{}", r.openLow ? "(" : "[", bound(r.low), bound(r.high), r.openHigh ? ")" : "]");
}

// CLI11 runs a check on each value (each element of a comma-separated list) before converting
// it; an empty string means the value passes to the conversion, which reports what it cannot
// convert.
std::string checkNumber(const std::string& value, const Range& range, bool integral)
{
    double v = 0.0;
    if (integral) {
        long long n = 0;
        const auto* end = value.data() + value.size();
        const auto [at, ec] = std::from_chars(value.data(), end, n);
        if (ec == std::errc::result_out_of_range) {
            return fmt::format("{} is out of range {}", value, describe(range, true));
        }
        if (ec != std::errc() || at != end) {
            return {};
        }
        v = double(n);
    } else {
        char* end = nullptr;
        v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') {
            return {};
        }
        if (!std::isfinite(v)) {
            return fmt::format("{} is not a finite number", value);
        }
    }
    if (range.minusOneForAll && v == -1.0) {
        return {};
    }
    const bool low = range.openLow ? v > range.low : v >= range.low;
    const bool high = range.openHigh ? v < range.high : v <= range.high;
    if (!low || !high) {
        return fmt::format("{} is out of range {}", value, describe(range, integral));
    }
    return {};
}

void checkOptions(CLI::App& app)
{
    for (CLI::Option* option : app.get_options()) {
        const bool positional = option->get_lnames().empty() && option->get_snames().empty();
        if (positional || option->get_type_name().empty() || option->get_expected_max() == 0) {
            continue;
        }
        // "--out --no-record": the value named a flag. A path that really starts with "--"
        // can be given as ./--name.
        option->check(CLI::Validator(
            [](std::string& value) -> std::string {
                if (value.size() > 2 && value.compare(0, 2, "--") == 0) {
                    return fmt::format("expected a value, got the option '{}'", value);
                }
                return {};
            },
            "", "not an option"));
        const std::string type = option->get_type_name();
        const bool integral = type == "INT" || type == "UINT";
        if (!integral && type != "FLOAT") {
            continue;
        }
        const std::string name = option->get_lnames().empty() ? option->get_snames().front()
                                                              : option->get_lnames().front();
        if (type == "UINT" && name == "seed") {
            continue;
        }
        const Range* range = rangeOf(name, integral);
        option->check(CLI::Validator(
            [range, integral](std::string& value) { return checkNumber(value, *range, integral); },
            describe(*range, integral), "range"));
    }
    for (CLI::App* sub : app.get_subcommands({})) {
        checkOptions(*sub);
    }
}

} // namespace

void applyOptionChecks(CLI::App& app) { checkOptions(app); }

} // namespace day0::cli
