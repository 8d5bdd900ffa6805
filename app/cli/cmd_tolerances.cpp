// day0 tolerances derive|show: derive a tolerance table from healthy runs of one's own models,
// and show what a table holds and how it was derived.
#include "actions/tolerances.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

namespace day0::cli {

namespace {

struct TolerancesArgs {
    std::vector<std::string> checkpoints;
    std::string precisions = "bf16";
    int runs = 4;
    int tokens = 64;
    std::uint64_t seed = 1;
    double percentile = 100.0;
    double margin = 1.5;
    std::string growth = "auto";
    std::string base;
    std::string name = "derived";
    int version = 1;
    std::string out;
    std::string table; ///< show: a bundled name or a file
    bool gradients = false; ///< derive: gradient rules from `run --grad` passes
};

void printRules(const numerics::ToleranceTable& table)
{
    Table t({ "rule", "dtype", "op", "max_rel_l2", "max_kl", "min_top1", "how" },
        { Table::Align::Left, Table::Align::Left, Table::Align::Left, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Left });
    const auto add = [&](const numerics::ToleranceRule& r) {
        std::string op = r.op ? std::string(numerics::opKindName(*r.op)) : "*";
        if (r.isGradientRule) {
            op = fmt::format("{} grad: {}",
                r.gradient ? std::string(numerics::gradientOfName(*r.gradient)) : "*", op);
        }
        t.addRow({ r.id, r.dtype ? std::string(dtypeName(*r.dtype)) : "*", op,
            fmt::format("{:.3g}", r.maxRelL2), r.maxKl ? fmt::format("{:.3g}", *r.maxKl) : "-",
            r.minTop1 ? fmt::format("{:.0f}%", 100.0 * *r.minTop1) : "-",
            !r.looserBecause.empty() ? r.looserBecause : r.note });
    };
    for (const auto& r : table.rules) {
        add(r);
    }
    for (const auto& r : table.gradientRules) {
        add(r);
    }
    fmt::print("{}", t.render());
}

int runDerive(const TolerancesArgs& args, const GlobalOptions& global)
{
    // Recorded in the table: checkpoints by folder name, so that no machine path is kept.
    std::string line = "day0 tolerances derive";
    for (const auto& c : args.checkpoints) {
        const std::filesystem::path p(c);
        line += " " + (p.filename().empty() ? p.parent_path().filename() : p.filename()).string();
    }
    line += fmt::format("{} --precision {} --runs {} --tokens {} --seed {} --percentile {:g} "
                        "--margin {:g}",
        args.gradients ? " --grad" : "", args.precisions, args.runs, args.tokens, args.seed,
        args.percentile, args.margin);
    actions::DeriveTolerancesRequest request;
    if (args.growth == "sqrt") {
        request.derivation.growth = numerics::DepthGrowth::Sqrt;
    } else if (args.growth == "linear") {
        request.derivation.growth = numerics::DepthGrowth::Linear;
    } else if (args.growth == "none") {
        request.derivation.growth = numerics::DepthGrowth::None;
    } else if (args.growth != "auto") {
        return reportError(Error::badInput(fmt::format(
            "--growth '{}': expected auto (the law the healthy errors follow), sqrt, linear or "
            "none",
            args.growth)));
    }
    if (args.growth != "auto") {
        line += " --growth " + args.growth;
    }
    // The rest of what decides the table, so that the recorded line reproduces it.
    if (!args.base.empty()) {
        const std::filesystem::path b(args.base);
        line += " --base " + (b.has_parent_path() ? b.filename().string() : args.base);
    }
    line += fmt::format(" --name {} --version {}", args.name, args.version);
    for (const auto& c : args.checkpoints) {
        request.checkpoints.emplace_back(c);
    }
    std::stringstream list(args.precisions);
    for (std::string item; std::getline(list, item, ',');) {
        auto p = exec::parsePrecision(item);
        if (!p) {
            return reportError(p.error().withContext("--precision"));
        }
        request.precisions.push_back(*p);
    }
    request.gradients = args.gradients;
    request.runs = args.runs;
    request.tokens = args.tokens;
    request.seed = args.seed;
    request.base = args.base;
    request.derivation.name = args.name;
    request.derivation.version = args.version;
    request.derivation.percentile = args.percentile;
    request.derivation.margin = args.margin;
    request.derivation.command = line;
    request.out = args.out;
    Progress progress;
    Result<actions::DeriveTolerancesOutcome> derived = Error::cancelled();
    {
        ProgressBar bar(progress, "healthy runs", !global.quiet);
        derived = actions::deriveTolerances(request, progress, interruptToken());
    }
    if (!derived) {
        return reportError(derived.error());
    }
    if (global.json) {
        fmt::print("{}\n", dumpJson(derived->table, 2));
        return 0;
    }
    auto table = numerics::parseToleranceTable(derived->table, args.name);
    if (!table) {
        return reportError(table.error());
    }
    printRules(*table);
    fmt::print("{}\n", args.gradients ? table->gradientDerivation : table->derivation);
    if (!args.out.empty()) {
        fmt::print("wrote {} ({}); use it with --tolerances {}\n", displayPath(args.out),
            table->label(), displayPath(args.out));
    }
    return 0;
}

int runShow(const TolerancesArgs& args, const GlobalOptions& global)
{
    auto table = numerics::resolveToleranceTable(args.table);
    if (!table) {
        return reportError(table.error());
    }
    if (global.json) {
        nlohmann::json j;
        j["table"] = table->label();
        j["source"] = table->source;
        j["derivation"] = table->derivation;
        j["rules"] = nlohmann::json::array();
        for (const auto& r : table->rules) {
            j["rules"].push_back(numerics::toleranceRuleToJson(r));
        }
        j["gradient_derivation"] = table->gradientDerivation;
        j["gradient_rules"] = nlohmann::json::array();
        for (const auto& r : table->gradientRules) {
            j["gradient_rules"].push_back(numerics::toleranceRuleToJson(r));
        }
        fmt::print("{}\n", dumpJson(j, 2));
        return 0;
    }
    fmt::print("{} ({}); the limit on an accumulated error grows {}\n", table->label(),
        displayPath(table->source),
        table->accumulatedGrowth == numerics::DepthGrowth::Linear
            ? "as 1 + depth"
            : (table->accumulatedGrowth == numerics::DepthGrowth::Sqrt ? "as sqrt(1 + depth)"
                                                                       : "not with depth"));
    printRules(*table);
    fmt::print(
        "{}\n", table->derivation.empty() ? "how it was derived: not recorded" : table->derivation);
    fmt::print("gradients: {}\n",
        !table->gradientRules.empty()
            ? (table->gradientDerivation.empty()
                    ? "how the gradient rules were derived: not recorded"
                    : table->gradientDerivation)
            : "no gradient rules: gradient captures are judged by the forward rules");
    return 0;
}

std::function<int()> setupTolerances(CLI::App& app, const GlobalOptions& global)
{
    auto args = std::make_shared<TolerancesArgs>();
    app.require_subcommand(1);
    app.fallthrough();
    CLI::App* derive = app.add_subcommand("derive",
        "derive a tolerance table from healthy runs of checkpoints (reference fp32, target and "
        "inject-mode target per prompt)");
    derive->add_option("checkpoints", args->checkpoints, "healthy checkpoint folders")->required();
    derive
        ->add_option("--precision", args->precisions,
            "target precisions, comma-separated: bf16, fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, "
            "int4, int4-g32")
        ->capture_default_str();
    derive->add_flag("--grad", args->gradients,
        "gradient rules: per prompt an fp64 gradient pass (run --grad) is the reference, each "
        "precision (bf16, fp16, fp32) runs propagated and in inject mode; the base's forward "
        "rules are kept");
    derive->add_option("--runs", args->runs, "prompts per checkpoint and precision")
        ->capture_default_str();
    derive->add_option("--tokens", args->tokens, "prompt length (the model's own greedy text)")
        ->capture_default_str();
    derive->add_option("--seed", args->seed, "picks each prompt's start token")
        ->capture_default_str();
    derive
        ->add_option("--percentile", args->percentile,
            "share of the healthy values each limit covers before the margin (100: the largest)")
        ->capture_default_str();
    derive->add_option("--margin", args->margin, "limit = percentile value × margin")
        ->capture_default_str();
    derive
        ->add_option("--growth", args->growth,
            "how limits grow with depth: auto (the law that flattens the healthy errors best), "
            "sqrt, linear or none")
        ->capture_default_str();
    derive->add_option("--base", args->base,
        "table whose rules are kept for the dtypes not run (default day0-default)");
    derive->add_option("--name", args->name, "the derived table's name")->capture_default_str();
    derive->add_option("--version", args->version, "the derived table's version")
        ->capture_default_str();
    derive->add_option("--out", args->out, "write the table here (JSON)");
    CLI::App* show
        = app.add_subcommand("show", "print a tolerance table's rules and how it was derived");
    show->add_option(
        "table", args->table, "a bundled table name or a JSON file (default day0-default)");
    return [args, &global, derive, show]() {
        if (derive->parsed()) {
            return runDerive(*args, global);
        }
        return runShow(*args, global);
    };
}

const bool kRegistered = registerCommand({ "tolerances",
    "derive a tolerance table from healthy runs, or show one and how it was derived", 65,
    setupTolerances });

} // namespace

} // namespace day0::cli
