#pragma once

#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace day0::serve {

/// How the request rate changes over a load level (vLLM bench serve's --ramp-up-strategy).
enum class RampUp { None, Linear, Exponential };

/// "none", "linear", "exponential".
std::string_view rampUpName(RampUp ramp);

/// When requests are sent: gamma-distributed gaps as vLLM's `get_request`
/// (vllm/benchmarks/serve.py): request i waits a gap drawn from Gamma(shape = B,
/// scale = 1 / (rate_i · B)), B the burstiness (1: Poisson, exponential gaps; < 1 burstier;
/// > 1 more regular), rate_i the rate at request i. Without ramp-up rate_i = `rate` and the
/// cumulative times are scaled so the last one falls at n / rate, as vLLM does, so the achieved
/// rate is the asked one. With ramp-up rate_i goes from `rampStart` to `rampEnd` with
/// progress p = i / (n − 1): linearly (start + (end − start)·p) or exponentially
/// (start · (end / start)^p), and `rate` is not used.
struct ArrivalOptions {
    double rate = std::numeric_limits<double>::infinity(); ///< req/s; infinity: all at once
    double burstiness = 1.0;
    RampUp ramp = RampUp::None;
    double rampStart = 0.0; ///< req/s
    double rampEnd = 0.0; ///< req/s
};

/// Checks the options (rate > 0, burstiness > 0, ramp rates > 0 and given together with a
/// strategy); errors name the flag.
Result<void> checkArrivals(const ArrivalOptions& options);

/// Send times of `n` requests, seconds from the start of the level, non-decreasing. Draws from
/// `rng`, so a seed reproduces them.
std::vector<double> arrivalTimes(const ArrivalOptions& options, int n, std::mt19937_64& rng);

/// Prompt and output lengths of the requests: fixed, ranged (uniform integers in
/// [len·(1 − range), len·(1 + range)], vLLM's random dataset's --random-range-ratio, at least 1)
/// or read from a file.
struct LengthOptions {
    std::int64_t inputTokens = 32;
    std::int64_t outputTokens = 16;
    double inputRange = 0.0; ///< in [0, 1)
    double outputRange = 0.0; ///< in [0, 1)
    /// (input, output) pairs from --lengths-file, used in order and cycled; empty: drawn.
    std::vector<std::pair<std::int64_t, std::int64_t>> fromFile;
};

/// Reads a lengths file: one request per line, "INPUT OUTPUT" (blank or comma separated),
/// '#' starts a comment. Errors name the file, line and problem.
Result<std::vector<std::pair<std::int64_t, std::int64_t>>> readLengthsFile(
    const std::filesystem::path& file);

/// (input, output) lengths of `n` requests. Draws from `rng` when ranged.
std::vector<std::pair<std::int64_t, std::int64_t>> requestLengths(
    const LengthOptions& options, int n, std::mt19937_64& rng);

} // namespace day0::serve
