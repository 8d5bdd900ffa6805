#include "serve/bench_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace day0::serve {

std::string_view rampUpName(RampUp ramp)
{
    switch (ramp) {
    case RampUp::Linear:
        return "linear";
    case RampUp::Exponential:
        return "exponential";
    case RampUp::None:
        break;
    }
    return "none";
}

Result<void> checkArrivals(const ArrivalOptions& o)
{
    if (!(o.rate > 0.0)) {
        return Error::badInput(fmt::format("--request-rate must be > 0, got {}", o.rate));
    }
    if (!(o.burstiness > 0.0) || !std::isfinite(o.burstiness)) {
        return Error::badInput(fmt::format("--burstiness must be > 0, got {}", o.burstiness));
    }
    if (o.ramp == RampUp::None) {
        if (o.rampStart > 0 || o.rampEnd > 0) {
            return Error::badInput("--ramp-start / --ramp-end need --ramp-up linear|exponential");
        }
        return success();
    }
    if (!(o.rampStart > 0.0) || !(o.rampEnd > 0.0) || !std::isfinite(o.rampStart)
        || !std::isfinite(o.rampEnd)) {
        return Error::badInput(
            fmt::format("--ramp-up {} needs --ramp-start and --ramp-end > 0 req/s (got {} and {})",
                rampUpName(o.ramp), o.rampStart, o.rampEnd));
    }
    return success();
}

std::vector<double> arrivalTimes(const ArrivalOptions& o, int n, std::mt19937_64& rng)
{
    std::vector<double> times;
    times.reserve(std::size_t(std::max(n, 0)));
    double at = 0.0;
    for (int i = 0; i < n; ++i) {
        double rate = o.rate;
        if (o.ramp != RampUp::None) {
            const double p = double(i) / double(std::max(n - 1, 1));
            rate = o.ramp == RampUp::Linear ? o.rampStart + (o.rampEnd - o.rampStart) * p
                                            : o.rampStart * std::pow(o.rampEnd / o.rampStart, p);
        }
        if (std::isfinite(rate)) {
            std::gamma_distribution<double> gap(o.burstiness, 1.0 / (rate * o.burstiness));
            at += gap(rng);
        }
        times.push_back(at);
    }
    // vLLM rescales the cumulative delays of a constant rate so the last request arrives at
    // n / rate: the achieved rate is the asked one, whatever the draw.
    if (o.ramp == RampUp::None && std::isfinite(o.rate) && n > 0 && times.back() > 0) {
        const double factor = (double(n) / o.rate) / times.back();
        for (auto& t : times) {
            t *= factor;
        }
    }
    return times;
}

Result<std::vector<std::pair<std::int64_t, std::int64_t>>> readLengthsFile(
    const std::filesystem::path& file)
{
    std::ifstream in(file);
    if (!in) {
        return Error::badInput(fmt::format("{}: cannot open the lengths file", file.string()));
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        line = line.substr(0, line.find('#'));
        std::replace(line.begin(), line.end(), ',', ' ');
        std::istringstream fields(line);
        std::string a;
        std::string b;
        std::string extra;
        if (!(fields >> a)) {
            continue; // blank or comment
        }
        const auto bad = [&](const std::string& why) {
            return Error::badInput(fmt::format("{}:{}: {}", file.string(), number, why));
        };
        if (!(fields >> b) || (fields >> extra)) {
            return bad("expected two lengths, INPUT OUTPUT");
        }
        std::int64_t lengths[2] = { 0, 0 };
        const std::string* texts[2] = { &a, &b };
        for (int k = 0; k < 2; ++k) {
            try {
                std::size_t used = 0;
                lengths[k] = std::stoll(*texts[k], &used);
                if (used != texts[k]->size() || lengths[k] < 1) {
                    throw std::invalid_argument(*texts[k]);
                }
            } catch (const std::exception&) {
                return bad(fmt::format("'{}' is not a token count >= 1", *texts[k]));
            }
        }
        out.emplace_back(lengths[0], lengths[1]);
    }
    if (out.empty()) {
        return Error::badInput(
            fmt::format("{}: no lengths (INPUT OUTPUT per line)", file.string()));
    }
    return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> requestLengths(
    const LengthOptions& o, int n, std::mt19937_64& rng)
{
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    const auto draw = [&](std::int64_t len, double range) {
        if (range <= 0.0) {
            return len;
        }
        const auto lo = std::max<std::int64_t>(1, std::int64_t(double(len) * (1.0 - range)));
        const auto hi = std::max<std::int64_t>(lo, std::int64_t(double(len) * (1.0 + range)));
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    for (int i = 0; i < n; ++i) {
        if (!o.fromFile.empty()) {
            out.push_back(o.fromFile[std::size_t(i) % o.fromFile.size()]);
            continue;
        }
        const auto input = draw(o.inputTokens, o.inputRange);
        out.emplace_back(input, draw(o.outputTokens, o.outputRange));
    }
    return out;
}

} // namespace day0::serve
