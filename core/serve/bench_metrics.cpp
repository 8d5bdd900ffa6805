#include "serve/bench_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace day0::serve {

double percentile(const std::vector<double>& sorted, double p)
{
    if (sorted.empty()) {
        return 0.0;
    }
    const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(sorted.size() - 1);
    const auto lo = std::size_t(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

MetricSummary summarize(
    std::vector<double> values, const std::vector<double>& percentiles, double scale)
{
    MetricSummary s;
    s.count = values.size();
    for (auto& v : values) {
        v *= scale;
    }
    std::sort(values.begin(), values.end());
    if (!values.empty()) {
        double sum = 0.0;
        for (const double v : values) {
            sum += v;
        }
        s.mean = sum / double(values.size());
        double var = 0.0;
        for (const double v : values) {
            var += (v - s.mean) * (v - s.mean);
        }
        s.stddev = std::sqrt(var / double(values.size()));
        s.median = percentile(values, 50.0);
    }
    for (const double p : percentiles) {
        s.percentiles.emplace_back(p, percentile(values, p));
    }
    return s;
}

bool SloSet::met(double ttft, double tpot, double e2el) const
{
    const auto within = [](double objectiveMs, double seconds) {
        return objectiveMs <= 0 || seconds * 1000.0 <= objectiveMs;
    };
    return within(ttftMs, ttft) && within(tpotMs, tpot) && within(e2elMs, e2el);
}

std::string SloSet::describe() const
{
    std::string out;
    const auto add = [&](const char* key, double ms) {
        if (ms > 0) {
            out += fmt::format("{}{}:{:g}", out.empty() ? "" : " ", key, ms);
        }
    };
    add("ttft", ttftMs);
    add("tpot", tpotMs);
    add("e2el", e2elMs);
    return out;
}

Result<SloSet> parseSlos(const std::vector<std::string>& items)
{
    SloSet slos;
    for (const auto& group : items) {
        std::stringstream in(group);
        std::string item;
        while (std::getline(in, item, ',')) {
            const auto colon = item.find(':');
            const std::string key = item.substr(0, colon);
            double* target = key == "ttft" ? &slos.ttftMs
                : key == "tpot"            ? &slos.tpotMs
                : key == "e2el"            ? &slos.e2elMs
                                           : nullptr;
            double value = 0.0;
            bool ok = target != nullptr && colon != std::string::npos;
            if (ok) {
                try {
                    std::size_t used = 0;
                    const std::string text = item.substr(colon + 1);
                    value = std::stod(text, &used);
                    ok = used == text.size() && value > 0 && std::isfinite(value);
                } catch (const std::exception&) {
                    ok = false;
                }
            }
            if (!ok) {
                return Error::badInput(fmt::format("--goodput: '{}' is not ttft:MS, tpot:MS or "
                                                   "e2el:MS with MS > 0 milliseconds",
                    item));
            }
            if (*target > 0) {
                return Error::badInput(fmt::format("--goodput: '{}' given twice", key));
            }
            *target = value;
        }
    }
    if (!slos.any()) {
        return Error::badInput("--goodput: no objective given (ttft:MS, tpot:MS, e2el:MS)");
    }
    return slos;
}

Result<std::vector<double>> parsePercentiles(const std::string& text)
{
    std::vector<double> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            std::size_t used = 0;
            const double p = std::stod(item, &used);
            if (used != item.size() || p < 0.0 || p > 100.0) {
                throw std::invalid_argument(item);
            }
            out.push_back(p);
        } catch (const std::exception&) {
            return Error::badInput(
                fmt::format("--percentiles: '{}' is not a percentile between 0 and 100", item));
        }
    }
    if (out.empty()) {
        return Error::badInput("--percentiles: none given");
    }
    return out;
}

double requestTpot(double ttft, double e2el, long long outputTokens)
{
    return outputTokens > 1 ? (e2el - ttft) / double(outputTokens - 1) : 0.0;
}

} // namespace day0::serve
