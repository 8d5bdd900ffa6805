#include "train/compression.h"

#include "train/next_token_mlp.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

namespace day0::train {

namespace {

Result<void> sumAllReduce(comm::Communicator& comm, std::span<double> values)
{
    return comm.allReduce(
        values.data(), values.data(), values.size(), DType::F64, comm::ReduceOp::Sum);
}

/// The k largest |acc| indices, ties to the lower index, in increasing index order.
std::vector<std::int64_t> topK(std::span<const double> acc, std::size_t k)
{
    std::vector<std::int64_t> order(acc.size());
    std::iota(order.begin(), order.end(), 0);
    auto larger = [&](std::int64_t a, std::int64_t b) {
        const double x = std::fabs(acc[std::size_t(a)]);
        const double y = std::fabs(acc[std::size_t(b)]);
        return x > y || (x == y && a < b);
    };
    std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(), larger);
    order.resize(k);
    std::sort(order.begin(), order.end());
    return order;
}

Result<CompressionStats> topKAllReduce(comm::Communicator& comm, std::span<double> grad,
    int valueBytes, const CompressionOptions& options, std::vector<double>& residual)
{
    const std::size_t n = grad.size();
    const std::size_t k = std::clamp<std::size_t>(
        std::size_t(std::llround(options.ratio * double(n))), 1, std::max<std::size_t>(n, 1));
    if (options.errorFeedback) {
        if (residual.size() != n) {
            residual.assign(n, 0.0);
        }
        for (std::size_t i = 0; i < n; ++i) {
            grad[i] += residual[i];
        }
    }
    const auto picked = topK(grad, k);
    std::vector<double> values(k);
    for (std::size_t j = 0; j < k; ++j) {
        values[j] = grad[std::size_t(picked[j])];
    }
    if (options.errorFeedback) {
        // What stays behind is remembered; what was sent is cleared from the memory.
        std::copy(grad.begin(), grad.end(), residual.begin());
        for (const auto i : picked) {
            residual[std::size_t(i)] = 0.0;
        }
    }
    const auto ranks = std::size_t(comm.size());
    std::vector<std::int64_t> allIdx(k * ranks);
    std::vector<double> allVal(k * ranks);
    DAY0_TRY(comm.allGather(picked.data(), allIdx.data(), k, DType::I64));
    DAY0_TRY(comm.allGather(values.data(), allVal.data(), k, DType::F64));
    std::fill(grad.begin(), grad.end(), 0.0);
    for (std::size_t r = 0; r < ranks; ++r) {
        for (std::size_t j = 0; j < k; ++j) {
            grad[std::size_t(allIdx[r * k + j])] += allVal[r * k + j];
        }
    }
    const auto inv = double(ranks);
    for (double& g : grad) {
        g /= inv;
    }
    return CompressionStats { std::int64_t(n), std::int64_t(k),
        std::int64_t(k) * (4 + valueBytes) }; // an int32 index and a value per entry
}

} // namespace

Result<CompressionOptions> CompressionOptions::parse(const std::string& text)
{
    CompressionOptions o;
    if (text == "none") {
        o.kind = CompressionKind::None;
        return o;
    }
    if (text == "fp16" || text == "bf16") {
        o.kind = text == "fp16" ? CompressionKind::Fp16 : CompressionKind::Bf16;
        return o;
    }
    const std::string usage = "none, fp16, bf16, topk:RATIO or topk:RATIO,ef=off";
    if (text.rfind("topk:", 0) != 0) {
        return Error::badInput(fmt::format("compression '{}': unknown ({})", text, usage));
    }
    o.kind = CompressionKind::TopK;
    std::string rest = text.substr(5);
    if (const auto comma = rest.find(','); comma != std::string::npos) {
        const std::string option = rest.substr(comma + 1);
        if (option != "ef=off" && option != "ef=on") {
            return Error::badInput(
                fmt::format("compression '{}': unknown option '{}' ({})", text, option, usage));
        }
        o.errorFeedback = option == "ef=on";
        rest = rest.substr(0, comma);
    }
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), o.ratio);
    if (ec != std::errc() || ptr != rest.data() + rest.size() || !(o.ratio > 0.0)
        || o.ratio > 1.0) {
        return Error::badInput(
            fmt::format("compression '{}': ratio '{}' must be in (0, 1]", text, rest));
    }
    return o;
}

std::string CompressionOptions::describe() const
{
    switch (kind) {
    case CompressionKind::None:
        return "none";
    case CompressionKind::Fp16:
        return "fp16";
    case CompressionKind::Bf16:
        return "bf16";
    case CompressionKind::TopK:
        return fmt::format("topk:{}{}", ratio, errorFeedback ? "" : ",ef=off");
    }
    return "none";
}

Result<CompressionStats> meanAllReduce(comm::Communicator& comm, std::span<double> grad,
    const CompressionOptions& options, std::vector<double>& residual, int valueBytes)
{
    const auto n = std::int64_t(grad.size());
    if (options.kind == CompressionKind::TopK) {
        return topKAllReduce(comm, grad, valueBytes, options, residual);
    }
    DType wire = DType::F64;
    if (options.kind != CompressionKind::None) {
        wire = options.kind == CompressionKind::Fp16 ? DType::F16 : DType::BF16;
        for (double& g : grad) {
            g = roundTo(g, wire);
        }
    }
    DAY0_TRY(sumAllReduce(comm, grad));
    const auto size = double(comm.size());
    for (double& g : grad) {
        // A 16-bit all-reduce hands back 16-bit values.
        g = roundTo(g / size, wire);
    }
    const std::int64_t bytes = wire == DType::F64 ? valueBytes : 2;
    return CompressionStats { n, n, n * bytes };
}

// How kConvergenceGapTolerance was chosen. tests/core/train/compression_test.cpp measures the gap
// on the NextTokenMlp task (3,664 parameters, dp=2, 600 steps of 16 × 32 tokens, AdamW with
// warm-up + cosine, same seed as the uncompressed run, loss 3.47 -> 1.59): bf16 casting ends at
// a gap of 0.0%, top-K at 1% with error feedback at 15.3%, top-K at 1% without error feedback
// at 57.4% and top-K at 0.1% without error feedback at 96.0% (it barely learns). 25% sits
// between the schemes that keep learning at the uncompressed pace and those that do not, with
// at least 1.6x margin on each side; so a compressed run "converges" when it achieves at least
// 75% of the uncompressed run's loss reduction (mean of the last tenth of the steps).
Result<ConvergenceVerdict> judgeConvergence(
    const std::vector<double>& baseline, const std::vector<double>& compressed, double tolerance)
{
    if (baseline.size() != compressed.size() || baseline.size() < 10) {
        return Error::badInput(fmt::format("convergence: needs two loss curves of the same "
                                           "length, at least 10 steps (got {} and {})",
            baseline.size(), compressed.size()));
    }
    const std::size_t tail = std::max<std::size_t>(1, baseline.size() / 10);
    auto tailMean = [&](const std::vector<double>& c) {
        double s = 0.0;
        for (std::size_t i = c.size() - tail; i < c.size(); ++i) {
            s += c[i];
        }
        return s / double(tail);
    };
    ConvergenceVerdict v;
    v.baselineFinal = tailMean(baseline);
    v.compressedFinal = tailMean(compressed);
    v.baselineDrop = baseline.front() - v.baselineFinal;
    v.tolerance = tolerance;
    if (!(v.baselineDrop > 0.0)) {
        return Error::checkFailed(fmt::format("convergence: the uncompressed run did not learn "
                                              "(first loss {:.4f}, final {:.4f})",
            baseline.front(), v.baselineFinal));
    }
    v.gap = (v.compressedFinal - v.baselineFinal) / v.baselineDrop;
    v.converges = std::isfinite(v.gap) && v.gap <= tolerance;
    v.message = fmt::format("final loss {:.4f} vs {:.4f} uncompressed: gap {:.1f}% of the "
                            "uncompressed drop {:.4f} ({} {:.0f}%): {}",
        v.compressedFinal, v.baselineFinal, 100.0 * v.gap, v.baselineDrop,
        v.converges ? "within" : "beyond", 100.0 * tolerance,
        v.converges ? "converges" : "does not converge");
    return v;
}

} // namespace day0::train
