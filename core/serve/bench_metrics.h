#pragma once

#include "base/result.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace day0::serve {

/// Mean, median, standard deviation and the asked percentiles of one metric, in the unit the
/// caller gave (milliseconds for latencies, tokens/s for per-user rates).
struct MetricSummary {
    std::size_t count = 0;
    double mean = 0.0;
    double median = 0.0;
    double stddev = 0.0;
    std::vector<std::pair<double, double>> percentiles; ///< (p, value)
};

/// The value below which p percent of `sorted` lies, linearly interpolated between closest
/// ranks (numpy.percentile's default, which vLLM's benchmark uses).
double percentile(const std::vector<double>& sorted, double p);

/// Summarises `values` times `scale` (1000: seconds to milliseconds). std is the population one
/// (numpy.std), as vLLM's.
MetricSummary summarize(
    std::vector<double> values, const std::vector<double>& percentiles, double scale = 1000.0);

/// Service-level objectives of `--goodput`, in milliseconds; a value <= 0 is not given.
/// Follows vLLM's `--goodput ttft:MS tpot:MS e2el:MS`: a completed request is good when it meets
/// every given objective (its value <= the objective), and goodput is good requests / duration.
struct SloSet {
    double ttftMs = 0.0;
    double tpotMs = 0.0;
    double e2elMs = 0.0;
    [[nodiscard]] bool any() const { return ttftMs > 0 || tpotMs > 0 || e2elMs > 0; }
    /// Whether a request with these times (seconds) meets every given objective.
    [[nodiscard]] bool met(double ttft, double tpot, double e2el) const;
    /// "ttft:500 tpot:50", the form parseSlos reads.
    [[nodiscard]] std::string describe() const;
};

/// Parses `ttft:MS`, `tpot:MS`, `e2el:MS` items (each item may also hold several, separated by
/// commas). Errors name the bad item; a key given twice is an error.
Result<SloSet> parseSlos(const std::vector<std::string>& items);

/// Parses "50,90,99" (each in [0, 100]).
Result<std::vector<double>> parsePercentiles(const std::string& text);

/// TPOT of one request as vLLM's calculate_metrics computes it: (E2EL − TTFT) / (output − 1),
/// 0 for a single output token.
double requestTpot(double ttft, double e2el, long long outputTokens);

} // namespace day0::serve
