// day0 eval <checkpoint>: end-to-end accuracy of a target precision (or checkpoint) against a
// reference over a corpus: KL of the next-token distributions, top-1/top-k agreement, Δp,
// perplexity of both, the KL curve along the sequence and greedy generation agreement
// (actions/eval.h).
#include "actions/eval.h"
#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "extend/plugin_registry.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>

namespace day0::cli {

namespace {

struct EvalArgs {
    actions::EvalRequest request;
    std::string backend = "cpu";
    int device = 0;
    std::string sampleStart;
    std::string memoryBudget; ///< --memory-budget SIZE (with --stream)
};

Result<std::vector<std::int64_t>> parseIdList(const std::string& text)
{
    std::vector<std::int64_t> ids;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) {
        try {
            std::size_t used = 0;
            ids.push_back(std::stoll(item, &used));
            if (used != item.size() || ids.back() < 0) {
                throw std::invalid_argument(item);
            }
        } catch (const std::exception&) {
            return Error::badInput(fmt::format("--sample-start: '{}' is not a token id", item));
        }
    }
    if (ids.empty()) {
        return Error::badInput("--sample-start: no token ids given");
    }
    return ids;
}

void printText(const actions::EvalOutcome& o)
{
    const auto& s = o.summary;
    fmt::print("{}: {} against {} over {} windows, {} positions ({} with a next token)\n",
        o.spec.name, o.targetName, o.referenceName, o.windows, s.positions, s.scoredTokens);
    if (o.referenceStreamed || o.targetStreamed) {
        fmt::print("  weights streamed layer by layer: reference {}, target {}\n",
            o.referenceStreamed ? "yes" : "no",
            o.targetStreamed ? "yes" : "no (a backend's target is loaded whole)");
    }
    fmt::print("  KL(ref || target)  mean {:.4e} ± {:.2e} (95% CI [{:.4e}, {:.4e}])\n",
        s.klMean.value, s.klMean.uncertainty, s.klMean.value - 1.96 * s.klMean.uncertainty,
        s.klMean.value + 1.96 * s.klMean.uncertainty);
    fmt::print("                     median {:.4e}  p99 {:.4e}  p99.9 {:.4e}  max {:.4e}\n",
        s.klMedian, s.klP99, s.klP999, s.klMax);
    fmt::print("  same top           {:.4f} ± {:.4f}    top-{} overlap {:.4f}\n", s.sameTop.value,
        s.sameTop.uncertainty, s.topK, s.topkOverlap);
    fmt::print(
        "  RMS Δp             {:.4e} ± {:.2e}\n", s.rmsDeltaP.value, s.rmsDeltaP.uncertainty);
    fmt::print(
        "  PPL reference      {:.6f} ± {:.4f}\n", s.referencePpl.value, s.referencePpl.uncertainty);
    fmt::print(
        "  PPL target         {:.6f} ± {:.4f}\n", s.targetPpl.value, s.targetPpl.uncertainty);
    fmt::print("  PPL ratio          {:.8f} ± {:.2e}\n", s.pplRatio.value, s.pplRatio.uncertainty);
    if (!s.klByPosition.empty()) {
        // The KL curve in eight bands of the sequence.
        const std::size_t n = s.klByPosition.size();
        const std::size_t bands = std::min<std::size_t>(8, n);
        std::vector<std::string> cells;
        for (std::size_t b = 0; b < bands; ++b) {
            const std::size_t from = b * n / bands;
            const std::size_t to = (b + 1) * n / bands;
            double sum = 0.0;
            double count = 0.0;
            for (std::size_t p = from; p < to; ++p) {
                sum += s.klByPosition[p] * double(s.countByPosition[p]);
                count += double(s.countByPosition[p]);
            }
            cells.push_back(
                fmt::format("{}-{}: {:.2e}", from, to - 1, count > 0 ? sum / count : 0));
        }
        fmt::print("  KL by position     {}\n", fmt::join(cells, "  "));
    }
    for (std::size_t g = 0; g < o.generations.size(); ++g) {
        const auto& d = o.generations[g];
        if (!d.firstDivergence) {
            fmt::print("  generation {}: {} tokens agree\n", g, d.reference.size());
        } else {
            fmt::print("  generation {}: first divergence at token {} (reference {} target {}): "
                       "margin {:.3e} vs resolution {:.3e} -> {}\n",
                g, *d.firstDivergence, d.reference[std::size_t(*d.firstDivergence)],
                d.target[std::size_t(*d.firstDivergence)], d.margin, d.resolution,
                d.nearTie ? "near-tie" : "real divergence");
        }
    }
    fmt::print("verdict: {}\n", o.verdict.reason);
}

int runEval(EvalArgs a, const GlobalOptions& global)
{
    const bool dumps = !a.request.referenceDump.empty() || !a.request.targetDump.empty();
    if (dumps == !a.request.checkpoint.empty()) {
        return reportError(
            Error::badInput("give a checkpoint, or --reference-dump and --target-dump, not both"));
    }
    if (!dumps) {
        if (auto refused = refusePartial("eval", a.request.checkpoint, global)) {
            return *refused;
        }
    }
    if (!a.sampleStart.empty()) {
        auto ids = parseIdList(a.sampleStart);
        if (!ids) {
            return reportError(ids.error());
        }
        a.request.corpus.sampleStart = std::move(*ids);
    }
    extend::PluginRegistry registry;
    auto backend = extend::openRunBackend(registry, a.backend, a.device);
    if (!backend) {
        return reportError(backend.error());
    }
    a.request.backend = backend->get();
    if (!a.memoryBudget.empty()) {
        if (!a.request.stream) {
            return reportError(
                Error::badInput("--memory-budget bounds a streamed run's weights; add --stream"));
        }
        auto budget = exec::parseMemorySize(a.memoryBudget);
        if (!budget) {
            return reportError(budget.error());
        }
        a.request.streamOptions.memoryBudget = *budget;
    }
    if (a.request.stream && dumps) {
        return reportError(Error::badInput("--stream runs a checkpoint; two dumps run nothing"));
    }
    Progress progress;
    Result<actions::EvalOutcome> outcome = Error::internal("not run");
    {
        ProgressBar bar(progress, "eval", !global.quiet && !global.json);
        outcome = actions::evaluate(a.request, progress, interruptToken());
    }
    if (!outcome) {
        return reportError(outcome.error());
    }
    const auto runId = recordResult(outcome->record);
    if (global.json) {
        auto j = actions::evalToJson(*outcome);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        printText(*outcome);
    }
    return outcome->verdict.status == numerics::VerdictStatus::Fail ? 1 : 0;
}

const bool registered = registerCommand({ "eval",
    "end-to-end accuracy of a target against a reference over a corpus: KL, top-1/top-k "
    "agreement, Δp, perplexity, KL by position and greedy generation agreement",
    36, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<EvalArgs>();
        auto& r = a->request;
        app.add_option("checkpoint", r.checkpoint,
            "checkpoint folder (not with --reference-dump/--target-dump)");
        app.add_option("--reference-dump", r.referenceDump,
            "compare two dumps' lm_head logits instead (day0 run --dump, plugins/torch/"
            "day0_dump.py): the reference's dump folder");
        app.add_option("--target-dump", r.targetDump, "the target's dump folder");
        app.add_option("--reference", r.reference, "reference precision (fp64 or fp32)")
            ->capture_default_str();
        app.add_option("--target", r.target,
               "target precision: fp32, bf16, fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, int4, "
               "int4-g32")
            ->capture_default_str();
        app.add_option("--op-precision", r.targetOps, "target per op kind, e.g. attention=fp32");
        app.add_option("--layer-precision", r.targetLayers, "target per layer, e.g. 3=fp32");
        app.add_option("--target-checkpoint", r.targetCheckpoint,
            "run the target from this checkpoint (same architecture) instead");
        app.add_option("--backend", a->backend,
            "where the target runs: cpu (default) or a backend plugin such as cuda");
        app.add_option("--device", a->device, "device index for a GPU backend");
        app.add_option("--ids-file", r.corpus.idsFile,
            "corpus of token ids (whitespace or commas; one document per line)");
        app.add_option("--text-file", r.corpus.textFile,
            "corpus of text, encoded with the checkpoint's tokenizer");
        app.add_option("--sample-corpus", r.corpus.sampleSequences,
            "corpus of N sequences sampled from the reference itself (in-distribution text)");
        app.add_option("--seed", r.corpus.seed, "seed of --sample-corpus")->capture_default_str();
        app.add_option("--sample-start", a->sampleStart,
            "ids every sampled sequence starts from (default: config.json bos_token_id)");
        app.add_option("--seq-len", r.corpus.sequenceLength, "tokens per window")
            ->capture_default_str();
        app.add_option("--stride", r.corpus.stride,
            "tokens a window advances by (default: --seq-len; smaller: overlapping windows "
            "scoring only their new positions)");
        app.add_option("--count", r.corpus.maxSequences, "at most this many windows (0: all)");
        app.add_option("--top-k", r.topK, "k of the top-k overlap")->capture_default_str();
        app.add_option("--generate", r.generation.tokens,
            "greedy tokens to generate under both from the first windows' first tokens (0: "
            "none)");
        app.add_option("--generate-prompts", r.generation.prompts, "prompts to generate from")
            ->capture_default_str();
        app.add_option("--prompt-length", r.generation.promptLength, "tokens of each prompt")
            ->capture_default_str();
        app.add_option("--tolerances", r.tolerances,
            "tolerance table name or file whose end_to_end rules judge (default day0-default)");
        app.add_flag("--stream", r.stream,
            "stream the weights layer by layer (the reference, and a target on the CPU; a sampled "
            "corpus streams once per token): the same figures in bounded memory");
        app.add_option("--memory-budget", a->memoryBudget,
            "with --stream: bound the resident weights, e.g. 512M or 8G");
        return [a, &global] { return runEval(*a, global); };
    } });

} // namespace

} // namespace day0::cli
