// day0 compare A B: precision comparison of two dumps, aligned by capture name.
#include "cmd_compare.h"

#include "actions/compare.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/tensor_file.h"
#include "command.h"
#include "interrupt.h"
#include "numerics/gradient_compare.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <optional>

namespace day0::cli {

namespace {

std::string sci(double v)
{
    if (std::isnan(v)) {
        return "nan";
    }
    if (std::isinf(v)) {
        return v > 0 ? "inf" : "-inf";
    }
    return fmt::format("{:.2e}", v);
}

std::string describeDump(const numerics::DumpInfo& i)
{
    return fmt::format("{} {} {} ({} tokens{})", i.model.empty() ? "?" : i.model, i.backend,
        i.precision, i.inputIds.size(), i.mode == "inject" ? ", inject mode" : "");
}

/// A gradient comparison's direction and each decoder layer's backward: the gradient it passes
/// on, its accumulated error, what it inherited from the layer after it and its own error.
std::string renderLayerBackward(const numerics::DumpComparison& c)
{
    const auto layers = numerics::layerBackwardErrors(c);
    if (layers.empty()) {
        return {};
    }
    std::string out = fmt::format("\n{}\n", numerics::gradientDirectionNote(c));
    Table table({ "layer backward", "passes on", "inherited rel_l2", "rel_l2", "own rel_l2" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Right, Table::Align::Right,
            Table::Align::Right });
    for (const auto& e : layers) {
        table.addRow({ fmt::format("layer {}", e.layer), e.capture,
            e.inherited ? sci(*e.inherited) : "-", sci(e.accumulated), e.own ? sci(*e.own) : "-" });
    }
    out += table.render();
    if (const auto worst = numerics::largestOwnBackwardError(c)) {
        out += fmt::format("largest own error: layer {}'s backward ({} own rel_l2 {})\n",
            worst->layer, worst->capture, sci(*worst->own));
    } else {
        out += "own error: compare with --local INJECT (day0 run --grad --inject-from REFERENCE "
               "writes the inject-mode gradient dump)\n";
    }
    return out;
}

} // namespace

std::string renderComparison(const numerics::DumpComparison& c, bool allRows)
{
    using numerics::VerdictStatus;
    std::string out = fmt::format(
        "reference: {}\ntarget:    {}\n\n", describeDump(c.reference), describeDump(c.target));
    Table table(
        { "capture", "op", "rel_l2", "cosine", "max_abs", "own rel_l2", "floor", "verdict" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Right, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Right, Table::Align::Left });
    int hidden = 0;
    for (const auto& r : c.rows) {
        const bool interesting = r.verdict.status != VerdictStatus::Pass
            || r.kind == numerics::OpKind::Logits || r.kind == numerics::OpKind::DecoderLayer
            || r.kind == numerics::OpKind::Embedding;
        if (!allRows && !interesting && c.rows.size() > 40) {
            ++hidden;
            continue;
        }
        std::string rel = "-";
        std::string cosine = "-";
        std::string maxAbs = "-";
        if (r.metrics) {
            rel = sci(r.metrics->relL2);
            cosine = fmt::format("{:.6f}", r.metrics->cosine);
            maxAbs = sci(r.metrics->maxAbs);
        } else if (r.experts) {
            rel = fmt::format("{:.0f}% sets", 100.0 * r.experts->exactSetShare);
        } else if (r.stats) {
            rel = fmt::format(">={}", sci(r.stats->rmsRel));
        }
        std::string floor = "-";
        if (r.verdict.floor > 0.0) {
            floor = std::isfinite(r.verdict.floorRatio)
                ? fmt::format("{:.1f}×", r.verdict.floorRatio)
                : "inf";
        }
        table.addRow({ r.name, std::string(numerics::opKindName(r.kind)), rel, cosine, maxAbs,
            r.own ? sci(r.own->relL2) : "-", floor,
            std::string(numerics::verdictStatusName(r.verdict.status)) });
    }
    out += table.render();
    if (hidden > 0) {
        out += fmt::format("({} passing sub-module rows hidden; --all shows them)\n", hidden);
    }
    for (const auto& r : c.rows) {
        if (r.logits) {
            const auto& l = *r.logits;
            std::string first = "none";
            if (l.firstDifferingPosition >= 0) {
                const std::int64_t prompt = c.reference.promptLength;
                const std::string where = prompt > 0 && l.firstDifferingPosition >= prompt - 1
                    ? fmt::format("generated token {}", l.firstDifferingPosition - prompt + 2)
                    : fmt::format("prompt position {}", l.firstDifferingPosition);
                first = fmt::format(
                    "{} (reference {}, target {})", where, l.referenceToken, l.targetToken);
            }
            out += fmt::format(
                "\nlogits {}: KL {} (max {}), top-1 {:.1f}%, top-5 overlap {:.1f}%, first "
                "differing greedy token: {}\n",
                r.name, sci(l.klMean), sci(l.klMax), 100.0 * l.top1Agreement, 100.0 * l.top5Overlap,
                first);
        }
    }
    for (const auto& r : c.rows) {
        if (r.experts) {
            out += fmt::format(
                "experts {}: {:.1f}% of tokens chose the same set, overlap {:.1f}%{}\n", r.name,
                100.0 * r.experts->exactSetShare, 100.0 * r.experts->overlap,
                r.experts->firstFlipToken >= 0
                    ? fmt::format(", first flip at token {}", r.experts->firstFlipToken)
                    : std::string());
        }
    }
    for (const auto& r : c.rows) {
        if (r.routing && !r.routing->flips.empty()) {
            out += fmt::format("routing flips {}: {}\n", r.name, r.verdict.reason);
        }
    }
    // Gradient rows that a flipped layer's backward reaches: how each was judged instead.
    std::size_t afterFlips = 0;
    for (const auto& r : c.rows) {
        if (r.afterFlips && afterFlips++ < 12) {
            out += fmt::format("after routing flips {}: {}\n", r.name, r.verdict.reason);
        }
    }
    if (afterFlips > 12) {
        out += fmt::format(
            "after routing flips: and {} more rows (--json has each)\n", afterFlips - 12);
    }
    if (!c.onlyInReference.empty()) {
        out += fmt::format("only in the reference ({}): {}\n", c.onlyInReference.size(),
            fmt::join(c.onlyInReference, ", "));
    }
    if (!c.onlyInTarget.empty()) {
        out += fmt::format("only in the target ({}): {}\n", c.onlyInTarget.size(),
            fmt::join(c.onlyInTarget, ", "));
    }
    for (const auto& w : c.warnings) {
        out += fmt::format("warning: {}\n", w);
    }
    out += renderLayerBackward(c);
    if (c.firstDivergence) {
        const auto& r = c.rows[*c.firstDivergence];
        out += fmt::format("\nfirst divergence ({} error{}): {}: {}\n", c.divergenceBasis,
            numerics::isGradientComparison(c) ? ", backward order" : "", r.name, r.verdict.reason);
    } else {
        out += fmt::format("\nno divergence: every capture is within its tolerance ({} error)\n",
            c.divergenceBasis);
    }
    out += fmt::format("verdicts: {} pass, {} warn, {} fail, {} not judged [{}, {}]\n", c.passCount,
        c.warnCount, c.failCount, c.notJudgedCount, c.table, dtypeName(c.precision));
    return out;
}

namespace {

struct CompareArgs {
    std::string reference;
    std::string target;
    std::string floor;
    std::string local;
    std::string tolerances;
    std::string precision;
    std::string csv;
    bool allowMismatch = false;
    bool all = false;
};

int runCompare(const CompareArgs& a, const GlobalOptions& global)
{
    actions::CompareRequest request;
    request.reference = a.reference;
    request.target = a.target;
    request.floor = a.floor;
    request.local = a.local;
    request.tolerances = a.tolerances;
    request.precision = a.precision;
    request.allowMismatch = a.allowMismatch;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "compare", !global.quiet);
    auto compared = actions::compareDumpFolders(request, progress, interruptToken());
    bar.reset();
    if (!compared) {
        return reportError(compared.error());
    }
    const auto& cmp = compared->comparison;
    const auto runId = recordResult(compared->record);
    const int code = actions::comparisonExitCode(cmp);
    if (!a.csv.empty()) {
        const std::string csv = numerics::comparisonToCsv(cmp);
        if (a.csv == "-") {
            fmt::print("{}", csv);
            return code;
        }
        auto written = writeFileAtomic(a.csv, csv);
        if (!written) {
            return reportError(written.error());
        }
    }
    if (global.json) {
        auto j = numerics::comparisonToJson(cmp);
        j["run_id"] = runId ? nlohmann::json(runId->value()) : nlohmann::json(nullptr);
        fmt::print("{}\n", dumpJson(j, 2));
    } else {
        fmt::print("{}", renderComparison(cmp, a.all));
    }
    return code;
}

const bool registered = registerCommand({ "compare",
    "compare two dumps capture by capture: metrics, verdicts against tolerance tables, first "
    "divergence",
    60, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<CompareArgs>();
        app.add_option("reference", args->reference,
               "reference dump folder (dump.json + tensors.safetensors)")
            ->required();
        app.add_option("target", args->target, "target dump folder")->required();
        app.add_option("--floor", args->floor,
            "dump of the reference computed in the target's dtype: measured noise floors");
        app.add_option("--local", args->local,
            "the target's inject-mode dump: judge each capture on its own error");
        app.add_option("--tolerances", args->tolerances,
            "tolerance table: bundled name (day0-default, day0-default-v1) or a JSON file");
        app.add_option("--precision", args->precision,
            "target precision for the rules (default: the target dump's)");
        app.add_option(
            "--csv", args->csv, "also write CSV to this file ('-': CSV on stdout instead)");
        app.add_flag("--allow-mismatch", args->allowMismatch,
            "compare dumps of different models or inputs (a warning instead of an error)");
        app.add_flag("--all", args->all, "show every capture, not only layers and problems");
        return [args, &global] { return runCompare(*args, global); };
    } });

} // namespace

} // namespace day0::cli
