#pragma once

#include "base/result.h"
#include "comm/communicator.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace day0::train {

/// How gradients travel in the data-parallel all-reduce.
enum class CompressionKind {
    None, ///< full precision (the arithmetic's own)
    Fp16, ///< every element rounded to fp16 before the reduction, the mean rounded again
    Bf16, ///< the same with bf16
    TopK, ///< each rank sends only its k = ratio·n largest-magnitude elements (index, value)
};

/// Gradient compression settings.
struct CompressionOptions {
    CompressionKind kind = CompressionKind::None;
    double ratio
        = 0.01; ///< TopK: fraction of elements each rank sends (k = max(1, round(ratio·n)))
    bool errorFeedback = true; ///< TopK: what was not sent is added to the next step's gradient

    /// "none", "fp16", "bf16", "topk:0.01" (error feedback on), "topk:0.001,ef=off".
    static Result<CompressionOptions> parse(const std::string& text);
    /// The spelling parse() reads.
    [[nodiscard]] std::string describe() const;
};

/// What one compressed all-reduce sent.
struct CompressionStats {
    std::int64_t elements = 0; ///< gradient elements
    std::int64_t sentElements = 0; ///< elements this rank put on the wire
    std::int64_t sentBytes = 0; ///< bytes this rank put on the wire (topk: 4-byte index + value)
};

/// Replaces `grad` (this rank's gradient) by the mean over the ranks of `comm`, sent as
/// `options` says. `residual` is this rank's error-feedback memory (TopK with error feedback:
/// sized to grad on first use, updated in place; otherwise untouched). `valueBytes` is the size
/// of an uncompressed element (4 for fp32 training, 8 for fp64). The reduction runs in double
/// in rank order on every rank, so all ranks hold the same bits. Collective: every rank calls
/// it with the same options and size.
Result<CompressionStats> meanAllReduce(comm::Communicator& comm, std::span<double> grad,
    const CompressionOptions& options, std::vector<double>& residual, int valueBytes);

/// Whether a compressed run kept up with its uncompressed twin (same seed, same steps).
struct ConvergenceVerdict {
    double baselineFinal = 0.0; ///< mean loss of the baseline's last tenth of steps
    double compressedFinal = 0.0;
    double baselineDrop = 0.0; ///< baseline's first loss minus its final
    double gap = 0.0; ///< (compressedFinal - baselineFinal) / baselineDrop
    double tolerance = 0.0;
    bool converges = false;
    std::string message;
};

/// The documented tolerance on `gap`: a compressed run converges when its final loss is within
/// 25% of the baseline's whole loss reduction above the baseline's final loss. See
/// compression.cpp for how it was chosen.
inline constexpr double kConvergenceGapTolerance = 0.25;

/// Judges a compressed loss curve against its baseline (same length, at least 10 steps).
Result<ConvergenceVerdict> judgeConvergence(const std::vector<double>& baseline,
    const std::vector<double>& compressed, double tolerance = kConvergenceGapTolerance);

} // namespace day0::train
