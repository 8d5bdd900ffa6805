#include "actions/eval.h"

#include "actions/eval_corpus.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/engine.h"
#include "exec/layer_stream.h"
#include "exec/precision.h"
#include "exec/sequence_decoder.h"
#include "exec/streamed_sequence.h"
#include "numerics/dump_compare.h"
#include "numerics/routing_flips.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <sstream>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

/// A window of a document and the positions of it that are scored.
struct Window {
    std::size_t document = 0;
    std::int64_t start = 0; ///< first token's index in the document
    std::int64_t length = 0;
    std::int64_t scoredFrom = 0; ///< first scored position within the window
};

/// One loaded engine, or a checkpoint streamed layer by layer, and what it runs.
struct Side {
    exec::PrecisionPlan plan;
    exec::Engine* engine = nullptr;
    exec::Backend* backend = nullptr;
    /// Streamed (exec::runStreamed) when set: the checkpoint, its model and the budget.
    std::string streamed;
    const model::ModelSpec* spec = nullptr;
    exec::StreamOptions streamOptions;
};

/// One run of `o` on `side` (its plan and backend filled in here).
Result<exec::RunResult> runSide(const Side& side, exec::RunOptions o, std::stop_token stop)
{
    o.precision = side.plan;
    o.backend = side.backend;
    Progress inner; // the engine counts its own steps; the evaluation counts windows
    if (!side.streamed.empty()) {
        auto run = exec::runStreamed(side.streamed, *side.spec, o, side.streamOptions, inner, stop);
        if (!run) {
            return run.error();
        }
        return std::move(run->run);
    }
    return side.engine->run(o, inner, stop);
}

/// The reference of a sampled corpus decoding one sequence: over its loaded engine, or over its
/// weights streamed layer by layer once per fed step; the same logits either way.
class Sampler {
public:
    static Result<Sampler> open(const Side& side, std::int64_t capacity, std::int64_t steps,
        Progress& progress, std::stop_token stop)
    {
        Sampler s;
        if (side.streamed.empty()) {
            auto decoder = exec::SequenceDecoder::open(*side.engine, side.plan, capacity);
            if (!decoder) {
                return decoder.error();
            }
            s.m_decoder.emplace(std::move(*decoder));
        } else {
            auto streamed = exec::StreamedSequence::open(side.streamed, *side.spec, side.plan,
                capacity, side.streamOptions, steps, progress, stop);
            if (!streamed) {
                return streamed.error();
            }
            s.m_streamed.emplace(std::move(*streamed));
        }
        s.m_stop = std::move(stop);
        return s;
    }

    /// The last position's logits after `ids`.
    Result<std::vector<double>> feed(std::span<const std::int64_t> ids)
    {
        return m_decoder ? m_decoder->feed(ids, m_stop) : m_streamed->feed(ids);
    }

private:
    std::optional<exec::SequenceDecoder> m_decoder;
    std::optional<exec::StreamedSequence> m_streamed;
    std::stop_token m_stop;
};

/// The logits [tokens, vocab] of one run of `ids` (+ greedy tokens when `newTokens` > 1), and
/// the run's own picks. Only lm_head is captured: one window's logits in memory.
struct Logits {
    std::vector<double> values;
    std::int64_t rows = 0;
    std::vector<std::int64_t> generated;
};

Result<Logits> runLogits(const Side& side, const std::vector<std::int64_t>& ids,
    std::int64_t newTokens, std::int64_t vocab, std::stop_token stop)
{
    exec::RunOptions o;
    o.promptIds = ids;
    o.newTokens = newTokens;
    o.capture.filters = { "lm_head" };
    auto run = runSide(side, o, stop);
    if (!run) {
        return run.error();
    }
    const numerics::Tensor* t = run->dump.tensor("lm_head");
    if (t == nullptr || t->rank() != 2 || t->dim(1) != vocab) {
        return Error::internal("the run kept no [tokens, vocab] lm_head logits");
    }
    Logits out;
    out.values = t->toDoubles();
    out.rows = t->dim(0);
    out.generated = std::move(run->generated);
    return out;
}

/// Softmax sampling with a portable uniform draw (53 random bits), so that a seed gives the same
/// corpus with every standard library.
std::int64_t sampleToken(const double* logits, std::int64_t vocab, std::mt19937_64& rng)
{
    const double top = *std::max_element(logits, logits + vocab);
    double z = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) {
        z += std::exp(logits[i] - top);
    }
    const double u = double(rng() >> 11) * 0x1.0p-53 * z;
    double c = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) {
        c += std::exp(logits[i] - top);
        if (u < c) {
            return i;
        }
    }
    return vocab - 1;
}

Result<std::vector<std::int64_t>> sampleStart(const EvalRequest& request)
{
    if (!request.corpus.sampleStart.empty()) {
        return request.corpus.sampleStart;
    }
    const fs::path config = fs::path(request.checkpoint) / "config.json";
    auto json = readJsonFile(config);
    if (!json) {
        return json.error();
    }
    const auto it = json->find("bos_token_id");
    if (it == json->end() || !it->is_number_integer()) {
        return Error::badInput(fmt::format("{}: no integer 'bos_token_id' to start sampled "
                                           "sequences from; give the start ids",
            displayPath(config)));
    }
    return std::vector<std::int64_t> { it->get<std::int64_t>() };
}

std::vector<Window> makeWindows(
    const std::vector<std::vector<std::int64_t>>& docs, const EvalCorpus& c)
{
    const std::int64_t len = c.sequenceLength;
    const std::int64_t stride = c.stride > 0 ? std::min(c.stride, len) : len;
    std::vector<Window> windows;
    for (std::size_t d = 0; d < docs.size(); ++d) {
        const auto n = std::int64_t(docs[d].size());
        std::int64_t scoredUpTo = 0; // positions of the document already scored
        for (std::int64_t start = 0; start < n; start += stride) {
            const std::int64_t end = std::min(start + len, n);
            if (end - start < 2 || end <= scoredUpTo) {
                break;
            }
            windows.push_back(
                { d, start, end - start, std::max<std::int64_t>(0, scoredUpTo - start) });
            scoredUpTo = end;
            if (c.maxSequences > 0 && std::int64_t(windows.size()) >= c.maxSequences) {
                return windows;
            }
            if (end == n) {
                break;
            }
        }
    }
    return windows;
}

/// The RMS of target − reference logits over rows [0, rows).
double rmsLogitError(const Logits& r, const Logits& t, std::int64_t rows, std::int64_t vocab)
{
    double s = 0.0;
    const std::int64_t n = rows * vocab;
    for (std::int64_t i = 0; i < n; ++i) {
        const double d = t.values[std::size_t(i)] - r.values[std::size_t(i)];
        s += d * d;
    }
    return n > 0 ? std::sqrt(s / double(n)) : 0.0;
}

/// The first diverging capture when both run `ids` with every anchor captured.
Result<void> localise(const Side& ref, const Side& tgt, const std::vector<std::int64_t>& ids,
    const numerics::ToleranceTable& table, EvalVerdict& verdict, std::stop_token stop)
{
    const auto capture = [&](const Side& side) {
        exec::RunOptions o;
        o.promptIds = ids;
        o.newTokens = 1;
        return runSide(side, o, stop);
    };
    auto r = capture(ref);
    if (!r) {
        return r.error();
    }
    auto t = capture(tgt);
    if (!t) {
        return t.error();
    }
    numerics::CompareOptions options;
    options.table = &table;
    Progress inner;
    auto cmp = numerics::compareDumps(r->dump, t->dump, options, inner, stop);
    if (!cmp) {
        return cmp.error();
    }
    if (cmp->firstDivergence) {
        const auto& row = cmp->rows[*cmp->firstDivergence];
        verdict.firstBadCapture = row.name;
        verdict.firstBadLayer = row.layer;
    }
    return success();
}

/// Judges a summary (and the generations) by the table's end_to_end rule of the target's dtype;
/// `out.verdict.firstBadPosition` is already set.
void judge(EvalOutcome& out, const numerics::ToleranceTable& tab,
    const numerics::EndToEndRule* rule, DType targetDtype)
{
    EvalVerdict& v = out.verdict;
    v.table = tab.label();
    const auto& s = out.summary;
    if (rule == nullptr) {
        v.status = numerics::VerdictStatus::NotJudged;
        v.reason
            = fmt::format("{} has no end_to_end rule for {}", tab.label(), dtypeName(targetDtype));
    } else {
        v.rule = rule->id;
        std::vector<std::string> failed;
        if (s.klMean.value > rule->maxKlMean) {
            failed.push_back(
                fmt::format("mean KL {:.3e} > {:.3e}", s.klMean.value, rule->maxKlMean));
        }
        if (s.klP99 > rule->maxKlP99) {
            failed.push_back(fmt::format("KL p99 {:.3e} > {:.3e}", s.klP99, rule->maxKlP99));
        }
        if (s.sameTop.value < rule->minSameTop) {
            failed.push_back(
                fmt::format("same top {:.4f} < {:.4f}", s.sameTop.value, rule->minSameTop));
        }
        // A single position beyond the per-position limit does not fail on its own: the
        // largest of many positions grows with the corpus (1 in 25,600 of stories260K's bf16
        // positions exceeds 0.4 nats). It locates a failure the aggregate limits found.
        if (!failed.empty() && v.firstBadPosition) {
            failed.push_back(fmt::format("first position with KL > {:.3e}: window {} position {}{}",
                rule->maxKlPosition, v.firstBadPosition->first, v.firstBadPosition->second,
                v.firstBadCapture.empty() ? std::string()
                                          : fmt::format(", first diverging capture {} (layer {})",
                                              v.firstBadCapture, v.firstBadLayer)));
        }
        std::int64_t real = 0;
        for (const auto& g : out.generations) {
            real += g.firstDivergence && !g.nearTie;
        }
        if (!failed.empty()) {
            v.status = numerics::VerdictStatus::Fail;
            v.reason = fmt::format("fail ({}): {}", rule->id, fmt::join(failed, "; "));
        } else if (real > 0) {
            v.status = numerics::VerdictStatus::Warn;
            v.reason = fmt::format("warn ({}): KL within limits but {} of {} generations diverged "
                                   "beyond the target's resolution",
                rule->id, real, out.generations.size());
        } else {
            v.status = numerics::VerdictStatus::Pass;
            v.reason = fmt::format("pass ({}): mean KL {:.3e} <= {:.3e}, p99 {:.3e} <= {:.3e}, "
                                   "same top {:.4f} >= {:.4f}",
                rule->id, s.klMean.value, rule->maxKlMean, s.klP99, rule->maxKlP99, s.sameTop.value,
                rule->minSameTop);
        }
    }
}

/// The two-dump evaluation: their logits over the dumps' input ids.
Result<EvalOutcome> evaluateDumps(const EvalRequest& request, Progress& progress)
{
    EvalOutcome out;
    const auto started = std::chrono::steady_clock::now();
    if (request.referenceDump.empty() || request.targetDump.empty()) {
        return Error::badInput("give both --reference-dump and --target-dump");
    }
    auto table = numerics::resolveToleranceTable(request.tolerances);
    if (!table) {
        return table.error();
    }
    progress.setStage("reading the dumps");
    auto ref = checkpoint::readDump(request.referenceDump);
    if (!ref) {
        return ref.error();
    }
    auto tgt = checkpoint::readDump(request.targetDump);
    if (!tgt) {
        return tgt.error();
    }
    const numerics::Tensor* r = ref->tensor("lm_head");
    const numerics::Tensor* t = tgt->tensor("lm_head");
    for (const auto& [tensor, dir] :
        { std::pair { r, &request.referenceDump }, std::pair { t, &request.targetDump } }) {
        if (tensor == nullptr || tensor->rank() != 2) {
            return Error::badInput(fmt::format(
                "{}: no stored 'lm_head' logits [tokens, vocab] to compare", displayPath(*dir)));
        }
    }
    if (r->shape() != t->shape()) {
        return Error::badInput(fmt::format("the dumps' logits differ in shape: {} {} and {} {}",
            displayPath(request.referenceDump), numerics::shapeString(r->shape()),
            displayPath(request.targetDump), numerics::shapeString(t->shape())));
    }
    const auto& ids = ref->info.inputIds;
    if (ids != tgt->info.inputIds) {
        return Error::badInput(fmt::format("{} and {} ran different input ids",
            displayPath(request.referenceDump), displayPath(request.targetDump)));
    }
    const std::int64_t rows = r->dim(0);
    const std::int64_t vocab = r->dim(1);
    if (!ids.empty() && std::int64_t(ids.size()) != rows) {
        return Error::badInput(fmt::format("{}: {} input ids but {} rows of logits",
            displayPath(request.referenceDump), ids.size(), rows));
    }
    std::vector<std::int64_t> next(static_cast<std::size_t>(rows), -1);
    for (std::int64_t p = 0; p + 1 < std::int64_t(ids.size()); ++p) {
        next[std::size_t(p)] = ids[std::size_t(p + 1)];
    }
    const auto rv = r->toDoubles();
    const auto tv = t->toDoubles();
    const DType targetDtype = numerics::precisionDType(tgt->info.precision).value_or(DType::F32);
    const numerics::EndToEndRule* rule = table->matchEndToEnd(targetDtype);
    numerics::EndToEndAccumulator acc(request.topK);
    const auto stats = numerics::compareRows(rv, tv, rows, vocab, next, request.topK);
    for (std::int64_t p = 0; p < rows; ++p) {
        const auto& s = stats[std::size_t(p)];
        acc.add(s, p);
        out.sameTopStrip.push_back(s.sameTop ? 1 : 0);
        if (rule != nullptr && !out.verdict.firstBadPosition && s.kl > rule->maxKlPosition) {
            out.verdict.firstBadPosition = std::pair { std::int64_t(0), p };
        }
    }
    out.summary = acc.summary();
    out.windows = 1;
    out.spec.name = ref->info.model;
    out.referenceName = fmt::format("{} ({})", ref->info.precision, ref->info.backend);
    out.targetName = fmt::format("{} ({})", tgt->info.precision, tgt->info.backend);
    judge(out, *table, rule, targetDtype);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return out;
}

} // namespace

Result<EvalOutcome> evaluate(const EvalRequest& request, Progress& progress, std::stop_token stop)
{
    if (!request.referenceDump.empty() || !request.targetDump.empty()) {
        auto out = evaluateDumps(request, progress);
        if (out) {
            out->record = evalRunRecord(request, *out);
        }
        return out;
    }
    EvalOutcome out;
    const auto started = std::chrono::steady_clock::now();
    const EvalCorpus& corpus = request.corpus;
    if (corpus.sequenceLength < 2) {
        return Error::badInput(
            fmt::format("--seq-len must be at least 2 tokens, got {}", corpus.sequenceLength));
    }
    if (corpus.stride < 0 || corpus.maxSequences < 0 || request.topK < 1
        || request.generation.tokens < 0 || request.generation.prompts < 0
        || request.generation.promptLength < 1) {
        return Error::badInput(
            "--stride, --count, --top-k, --generate, --generate-prompts and --prompt-length must "
            "not be negative (top-k and the prompt length at least 1)");
    }
    const int sources = int(!corpus.idsFile.empty()) + int(!corpus.textFile.empty())
        + int(corpus.sampleSequences > 0);
    if (sources != 1) {
        return Error::badInput(
            "give exactly one corpus: --ids-file FILE, --text-file FILE or --sample-corpus N");
    }
    auto refPlan = exec::parsePrecisionPlan(request.reference);
    if (!refPlan) {
        return refPlan.error().withContext("--reference");
    }
    auto tgtPlan = request.targetPlan
        ? Result<exec::PrecisionPlan>(*request.targetPlan)
        : exec::parsePrecisionPlan(request.target, request.targetOps, request.targetLayers);
    if (!tgtPlan) {
        return tgtPlan.error().withContext("--target");
    }
    auto table = numerics::resolveToleranceTable(request.tolerances);
    if (!table) {
        return table.error();
    }
    progress.setStage("loading");
    auto spec = exec::loadCheckpointModel(request.checkpoint);
    if (!spec) {
        return spec.error();
    }
    out.spec = *spec;
    const std::string targetCkpt
        = request.targetCheckpoint.empty() ? request.checkpoint : request.targetCheckpoint;
    const bool twoCheckpoints = targetCkpt != request.checkpoint;
    if (twoCheckpoints) {
        auto other = exec::loadCheckpointModel(targetCkpt);
        if (!other) {
            return other.error();
        }
        if (exec::modelFingerprint(*other) != exec::modelFingerprint(*spec)) {
            return Error::badInput(
                fmt::format("{} ({}) and {} ({}) are different architectures", request.checkpoint,
                    exec::modelFingerprint(*spec), targetCkpt, exec::modelFingerprint(*other)));
        }
    }
    if (tgtPlan->isF64() && request.backend != nullptr) {
        return Error::badInput("the fp64 target runs on the CPU only; drop --backend");
    }
    // Streamed: the reference, and the target when it runs on the CPU too (a backend's target
    // is loaded whole and the outcome says so).
    if (request.stream) {
        out.referenceStreamed = true;
        out.targetStreamed = request.backend == nullptr;
    }
    std::optional<exec::Engine> refEngine;
    if (!out.referenceStreamed) {
        auto refWeights = exec::openCheckpointWeights(request.checkpoint);
        if (!refWeights) {
            return refWeights.error().withContext("weights");
        }
        progress.setStage(fmt::format("loading weights ({})", refPlan->isF64() ? "fp64" : "fp32"));
        auto e = exec::Engine::create(*spec, **refWeights, refPlan->isF64(), progress, stop);
        if (!e) {
            return e.error();
        }
        refEngine.emplace(std::move(*e));
    }
    std::optional<exec::Engine> tgtEngine;
    if (!out.targetStreamed
        && (twoCheckpoints || tgtPlan->isF64() != refPlan->isF64() || !refEngine)) {
        auto tgtWeights = exec::openCheckpointWeights(targetCkpt);
        if (!tgtWeights) {
            return tgtWeights.error().withContext("weights");
        }
        progress.setStage(fmt::format("loading weights ({})", tgtPlan->isF64() ? "fp64" : "fp32"));
        auto e = exec::Engine::create(*spec, **tgtWeights, tgtPlan->isF64(), progress, stop);
        if (!e) {
            return e.error();
        }
        tgtEngine.emplace(std::move(*e));
    }
    Side ref { *refPlan, refEngine ? &*refEngine : nullptr, nullptr };
    Side tgt { *tgtPlan, tgtEngine ? &*tgtEngine : ref.engine, request.backend };
    if (out.referenceStreamed) {
        ref.streamed = request.checkpoint;
        ref.spec = &out.spec;
        ref.streamOptions = request.streamOptions;
    }
    if (out.targetStreamed) {
        tgt.streamed = targetCkpt;
        tgt.spec = &out.spec;
        tgt.streamOptions = request.streamOptions;
    }
    out.referenceName = refPlan->describe();
    out.targetName = tgtPlan->describe();
    const std::int64_t vocab = spec->vocabSize;

    // The corpus.
    std::vector<std::vector<std::int64_t>> docs;
    if (!corpus.idsFile.empty()) {
        auto read = detail::readIdsFile(corpus.idsFile, vocab);
        if (!read) {
            return read.error();
        }
        docs = std::move(*read);
    } else if (!corpus.textFile.empty()) {
        auto text = readFile(corpus.textFile);
        if (!text) {
            return text.error();
        }
        auto tokenizer = tokenizer::loadTokenizer(request.checkpoint);
        if (!tokenizer) {
            return tokenizer.error();
        }
        auto ids = (*tokenizer)->encode(*text, true);
        if (!ids) {
            return ids.error().withContext(displayPath(corpus.textFile));
        }
        docs.push_back(std::move(*ids));
    } else {
        auto start = sampleStart(request);
        if (!start) {
            return start.error();
        }
        std::mt19937_64 rng(corpus.seed);
        progress.setTotal(corpus.sampleSequences);
        progress.setDone(0);
        for (std::int64_t s = 0; s < corpus.sampleSequences; ++s) {
            progress.setStage(
                fmt::format("sampling the corpus ({}/{})", s + 1, corpus.sampleSequences));
            std::vector<std::int64_t> seq = *start;
            // The reference decodes the sequence step by step over its cache (one forward token
            // per drawn token), each next token drawn from the last position's distribution.
            const auto length
                = std::max<std::int64_t>(corpus.sequenceLength, std::int64_t(seq.size()));
            Progress inner; // the evaluation counts sequences
            auto decoder
                = Sampler::open(ref, length, length - std::int64_t(seq.size()) + 1, inner, stop);
            if (!decoder) {
                return decoder.error();
            }
            auto logits = std::int64_t(seq.size()) < corpus.sequenceLength
                ? decoder->feed(seq)
                : Result<std::vector<double>>(std::vector<double> {});
            while (std::int64_t(seq.size()) < corpus.sequenceLength) {
                if (!logits) {
                    return logits.error();
                }
                seq.push_back(sampleToken(logits->data(), vocab, rng));
                if (std::int64_t(seq.size()) < corpus.sequenceLength) {
                    logits = decoder->feed(std::span(&seq.back(), 1));
                }
            }
            docs.push_back(std::move(seq));
            progress.advance();
        }
    }
    const std::vector<Window> windows = makeWindows(docs, corpus);
    if (windows.empty()) {
        return Error::badInput("the corpus has no window of at least 2 tokens");
    }
    out.windows = std::int64_t(windows.size());

    const numerics::ToleranceTable& tab = *table;
    const DType targetDtype = exec::precisionDType(tgtPlan->base);
    const numerics::EndToEndRule* rule = tab.matchEndToEnd(targetDtype);
    numerics::EndToEndAccumulator acc(request.topK);
    const std::int64_t gens = request.generation.tokens > 0
        ? std::min<std::int64_t>(request.generation.prompts, std::int64_t(windows.size()))
        : 0;
    progress.setTotal(std::int64_t(windows.size()) + gens);
    progress.setDone(0);
    for (std::size_t w = 0; w < windows.size(); ++w) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        progress.setStage(fmt::format("window {}/{}", w + 1, windows.size()));
        const Window& win = windows[w];
        const auto& doc = docs[win.document];
        const std::vector<std::int64_t> ids(
            doc.begin() + win.start, doc.begin() + win.start + win.length);
        auto r = runLogits(ref, ids, 1, vocab, stop);
        if (!r) {
            return r.error();
        }
        auto t = runLogits(tgt, ids, 1, vocab, stop);
        if (!t) {
            return t.error();
        }
        const std::int64_t scored = win.length - win.scoredFrom;
        std::vector<std::int64_t> next(static_cast<std::size_t>(scored));
        for (std::int64_t p = win.scoredFrom; p < win.length; ++p) {
            const std::int64_t at = win.start + p + 1;
            next[std::size_t(p - win.scoredFrom)]
                = at < std::int64_t(doc.size()) ? doc[std::size_t(at)] : -1;
        }
        const auto first = std::size_t(win.scoredFrom * vocab);
        const auto span = std::size_t(scored * vocab);
        const auto rows = numerics::compareRows(std::span(r->values).subspan(first, span),
            std::span(t->values).subspan(first, span), scored, vocab, next, request.topK);
        for (std::int64_t p = win.scoredFrom; p < win.length; ++p) {
            const auto& stats = rows[std::size_t(p - win.scoredFrom)];
            acc.add(stats, p);
            out.sameTopStrip.push_back(stats.sameTop ? 1 : 0);
            if (rule != nullptr && !out.verdict.firstBadPosition
                && stats.kl > rule->maxKlPosition) {
                out.verdict.firstBadPosition = std::pair { std::int64_t(w), p };
            }
        }
        progress.advance();
    }
    out.summary = acc.summary();

    // Greedy generation from the first tokens of the first windows.
    const DType logitsDtype = exec::precisionDType(tgtPlan->modeFor(numerics::OpKind::Logits, -1));
    for (std::int64_t g = 0; g < gens; ++g) {
        progress.setStage(fmt::format("generation {}/{}", g + 1, gens));
        const Window& win = windows[std::size_t(g)];
        const auto& doc = docs[win.document];
        const std::int64_t plen = std::min(request.generation.promptLength, win.length);
        GenerationDiff diff;
        diff.prompt.assign(doc.begin() + win.start, doc.begin() + win.start + plen);
        auto r = runLogits(ref, diff.prompt, request.generation.tokens, vocab, stop);
        if (!r) {
            return r.error();
        }
        auto t = runLogits(tgt, diff.prompt, request.generation.tokens, vocab, stop);
        if (!t) {
            return t.error();
        }
        diff.reference = r->generated;
        diff.target = t->generated;
        const std::size_t n = std::min(diff.reference.size(), diff.target.size());
        std::size_t d = 0;
        while (d < n && diff.reference[d] == diff.target[d]) {
            ++d;
        }
        diff.commonPrefix = std::int64_t(d);
        if (d < n) {
            // Both saw the same context up to here: row plen - 1 + d holds each one's logits for
            // the pick that differs.
            diff.firstDivergence = std::int64_t(d);
            const std::int64_t row = plen - 1 + std::int64_t(d);
            const double* rr = r->values.data() + row * vocab;
            std::int64_t a = 0;
            for (std::int64_t i = 1; i < vocab; ++i) {
                a = rr[i] > rr[a] ? i : a;
            }
            std::int64_t b = a == 0 ? 1 : 0;
            for (std::int64_t i = 0; i < vocab; ++i) {
                b = i != a && rr[i] > rr[b] ? i : b;
            }
            diff.margin = rr[a] - rr[b];
            // Each logit is uncertain by the target's measured logit error over the rows where
            // the two agreed on the context and the pick, not by how far it moved at the very
            // row that flipped (that would explain every flip).
            const double u = rmsLogitError(*r, *t, row, vocab);
            diff.resolution = numerics::pairResolution(logitsDtype, rr[a], rr[b], u, u);
            diff.nearTie = diff.margin <= diff.resolution;
        }
        out.generations.push_back(std::move(diff));
        progress.advance();
    }

    // The verdict.
    EvalVerdict& v = out.verdict;
    judge(out, tab, rule, targetDtype);
    if (v.status == numerics::VerdictStatus::Fail && v.firstBadPosition) {
        progress.setStage("localising the first bad position");
        const Window& win = windows[std::size_t(v.firstBadPosition->first)];
        const auto& doc = docs[win.document];
        const std::vector<std::int64_t> ids(
            doc.begin() + win.start, doc.begin() + win.start + v.firstBadPosition->second + 1);
        DAY0_TRY(localise(ref, tgt, ids, tab, v, stop));
        judge(out, tab, rule, targetDtype);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out.record = evalRunRecord(request, out);
    return out;
}

} // namespace day0::actions
