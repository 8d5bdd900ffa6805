#pragma once

namespace CLI {
class App;
} // namespace CLI

namespace day0::cli {

/// Checks every value-taking option of `app` and its subcommands, in one place:
/// - a value that names a flag ("--out --no-record") is refused rather than swallowed;
/// - floating-point values must be finite and in the option's range (NaN, ±inf and a
///   negative size never reach a computation);
/// - integer values must be in the option's range: counts of sequences, tokens, batches and
///   ranks at least 1 and below sane maxima, `-j` at most kMaxJobs, indices non-negative.
/// Options not named in the table get the defaults of their type (finite, non-negative).
void applyOptionChecks(CLI::App& app);

/// The most threads a `-j` may ask for.
inline constexpr int kMaxJobs = 256;

} // namespace day0::cli
