#include "gpu_op_checks.h"

#include "day0_kernels.h"
#include "numerics/metrics.h"
#include "numerics/tensor.h"
#include "tap_logic.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

namespace day0::gpu {

using exec::BackendOp;
using exec::PrecisionMode;

void Report::check(const std::string& name, bool ok, const std::string& detail)
{
    fmt::print("{} {}: {}\n", ok ? "PASS" : "FAIL", name, detail);
    m_checks.push_back({ name, ok, detail });
}

void Report::figure(const std::string& name, const std::string& value)
{
    fmt::print("FIGURE {}: {}\n", name, value);
    m_figures.emplace_back(name, value);
}

int Report::summarize() const
{
    int failed = 0;
    for (const auto& c : m_checks) {
        failed += c.ok ? 0 : 1;
    }
    fmt::print("\n==== GPU checks: {} passed, {} failed ====\n", m_checks.size() - failed, failed);
    for (const auto& c : m_checks) {
        if (!c.ok) {
            fmt::print("  FAILED {}: {}\n", c.name, c.detail);
        }
    }
    for (const auto& [name, value] : m_figures) {
        fmt::print("  {}: {}\n", name, value);
    }
    return failed == 0 ? 0 : 1;
}

namespace {

std::vector<float> randomFloats(std::size_t n, std::uint32_t seed, float scale = 1.0f)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = d(rng);
    }
    return v;
}

double relL2(const std::vector<float>& ref, const std::vector<float>& got)
{
    double num = 0.0;
    double den = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = double(got[i]) - ref[i];
        num += d * d;
        den += double(ref[i]) * ref[i];
    }
    return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// The bound of a mode: fp32 differs by summation order only; the emulated formats by a few
/// ulps of rounding wherever the two sums straddle a rounding boundary.
double bound(PrecisionMode mode)
{
    switch (mode) {
    case PrecisionMode::F32:
        return 2e-5;
    case PrecisionMode::BF16:
        return 1e-2;
    case PrecisionMode::F16:
        return 2e-3;
    default:
        return 5e-2;
    }
}

struct Pair {
    exec::Backend& gpu;
    exec::Backend& cpu;
    Report& report;

    void compare(const std::string& name, PrecisionMode mode, const Result<void>& g,
        const Result<void>& c, const std::vector<float>& ref, const std::vector<float>& got)
    {
        // Each check's weights are fresh buffers that may reuse a freed one's address.
        gpu.releaseWeights();
        const std::string label = fmt::format("{} [{}]", name, exec::precisionName(mode));
        if (!g || !c) {
            report.check(label, false, !g ? g.error().message : c.error().message);
            return;
        }
        const double e = relL2(ref, got);
        report.check(
            label, e <= bound(mode), fmt::format("rel L2 {:.2e} (bound {:.0e})", e, bound(mode)));
    }
};

void checkLinear(Pair& p, PrecisionMode mode, std::int64_t rows, std::int64_t in, std::int64_t out)
{
    const auto x = randomFloats(std::size_t(rows * in), 1);
    auto w = randomFloats(std::size_t(out * in), 2, 1.0f / std::sqrt(float(in)));
    exec::roundGemmInput(w, out, in, mode, exec::Fp8Scaling::PerTensor, true);
    std::vector<float> ref(static_cast<std::size_t>(rows * out));
    std::vector<float> got(ref.size());
    const auto c = p.cpu.linear(
        x.data(), w.data(), ref.data(), rows, in, out, mode, exec::Fp8Scaling::PerTensor);
    const auto g = p.gpu.linear(
        x.data(), w.data(), got.data(), rows, in, out, mode, exec::Fp8Scaling::PerTensor);
    p.compare(fmt::format("linear [{}, {}]·[{}, {}]ᵀ", rows, in, out, in), mode, g, c, ref, got);
}

void checkNorm(Pair& p, PrecisionMode mode, bool residual)
{
    const std::int64_t rows = 33;
    const std::int64_t dim = 4096;
    auto x = randomFloats(std::size_t(rows * dim), 3);
    auto r = randomFloats(std::size_t(rows * dim), 4);
    auto w = randomFloats(std::size_t(dim), 5, 0.1f);
    for (auto& v : w) {
        v += 1.0f;
    }
    for (auto* b : { &x, &r, &w }) {
        exec::roundActivations(*b, mode);
    }
    std::vector<float> ref(x.size());
    std::vector<float> got(x.size());
    std::vector<float> refSum(x.size());
    std::vector<float> gotSum(x.size());
    const float* res = residual ? r.data() : nullptr;
    const auto c
        = p.cpu.rmsNorm(x.data(), res, w.data(), ref.data(), refSum.data(), rows, dim, 1e-6, mode);
    const auto g
        = p.gpu.rmsNorm(x.data(), res, w.data(), got.data(), gotSum.data(), rows, dim, 1e-6, mode);
    p.compare(residual ? "rms_norm + residual" : "rms_norm", mode, g, c, ref, got);
    if (residual && g && c) {
        p.report.check(fmt::format("residual sum [{}]", exec::precisionName(mode)),
            refSum == gotSum, "stored residual stream bit-identical to the CPU's");
    }
}

void checkRope(
    Pair& p, PrecisionMode mode, const std::string& type, exec::RopeLayout layout, bool multi)
{
    model::RopeScaling scaling;
    scaling.type = type;
    if (type == "llama3") {
        scaling.factor = 8.0;
        scaling.lowFreqFactor = 1.0;
        scaling.highFreqFactor = 4.0;
        scaling.originalMaxPositions = 8192;
    } else if (type == "yarn") {
        scaling.factor = 40.0;
        scaling.originalMaxPositions = 4096;
        scaling.mscale = 1.0;
        scaling.mscaleAllDim = 1.0;
    } else if (multi) {
        scaling.mropeSection = { 16, 24, 24 };
    }
    const std::int64_t dim = multi ? 128 : 64;
    auto table = exec::makeRope(dim, 10000.0, scaling, layout);
    if (!table) {
        p.report.check("rope " + type, false, table.error().message);
        return;
    }
    const std::int64_t tokens = 19;
    const std::int64_t heads = 4;
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
    std::vector<std::int64_t> positions3;
    for (std::int64_t t = 0; t < tokens; ++t) {
        positions[std::size_t(t)] = 9000 + t * 37;
    }
    if (multi) {
        for (int c = 0; c < 3; ++c) {
            for (std::int64_t t = 0; t < tokens; ++t) {
                positions3.push_back(c == 0 ? t : (t * (c + 2)) % 11);
            }
        }
    }
    auto x = randomFloats(std::size_t(tokens * heads * dim), 6);
    exec::roundActivations(x, mode);
    auto ref = x;
    auto got = x;
    const auto c = p.cpu.rope(ref.data(), tokens, heads, dim, positions, *table, positions3, mode);
    const auto g = p.gpu.rope(got.data(), tokens, heads, dim, positions, *table, positions3, mode);
    p.compare(fmt::format("rope {}{}", type,
                  layout == exec::RopeLayout::Interleaved ? " (interleaved)" : ""),
        mode, g, c, ref, got);
}

void checkAttention(Pair& p, PrecisionMode mode, const std::string& name, exec::AttentionShape s)
{
    const auto q = randomFloats(std::size_t(s.queries * s.heads * s.headDim), 7);
    const auto k = randomFloats(std::size_t(s.keys * s.kvHeads * s.headDim), 8);
    const auto v = randomFloats(std::size_t(s.keys * s.kvHeads * s.valueDim), 9);
    std::vector<float> qr = q;
    std::vector<float> kr = k;
    std::vector<float> vr = v;
    for (auto* b : { &qr, &kr, &vr }) {
        exec::roundActivations(*b, mode);
    }
    std::vector<float> ref(static_cast<std::size_t>(s.queries * s.heads * s.valueDim));
    std::vector<float> got(ref.size());
    const auto c = p.cpu.attention(qr.data(), kr.data(), vr.data(), ref.data(), s, mode);
    const auto g = p.gpu.attention(qr.data(), kr.data(), vr.data(), got.data(), s, mode);
    p.compare(name, mode, g, c, ref, got);
}

exec::AttentionShape shape(std::int64_t queries, std::int64_t keys, std::int64_t heads,
    std::int64_t kvHeads, std::int64_t headDim, std::int64_t valueDim, std::int64_t window = 0)
{
    exec::AttentionShape s;
    s.queries = queries;
    s.keys = keys;
    s.heads = heads;
    s.kvHeads = kvHeads;
    s.headDim = headDim;
    s.valueDim = valueDim;
    s.scale = 1.0 / std::sqrt(double(headDim));
    s.window = window;
    return s;
}

void checkRouting(Pair& p, const std::string& name, exec::RouterConfig config, bool withBias)
{
    const std::int64_t tokens = 64;
    const auto logits = randomFloats(std::size_t(tokens * config.numExperts), 10);
    const auto bias = randomFloats(std::size_t(config.numExperts), 11, 0.01f);
    const float* b = withBias ? bias.data() : nullptr;
    const auto c = p.cpu.route(logits.data(), tokens, config, b);
    const auto g = p.gpu.route(logits.data(), tokens, config, b);
    if (!c || !g) {
        p.report.check(name, false, !g ? g.error().message : c.error().message);
        return;
    }
    double worst = 0.0;
    for (std::size_t i = 0; i < c->weights.size(); ++i) {
        worst = std::max(worst, std::fabs(c->weights[i] - g->weights[i]));
    }
    p.report.check(name, c->experts == g->experts && worst < 1e-9,
        fmt::format("same experts: {}, largest weight difference {:.1e}",
            c->experts == g->experts ? "yes" : "no", worst));
    if (c->experts == g->experts) {
        const std::int64_t dim = 96;
        const auto x = randomFloats(std::size_t(tokens * dim), 12);
        std::vector<float> pc(static_cast<std::size_t>(tokens * c->k * dim));
        std::vector<float> pg(pc.size());
        std::vector<std::int64_t> oc, og, sc, sg;
        const auto rc
            = p.cpu.permuteTokens(x.data(), tokens, dim, *c, config.numExperts, pc.data(), oc, sc);
        const auto rg
            = p.gpu.permuteTokens(x.data(), tokens, dim, *g, config.numExperts, pg.data(), og, sg);
        p.report.check(name + ": token permutation", rc && rg && oc == og && sc == sg && pc == pg,
            rg ? "offsets, source rows and permuted rows identical" : rg.error().message);
    }
}

} // namespace

void runOpChecks(exec::Backend& gpu, Report& report)
{
    auto cpu = exec::makeCpuBackend();
    Pair p { gpu, *cpu, report };
    for (const auto mode : { PrecisionMode::F32, PrecisionMode::BF16 }) {
        std::vector<std::int64_t> ids = { 0, 5, 4095, 17, 17, 1234 };
        const auto table = randomFloats(4096 * 256, 13);
        std::vector<float> ref(ids.size() * 256);
        std::vector<float> got(ref.size());
        auto rounded = table;
        exec::roundActivations(rounded, mode);
        p.compare("embedding", mode,
            gpu.embedding(ids, rounded.data(), 4096, 256, got.data(), mode),
            cpu->embedding(ids, rounded.data(), 4096, 256, ref.data(), mode), ref, got);
        checkNorm(p, mode, false);
        checkNorm(p, mode, true);
        checkLinear(p, mode, 16, 4096, 1024);
        checkLinear(p, mode, 5, 300, 77); // unaligned shapes
        checkRope(p, mode, "default", exec::RopeLayout::RotateHalf, false);
        checkRope(p, mode, "llama3", exec::RopeLayout::RotateHalf, false);
        checkRope(p, mode, "yarn", exec::RopeLayout::Interleaved, false);
        checkRope(p, mode, "mrope", exec::RopeLayout::RotateHalf, true);
        checkAttention(p, mode, "attention prefill (GQA 8/2)", shape(64, 64, 8, 2, 128, 128));
        checkAttention(
            p, mode, "attention decode (GQA 32/8, 300 keys)", shape(1, 300, 32, 8, 128, 128));
        checkAttention(
            p, mode, "attention chunked prefill (17 new of 100)", shape(17, 100, 4, 4, 64, 64));
        checkAttention(p, mode, "attention MLA widths (192/128)", shape(40, 40, 16, 16, 192, 128));
        checkAttention(p, mode, "attention sliding window 16", shape(48, 48, 4, 1, 64, 64, 16));
        auto gate = randomFloats(70000, 14);
        const auto up = randomFloats(70000, 15);
        exec::roundActivations(gate, mode);
        auto refGate = gate;
        p.compare("gated activation (silu)", mode,
            gpu.gatedActivation(gate.data(), up.data(), 70000, exec::Activation::Silu, mode),
            cpu->gatedActivation(refGate.data(), up.data(), 70000, exec::Activation::Silu, mode),
            refGate, gate);
    }
    checkLinear(p, PrecisionMode::F8E4M3, 16, 4096, 1024);
    checkLinear(p, PrecisionMode::F8E5M2, 16, 4096, 1024);
    checkLinear(p, PrecisionMode::Int8, 16, 4096, 1024);

    exec::RouterConfig softmax;
    softmax.numExperts = 8;
    softmax.topK = 2;
    softmax.normTopkProb = true;
    checkRouting(p, "router softmax top-2 of 8", softmax, false);
    exec::RouterConfig sigmoid;
    sigmoid.scoring = model::RouterScoring::Sigmoid;
    sigmoid.numExperts = 256;
    sigmoid.topK = 8;
    sigmoid.numGroups = 8;
    sigmoid.topkGroup = 4;
    sigmoid.normTopkProb = true;
    sigmoid.routedScalingFactor = 2.5;
    checkRouting(p, "router sigmoid + bias, group-limited top-8 of 256", sigmoid, true);

    std::vector<std::uint8_t> bytes(300 * 260);
    std::mt19937 rng(16);
    for (auto& b : bytes) {
        b = std::uint8_t(rng() & 0xFF);
        if ((b & 0x7F) == 0x7F) {
            b = 0x38; // no NaN encodings: NaN never equals NaN
        }
    }
    const auto scales = randomFloats(3 * 3, 17);
    std::vector<float> ref(bytes.size());
    std::vector<float> got(bytes.size());
    const auto c = cpu->dequantFp8Block(bytes.data(), scales.data(), 300, 260, 128, ref.data());
    const auto g = gpu.dequantFp8Block(bytes.data(), scales.data(), 300, 260, 128, got.data());
    report.check("fp8 block dequantisation (300×260, 128×128 blocks)", c && g && ref == got,
        g ? "bit-identical" : g.error().message);
}

void runTapCheck(Report& report)
{
    auto host = randomFloats(1 << 20, 18, 3.0f);
    host[5] = std::numeric_limits<float>::quiet_NaN();
    host[7] = std::numeric_limits<float>::infinity();
    float* device = nullptr;
    kernels::TapPartial* partials = nullptr;
    if (cudaMalloc(&device, host.size() * sizeof(float)) != cudaSuccess
        || cudaMalloc(&partials, sizeof(kernels::TapPartial) * kernels::kTapBlocks)
            != cudaSuccess) {
        report.check("tap statistics", false, "cudaMalloc failed");
        return;
    }
    cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    const cudaError_t launched = kernels::tapStatistics(
        device, kernels::Store::F32, std::int64_t(host.size()), partials, nullptr);
    std::vector<kernels::TapPartial> blocks(kernels::kTapBlocks);
    cudaMemcpy(blocks.data(), partials, blocks.size() * sizeof(kernels::TapPartial),
        cudaMemcpyDeviceToHost);
    cudaFree(device);
    cudaFree(partials);
    std::vector<cuda::TapBlock> plain;
    for (const auto& b : blocks) {
        plain.push_back({ b.sum, b.sumSquares, b.min, b.max, b.finite, b.nan, b.inf });
    }
    const auto got = cuda::combineTapBlocks(plain, std::int64_t(host.size()));
    const auto expect
        = numerics::computeStats(numerics::Tensor::fromFloats({ std::int64_t(host.size()) }, host));
    const bool ok = launched == cudaSuccess && got.nanCount == 1 && got.infCount == 1
        && got.min == expect.min && got.max == expect.max
        && std::fabs(got.mean - expect.mean) <= 1e-9 * std::max(1.0, std::fabs(expect.mean))
        && std::fabs(got.rms - expect.rms) <= 1e-9 * expect.rms;
    report.check("tap statistics on the device", ok,
        fmt::format(
            "min {} max {} mean {:.6g} rms {:.6g} nan {} inf {} (host: {} {} {:.6g} {:.6g})",
            got.min, got.max, got.mean, got.rms, got.nanCount, got.infCount, expect.min, expect.max,
            expect.mean, expect.rms));
}

void runCuptiCheck(const extend::PluginRegistry& registry, exec::Backend& gpu, Report& report)
{
    auto profiler = extend::createProfiler(registry, "cupti");
    if (!profiler) {
        report.check("cupti timeline", false, profiler.error().message);
        return;
    }
    if (auto started = (*profiler)->start(); !started) {
        report.check("cupti timeline", false, started.error().message);
        return;
    }
    const auto x = randomFloats(64 * 1024, 19);
    const auto w = randomFloats(1024, 20);
    std::vector<float> y(x.size());
    (void)gpu.rmsNorm(
        x.data(), nullptr, w.data(), y.data(), nullptr, 64, 1024, 1e-6, PrecisionMode::BF16);
    const auto wl = randomFloats(512 * 1024, 21);
    std::vector<float> yl(64 * 512);
    (void)gpu.linear(x.data(), wl.data(), yl.data(), 64, 1024, 512, PrecisionMode::BF16,
        exec::Fp8Scaling::PerTensor);
    const auto s = shape(64, 64, 8, 8, 128, 128);
    std::vector<float> out(64 * 8 * 128);
    (void)gpu.attention(x.data(), x.data(), x.data(), out.data(), s, PrecisionMode::BF16);
    gpu.releaseWeights();
    Progress progress;
    auto trace = (*profiler)->stop(progress, {});
    if (!trace) {
        report.check("cupti timeline", false, trace.error().message);
        return;
    }
    bool norm = false;
    bool attention = false;
    int kernels = 0;
    int copies = 0;
    std::string gemmName;
    for (profile::SliceIndex i = 0; i < trace->sliceCount(); ++i) {
        const auto name = trace->sliceNameText(i);
        if (trace->sliceCategory(i) == profile::Category::Kernel) {
            ++kernels;
            norm = norm || name.find("rmsNorm") != std::string_view::npos;
            attention = attention || name.find("attentionKernel") != std::string_view::npos;
            if (name.find("gemm") != std::string_view::npos
                || name.find("nvjet") != std::string_view::npos
                || name.find("cutlass") != std::string_view::npos) {
                gemmName = std::string(name.substr(0, 60));
            }
        }
        copies += trace->sliceCategory(i) == profile::Category::Memcpy ? 1 : 0;
    }
    report.check("cupti timeline",
        norm && attention && !gemmName.empty() && copies > 0 && trace->flowCount() > 0,
        fmt::format("{} kernels (rmsNorm: {}, attention: {}, GEMM: {}), {} copies, {} launch "
                    "flows, {} slices",
            kernels, norm ? "yes" : "no", attention ? "yes" : "no",
            gemmName.empty() ? "none" : gemmName, copies, trace->flowCount(), trace->sliceCount()));
}

} // namespace day0::gpu
