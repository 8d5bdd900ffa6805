#include "exec/op_check_checker.h"

#include "exec/attention.h"
#include "exec/dsa_indexer.h"
#include "exec/emulated_ops.h"
#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/msa.h"
#include "exec/router.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace day0::exec::detail {

using numerics::OpKind;
using numerics::Tensor;

std::vector<double> OpChecker::random(std::int64_t n, double scale, double offset)
{
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) {
        x = offset + scale * normal(m_rng);
    }
    return v;
}

std::vector<float> OpChecker::toFloat(const std::vector<double>& v)
{
    return { v.begin(), v.end() };
}

OpCheckRow& OpChecker::add(std::string op, std::string shape, OpKind kind, PrecisionMode mode,
    std::string implementation, const std::vector<double>& reference,
    const std::vector<float>& target)
{
    OpCheckRow row;
    row.op = std::move(op);
    row.shape = std::move(shape);
    row.kind = kind;
    row.mode = mode;
    row.implementation = std::move(implementation);
    const auto n = std::int64_t(reference.size());
    row.metrics = *numerics::compareTensors(
        Tensor::fromDoubles({ n }, reference), Tensor::fromFloats({ n }, target));
    numerics::JudgeInput in;
    in.relL2 = row.metrics.relL2;
    in.accumulated = false;
    in.nonFiniteMismatch = row.metrics.nonFiniteMismatch;
    row.verdict = numerics::judge(*m_options.table, precisionDType(mode), kind, in);
    m_rows.push_back(std::move(row));
    return m_rows.back();
}

bool OpChecker::onBackend(BackendOp op) const
{
    return m_options.backend != nullptr && m_options.backend->supports(op);
}

std::string OpChecker::implementation(BackendOp op, const std::string& cpu) const
{
    if (m_options.backend == nullptr) {
        return cpu;
    }
    return onBackend(op) ? m_options.backend->implementation(op) : "fallback: day0-cpu";
}

void OpChecker::keep(Result<void> status)
{
    // Every check's weights are fresh buffers that may reuse a freed one's address.
    if (m_options.backend != nullptr) {
        m_options.backend->releaseWeights();
    }
    if (!status && m_status) {
        m_status = std::move(status);
    }
}

void OpChecker::embedding()
{
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t vocab = std::min(m_spec.vocabSize, m_options.maxOutputs);
    const auto table = random(vocab * h);
    std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(m_options.tokens));
    for (auto& id : ids) {
        id = pick(m_rng);
    }
    std::vector<double> ref(ids.size() * std::size_t(h));
    (void)exec::embedding<double>(ids, table.data(), vocab, h, ref.data());
    auto tableF = toFloat(table);
    roundActivations(tableF, mode(OpKind::Embedding));
    std::vector<float> tgt(ref.size());
    if (onBackend(BackendOp::Embedding)) {
        keep(m_options.backend->embedding(
            ids, tableF.data(), vocab, h, tgt.data(), mode(OpKind::Embedding)));
    } else {
        (void)exec::embedding<float>(ids, tableF.data(), vocab, h, tgt.data());
    }
    add("embedding", fmt::format("{} ids of [{}, {}]", ids.size(), m_spec.vocabSize, h),
        OpKind::Embedding, mode(OpKind::Embedding), implementation(BackendOp::Embedding, "native"),
        ref, tgt);
}

void OpChecker::rmsNormOp(
    const std::string& name, std::int64_t rows, std::int64_t dim, const std::string& implementation)
{
    const auto x = random(rows * dim);
    const auto w = random(dim, 0.1, 1.0);
    std::vector<double> ref(x.size());
    rmsNorm<double>(x.data(), w.data(), ref.data(), rows, dim, m_spec.normEps);
    const auto xf = toFloat(x);
    const auto wf = toFloat(w);
    std::vector<float> tgt(x.size());
    if (onBackend(BackendOp::RmsNorm)) {
        keep(m_options.backend->rmsNorm(xf.data(), nullptr, wf.data(), tgt.data(), nullptr, rows,
            dim, m_spec.normEps, mode(OpKind::Norm)));
    } else {
        emulatedRmsNorm(
            xf.data(), wf.data(), tgt.data(), rows, dim, m_spec.normEps, mode(OpKind::Norm));
    }
    add(name, fmt::format("[{}, {}]", rows, dim), OpKind::Norm, mode(OpKind::Norm),
        this->implementation(BackendOp::RmsNorm, implementation), ref, tgt);
}

void OpChecker::rmsNormResidualOp(std::int64_t rows, std::int64_t dim)
{
    const auto x = random(rows * dim);
    const auto res = random(rows * dim);
    const auto w = random(dim, 0.1, 1.0);
    std::vector<double> sum = x;
    addInPlace<double>(sum.data(), res.data(), rows * dim);
    std::vector<double> ref(x.size());
    rmsNorm<double>(sum.data(), w.data(), ref.data(), rows, dim, m_spec.normEps);
    auto xf = toFloat(x);
    auto rf = toFloat(res);
    roundActivations(xf, mode(OpKind::Norm));
    roundActivations(rf, mode(OpKind::Norm));
    const auto wf = toFloat(w);
    std::vector<float> tgt(x.size());
    std::vector<float> resOut(x.size());
    Backend* b = onBackend(BackendOp::RmsNormResidual) ? m_options.backend : m_cpu.get();
    keep(b->rmsNorm(xf.data(), rf.data(), wf.data(), tgt.data(), resOut.data(), rows, dim,
        m_spec.normEps, mode(OpKind::Norm)));
    add("rms_norm + residual add", fmt::format("[{}, {}]", rows, dim), OpKind::Norm,
        mode(OpKind::Norm), implementation(BackendOp::RmsNormResidual, "native"), ref, tgt);
}

void OpChecker::linearOp(const std::string& name, std::int64_t in, std::int64_t out, OpKind kind)
{
    const std::int64_t t = m_options.tokens;
    const std::int64_t outs = std::min(out, m_options.maxOutputs);
    const auto x = random(t * in);
    const auto w = random(outs * in, 1.0 / std::sqrt(double(in)));
    std::vector<double> ref(static_cast<std::size_t>(t * outs));
    linear<double>(x.data(), w.data(), nullptr, ref.data(), t, in, outs);
    const PrecisionMode m = mode(kind);
    auto wf = toFloat(w);
    roundGemmInput(wf, outs, in, m, m_options.target.fp8Scaling, true);
    const auto xf = toFloat(x);
    std::vector<float> tgt(ref.size());
    if (onBackend(BackendOp::Linear)) {
        keep(m_options.backend->linear(
            xf.data(), wf.data(), tgt.data(), t, in, outs, m, m_options.target.fp8Scaling));
    } else {
        emulatedLinear(
            xf.data(), wf.data(), nullptr, tgt.data(), t, in, outs, m, m_options.target.fp8Scaling);
    }
    const std::string capped = outs < out ? fmt::format(" ({} of {} outputs)", outs, out) : "";
    add("linear " + name, fmt::format("[{}, {}] · [{}, {}]ᵀ{}", t, in, out, in, capped), kind, m,
        implementation(BackendOp::Linear, "native (OpenBLAS GEMM)"), ref, tgt);
}

void OpChecker::rope(
    const Rope& table, std::int64_t heads, std::int64_t dim, std::string label, bool multi)
{
    const std::int64_t t = m_options.tokens;
    // Late positions exercise the scaled (low) frequencies of llama3/YaRN.
    const std::int64_t first
        = std::max<std::int64_t>(0, std::min<std::int64_t>(m_spec.maxPositions, 8192) - t);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(t));
    for (std::int64_t i = 0; i < t; ++i) {
        positions[std::size_t(i)] = first + i;
    }
    auto ref = random(t * heads * dim);
    auto tgt = toFloat(ref);
    roundActivations(tgt, mode(OpKind::Attention));
    // M-RoPE / 2-D rotary: distinct (t, h, w) components, as image tokens have.
    std::vector<std::int64_t> positions3;
    if (multi) {
        for (int c = 0; c < 3; ++c) {
            for (std::int64_t i = 0; i < t; ++i) {
                positions3.push_back(c == 0 ? first + i : first + (c == 1 ? i / 4 : i % 4));
            }
        }
    }
    applyRope<double>(ref.data(), t, heads, dim, positions, table, positions3);
    if (onBackend(BackendOp::Rope)) {
        keep(m_options.backend->rope(
            tgt.data(), t, heads, dim, positions, table, positions3, mode(OpKind::Attention)));
    } else {
        applyRope<float>(tgt.data(), t, heads, dim, positions, table, positions3);
    }
    roundActivations(tgt, mode(OpKind::Attention));
    if (label.empty()) {
        label = fmt::format("rope ({}, {})", m_spec.ropeScaling.type,
            table.layout == RopeLayout::Interleaved ? "interleaved pairs" : "rotate-half");
    }
    add(label, fmt::format("[{}, {}, {}] at positions {}..{}", t, heads, dim, first, first + t - 1),
        OpKind::Attention, mode(OpKind::Attention), implementation(BackendOp::Rope, "native"), ref,
        tgt);
}

std::vector<std::int64_t> OpChecker::dsaIndexerOp(
    std::int64_t heads, std::int64_t dim, std::int64_t topK)
{
    const std::int64_t t = m_options.tokens;
    const auto q = random(t * heads * dim);
    const auto k = random(t * dim);
    const auto w = random(t * heads, 1.0 / std::sqrt(double(heads * dim)));
    const IndexerShape shape { t, t, heads, dim };
    std::vector<double> ref(std::size_t(t * t));
    indexerScores<double>(q.data(), k.data(), w.data(), ref.data(), shape);
    const PrecisionMode m = mode(OpKind::Attention);
    auto qf = toFloat(q);
    auto kf = toFloat(k);
    auto wf = toFloat(w);
    for (auto* buf : { &qf, &kf, &wf }) {
        roundActivations(*buf, m);
    }
    std::vector<float> tgt(ref.size());
    indexerScores<float>(qf.data(), kf.data(), wf.data(), tgt.data(), shape);
    const auto refSel = selectTopKeys<double>(ref.data(), t, t, topK);
    const auto tgtSel = selectTopKeys<float>(tgt.data(), t, t, topK);
    std::int64_t moved = 0;
    for (std::int64_t i = 0; i < t; ++i) {
        moved += std::equal(refSel.begin() + i * topK, refSel.begin() + (i + 1) * topK,
                     tgtSel.begin() + i * topK)
            ? 0
            : 1;
    }
    add(fmt::format("dsa indexer scores (relu, weighted heads; top-{} selection)", topK),
        fmt::format("q [{}, {}, {}], k [{}, {}]; {} of {} queries select other keys", t, heads, dim,
            t, dim, moved, t),
        OpKind::Attention, m, "day0-cpu (not on backends)", ref, tgt);
    return refSel;
}

std::vector<std::int64_t> OpChecker::msaSelectionOp(
    std::int64_t heads, std::int64_t dim, std::int64_t blockSize, std::int64_t topK)
{
    const std::int64_t t = m_options.tokens;
    const auto q = random(t * heads * dim);
    const auto k = random(t * dim);
    BlockSelectionShape shape;
    shape.queries = t;
    shape.keys = t;
    shape.heads = heads;
    shape.dim = dim;
    shape.blockSize = blockSize;
    shape.topK = topK;
    const auto refSel = selectKeyBlocks<double>(q.data(), k.data(), shape);
    const PrecisionMode m = mode(OpKind::Attention);
    auto qf = toFloat(q);
    auto kf = toFloat(k);
    roundActivations(qf, m);
    roundActivations(kf, m);
    const auto tgtSel = selectKeyBlocks<float>(qf.data(), kf.data(), shape);
    // The block scores are compared (a block after the query counts 0 on both sides); the
    // selections they move are counted.
    auto ref = keyBlockScores<double>(q.data(), k.data(), shape);
    const auto target = keyBlockScores<float>(qf.data(), kf.data(), shape);
    std::vector<float> tgt(target.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const bool seen = std::isfinite(ref[i]);
        tgt[i] = seen ? float(target[i]) : 0.0f;
        ref[i] = seen ? ref[i] : 0.0;
    }
    std::int64_t moved = 0;
    for (std::int64_t r = 0; r < t * heads; ++r) {
        moved += std::equal(refSel.begin() + r * topK, refSel.begin() + (r + 1) * topK,
                     tgtSel.begin() + r * topK)
            ? 0
            : 1;
    }
    add(fmt::format("msa block scores (max per block of {}; own block + top-{} selection)",
            blockSize, topK),
        fmt::format("index q [{}, {}, {}], k [{}, {}]; {} of {} (query, head) rows select other "
                    "blocks",
            t, heads, dim, t, dim, moved, t * heads),
        OpKind::Attention, m, "day0-cpu (not on backends)", ref, tgt);
    return keysOfBlocks(refSel, shape, 0);
}

void OpChecker::attentionOp(std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
    std::int64_t valueDim, double scale, const std::string& name, const std::string& implementation,
    bool causal, std::int64_t chunk, std::int64_t window, bool sinks,
    std::span<const std::int64_t> selected)
{
    const std::int64_t t = m_options.tokens;
    const auto q = random(t * heads * headDim);
    const auto k = random(t * kvHeads * headDim);
    const auto v = random(t * kvHeads * valueDim);
    // Sink logits of the scores' size, so that they take a real share of each softmax.
    const auto sinkLogits = toFloat(random(sinks ? heads : 0, 2.0));
    AttentionShape s;
    s.window = window;
    s.sinks = sinkLogits;
    s.queries = t;
    s.keys = t;
    s.heads = heads;
    s.kvHeads = kvHeads;
    s.headDim = headDim;
    s.valueDim = valueDim;
    s.scale = scale;
    s.causal = causal;
    s.chunk = chunk;
    s.selectedKeys = selected;
    s.selectedPerQuery = selected.empty() ? 0 : std::int64_t(selected.size()) / t;
    std::vector<double> ref(static_cast<std::size_t>(t * heads * valueDim));
    attention<double>(q.data(), k.data(), v.data(), ref.data(), s);
    const PrecisionMode m = mode(OpKind::Attention);
    auto qf = toFloat(q);
    auto kf = toFloat(k);
    auto vf = toFloat(v);
    for (auto* buf : { &qf, &kf, &vf }) {
        roundActivations(*buf, m);
    }
    std::vector<float> tgt(ref.size());
    const BackendOp op
        = headDim != valueDim ? BackendOp::AttentionMla : BackendOp::AttentionPrefill;
    std::string used = this->implementation(op, implementation);
    bool done = false;
    if (onBackend(op)) {
        // A backend may decline a variant of the op (chunks, sinks): the CPU computes it,
        // and the row says why.
        auto r = m_options.backend->attention(qf.data(), kf.data(), vf.data(), tgt.data(), s, m);
        if (!r && r.error().code == ErrorCode::Unsupported) {
            used = fmt::format("fallback: day0-cpu ({})", r.error().message);
            keep(success());
        } else {
            keep(std::move(r));
            done = true;
        }
    }
    if (!done) {
        AttentionRounding<float> rounding;
        if (isEmulated(m)) {
            rounding = [m](float* p, std::int64_t count) {
                roundActivations({ p, std::size_t(count) }, m);
            };
        }
        attention<float>(qf.data(), kf.data(), vf.data(), tgt.data(), s, rounding, rounding);
    }
    roundActivations(tgt, m);
    add(name,
        fmt::format(
            "q [{}, {}, {}], kv [{}, {}, {}|{}]", t, heads, headDim, t, kvHeads, headDim, valueDim),
        OpKind::Attention, m, used, ref, tgt);
}

void OpChecker::unitNormOp(std::int64_t heads, std::int64_t dim, const std::string& name)
{
    const std::int64_t rows = m_options.tokens * heads;
    std::vector<double> ref = random(rows * dim);
    auto tgt = toFloat(ref);
    const PrecisionMode m = mode(OpKind::Attention);
    roundActivations(tgt, m);
    unitRmsNorm<double>(ref.data(), rows, dim, m_spec.normEps);
    unitRmsNorm<float>(tgt.data(), rows, dim, m_spec.normEps);
    roundActivations(tgt, m);
    add(name, fmt::format("[{}, {}, {}]", m_options.tokens, heads, dim), OpKind::Attention, m,
        "native", ref, tgt);
}

void OpChecker::softCapOp(std::int64_t vocab, double cap)
{
    const std::int64_t n = m_options.tokens * vocab;
    std::vector<double> ref = random(n, 2.0 * cap);
    auto tgt = toFloat(ref);
    const PrecisionMode m = mode(OpKind::Logits);
    roundActivations(tgt, m);
    for (std::int64_t i = 0; i < n; ++i) {
        ref[std::size_t(i)] = std::tanh(ref[std::size_t(i)] / cap) * cap;
        tgt[std::size_t(i)] = float(std::tanh(double(tgt[std::size_t(i)]) / cap) * cap);
    }
    roundActivations(tgt, m);
    add(fmt::format("final logit soft-capping (cap {})", cap),
        fmt::format("[{}, {}]", m_options.tokens, vocab), OpKind::Logits, m,
        "native (tanh on the host)", ref, tgt);
}

void OpChecker::temperatureOp(std::int64_t heads, std::int64_t dim)
{
    const std::int64_t t = m_options.tokens;
    const auto floorScale = std::int64_t(m_spec.attnFloorScale);
    const std::int64_t first = std::max<std::int64_t>(0, floorScale - 1 - t / 2);
    const std::int64_t width = heads * dim;
    std::vector<double> ref = random(t * width);
    auto tgt = toFloat(ref);
    const PrecisionMode m = mode(OpKind::Attention);
    roundActivations(tgt, m);
    for (std::int64_t i = 0; i < t; ++i) {
        const double s
            = attentionTemperature(first + i, m_spec.attnFloorScale, m_spec.attnTemperatureScale);
        for (std::int64_t c = 0; c < width; ++c) {
            ref[std::size_t(i * width + c)] *= s;
            tgt[std::size_t(i * width + c)] *= float(s);
        }
    }
    roundActivations(tgt, m);
    add("attention temperature (NoPE layers)",
        fmt::format("[{}, {}, {}] at positions {}..{}", t, heads, dim, first, first + t - 1),
        OpKind::Attention, m, "native", ref, tgt);
}

void OpChecker::gatedActivation(std::int64_t inter, Activation act, std::string name)
{
    const std::int64_t n = m_options.tokens * inter;
    const auto g = random(n);
    const auto u = random(n);
    std::vector<double> ref = g;
    gatedActivate<double>(ref.data(), u.data(), n, act);
    auto gf = toFloat(g);
    auto uf = toFloat(u);
    roundActivations(gf, mode(OpKind::Mlp));
    roundActivations(uf, mode(OpKind::Mlp));
    if (onBackend(BackendOp::GatedActivation)) {
        keep(m_options.backend->gatedActivation(gf.data(), uf.data(), n, act, mode(OpKind::Mlp)));
    } else {
        emulatedGatedActivation(gf.data(), uf.data(), n, act, mode(OpKind::Mlp));
    }
    add(name.empty() ? fmt::format("gated activation ({})", m_spec.hiddenAct) : name,
        fmt::format("[{}, {}]", m_options.tokens, inter), OpKind::Mlp, mode(OpKind::Mlp),
        implementation(BackendOp::GatedActivation, "native"), ref, gf);
}

void OpChecker::clampedSwiglu(std::int64_t inter, double limit)
{
    const std::int64_t n = m_options.tokens * inter;
    const auto g = random(n, 2.0 * limit);
    const auto u = random(n, 2.0 * limit);
    std::vector<double> ref(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
        const double gate = std::min(g[std::size_t(j)], limit);
        const double up = std::clamp(u[std::size_t(j)], -limit, limit);
        ref[std::size_t(j)] = (up + 1.0) * gate / (1.0 + std::exp(-1.702 * gate));
    }
    const PrecisionMode m = mode(OpKind::Mlp);
    auto gf = toFloat(g);
    auto uf = toFloat(u);
    roundActivations(gf, m);
    roundActivations(uf, m);
    const auto lim = float(limit);
    for (std::int64_t j = 0; j < n; ++j) {
        gf[std::size_t(j)] = std::min(gf[std::size_t(j)], lim);
        uf[std::size_t(j)] = std::clamp(uf[std::size_t(j)], -lim, lim) + 1.0f;
    }
    roundActivations(uf, m);
    std::string used = implementation(BackendOp::GatedActivation, "native");
    if (onBackend(BackendOp::GatedActivation)) {
        keep(m_options.backend->gatedActivation(gf.data(), uf.data(), n, Activation::QuickGelu, m));
        used = "clamps and +1 on the host; " + used;
    } else {
        emulatedGatedActivation(gf.data(), uf.data(), n, Activation::QuickGelu, m);
    }
    add(fmt::format("clamped SwiGLU (swiglu_oai, limit {})", limit),
        fmt::format("[{}, {}]", m_options.tokens, inter), OpKind::Mlp, m, used, ref, gf);
}

void OpChecker::layerNormOp(
    const std::string& name, std::int64_t rows, std::int64_t dim, double eps)
{
    const auto x = random(rows * dim);
    const auto w = random(dim, 0.1, 1.0);
    const auto b = random(dim, 0.1);
    std::vector<double> ref(x.size());
    layerNorm<double>(x.data(), w.data(), b.data(), ref.data(), rows, dim, eps);
    const PrecisionMode m = mode(OpKind::Norm);
    auto xf = toFloat(x);
    auto wf = toFloat(w);
    auto bf = toFloat(b);
    for (auto* buf : { &xf, &wf, &bf }) {
        roundActivations(*buf, m);
    }
    std::vector<float> tgt(x.size());
    layerNorm<float>(xf.data(), wf.data(), bf.data(), tgt.data(), rows, dim, eps);
    roundActivations(tgt, m);
    add(name, fmt::format("[{}, {}]", rows, dim), OpKind::Norm, m, "native", ref, tgt);
}

void OpChecker::activationOp(std::int64_t width, Activation act, const std::string& name)
{
    const std::int64_t n = m_options.tokens * width;
    std::vector<double> ref = random(n);
    auto tgt = toFloat(ref);
    const PrecisionMode m = mode(OpKind::Mlp);
    roundActivations(tgt, m);
    activate<double>(ref.data(), n, act);
    activate<float>(tgt.data(), n, act);
    roundActivations(tgt, m);
    add(name, fmt::format("[{}, {}]", m_options.tokens, width), OpKind::Mlp, m, "native", ref, tgt);
}

void OpChecker::router(const std::string& name)
{
    const auto& moe = *m_spec.moe;
    const std::int64_t t = m_options.tokens;
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t e = moe.numExperts;
    const auto x = random(t * h);
    const auto w = random(e * h, 1.0 / std::sqrt(double(h)));
    std::vector<double> bias;
    if (moe.expertScoreBias) {
        bias = random(e, 0.01);
    }
    RouterConfig config = routerConfig(moe);
    if (m_spec.family == model::Family::Mixtral) {
        config.normTopkProb = true;
    }
    std::vector<double> logits(static_cast<std::size_t>(t * e));
    linear<double>(x.data(), w.data(), nullptr, logits.data(), t, h, e);
    const Routing ref = route(logits.data(), t, config, bias.empty() ? nullptr : bias.data());
    PrecisionMode m = mode(OpKind::Router);
    // Llama-4's router is a plain linear in the model's dtype (Llama4Router).
    const bool sigmoid
        = moe.scoring == model::RouterScoring::Sigmoid && m_spec.family != model::Family::Llama4;
    if (sigmoid && !m_options.target.perOpKind.contains(OpKind::Router)
        && !m_options.target.perLayer.contains(0)) {
        m = PrecisionMode::F32; // as the engine: DeepSeek routers run in fp32
    }
    auto wf = toFloat(w);
    roundGemmInput(wf, e, h, m, m_options.target.fp8Scaling, true);
    const auto xf = toFloat(x);
    std::vector<float> lf(logits.size());
    if (onBackend(BackendOp::Linear)) {
        keep(m_options.backend->linear(
            xf.data(), wf.data(), lf.data(), t, h, e, m, m_options.target.fp8Scaling));
    } else {
        emulatedLinear(
            xf.data(), wf.data(), nullptr, lf.data(), t, h, e, m, m_options.target.fp8Scaling);
    }
    const BackendOp routeOp = sigmoid ? BackendOp::RouterSigmoid : BackendOp::RouterSoftmax;
    Routing tgt;
    if (onBackend(routeOp)) {
        const std::vector<float> biasF(bias.begin(), bias.end());
        auto r = m_options.backend->route(
            lf.data(), t, config, biasF.empty() ? nullptr : biasF.data());
        if (!r) {
            keep(r.error());
            return;
        }
        tgt = std::move(*r);
    } else {
        const std::vector<double> ld(lf.begin(), lf.end());
        tgt = route(ld.data(), t, config, bias.empty() ? nullptr : bias.data());
    }
    // Dense [tokens, experts] combine weights: a flipped expert shows as a large local error.
    std::vector<double> dr(static_cast<std::size_t>(t * e), 0.0);
    std::vector<float> dt(dr.size(), 0.0f);
    std::int64_t same = 0;
    for (std::int64_t i = 0; i < t; ++i) {
        std::set<std::int64_t> a;
        std::set<std::int64_t> b;
        for (std::int64_t j = 0; j < ref.k; ++j) {
            const auto s = std::size_t(i * ref.k + j);
            dr[std::size_t(i * e + ref.experts[s])] = ref.weights[s];
            dt[std::size_t(i * e + tgt.experts[s])] = float(tgt.weights[s]);
            a.insert(ref.experts[s]);
            b.insert(tgt.experts[s]);
        }
        same += a == b ? 1 : 0;
    }
    add(name, fmt::format("[{}, {}] · [{}, {}]ᵀ, top-{}", t, h, e, h, moe.topK), OpKind::Router, m,
        implementation(routeOp, "native"), dr, dt);
    m_rows.back().expertAgreement = double(same) / double(t);
}

} // namespace day0::exec::detail
