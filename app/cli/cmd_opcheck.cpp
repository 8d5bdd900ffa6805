// day0 opcheck <model>: every operator the model needs, on random inputs with its shapes, in a
// target precision against fp64, plus which operators the backend implements and how. With
// --backend <plugin> the target runs on that backend and its coverage (native or fallback) is
// listed, even when its device is absent.
#include "base/json_util.h"
#include "command.h"
#include "exec/op_check.h"
#include "extend/plugin_registry.h"
#include "interrupt.h"
#include "model/config_reader.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace day0::cli {

namespace {

struct OpCheckArgs {
    std::string model;
    std::string precision = "bf16";
    std::string opPrecision;
    std::string fp8Scaling = "tensor";
    std::int64_t tokens = 16;
    std::int64_t maxOutputs = 4096;
    std::string tolerances;
    std::string backend = "cpu";
    int device = 0;
};

void printCoverage(const std::string& backend, const std::vector<exec::CoverageRow>& rows)
{
    Table t({ "operator", "used for", backend },
        { Table::Align::Left, Table::Align::Left, Table::Align::Left });
    int native = 0;
    for (const auto& r : rows) {
        t.addRow({ std::string(exec::backendOpName(r.op)), r.use, r.implementation });
        native += r.native ? 1 : 0;
    }
    fmt::print("coverage on {}: {} of {} operators native, {} fall back to day0-cpu\n{}", backend,
        native, rows.size(), int(rows.size()) - native, t.render());
}

std::string sci(double v)
{
    return std::isfinite(v) ? fmt::format("{:.2e}", v) : (std::isnan(v) ? "nan" : "inf");
}

int runOpCheckCommand(const OpCheckArgs& a, const GlobalOptions& global)
{
    if (auto refused = refusePartial("opcheck", a.model, global)) {
        return *refused;
    }
    auto spec = model::loadModel(a.model);
    if (!spec) {
        return reportError(spec.error());
    }
    auto plan = exec::parsePrecisionPlan(a.precision, a.opPrecision);
    if (!plan) {
        return reportError(plan.error());
    }
    const auto scaling = exec::parseFp8Scaling(a.fp8Scaling);
    if (!scaling) {
        return reportError(scaling.error());
    }
    plan->fp8Scaling = *scaling;
    auto table = numerics::resolveToleranceTable(a.tolerances);
    if (!table) {
        return reportError(table.error());
    }
    extend::PluginRegistry registry;
    auto choice = extend::chooseBackend(registry, a.backend, a.device);
    if (!choice) {
        return reportError(choice.error());
    }
    if (choice->unavailable) {
        // The coverage is known from the plugin's manifest; the numbers need its device.
        const auto coverage = exec::backendCoverage(*spec, choice->declaredOps);
        if (global.json) {
            fmt::print("{}\n",
                dumpJson(nlohmann::json { { "model", spec->name }, { "backend", choice->name },
                             { "available", false }, { "error", choice->unavailable->message },
                             { "coverage", exec::coverageToJson(coverage) } },
                    2));
        } else {
            printCoverage(choice->name, coverage);
        }
        return reportError(*choice->unavailable);
    }
    exec::OpCheckOptions o;
    o.target = *plan;
    if (choice->name != "day0-cpu") {
        o.backend = choice->backend.get();
    }
    o.tokens = a.tokens;
    o.maxOutputs = a.maxOutputs;
    o.table = &*table;
    Progress progress;
    std::optional<ProgressBar> bar;
    bar.emplace(progress, "opcheck", !global.quiet);
    auto report = exec::runOpCheck(*spec, o, progress, interruptToken());
    bar.reset();
    if (!report) {
        return reportError(report.error());
    }
    const int code = report->failCount > 0 ? 1 : 0;
    if (global.json) {
        fmt::print("{}\n", dumpJson(exec::opCheckToJson(*report), 2));
        return code;
    }
    fmt::print("{}: operators in {} against fp64, {} rows of random inputs [{}]\n", report->model,
        report->precision, a.tokens, report->table);
    if (!report->device.empty()) {
        fmt::print("backend {} on {}\n", report->backend, report->device);
    }
    fmt::print("\n");
    Table t(
        { "operator", "shape", "prec", "rel_l2", "max_abs", "floor", "verdict", report->backend },
        { Table::Align::Left, Table::Align::Left, Table::Align::Left, Table::Align::Right,
            Table::Align::Right, Table::Align::Right, Table::Align::Left, Table::Align::Left });
    for (const auto& r : report->rows) {
        std::string verdict(numerics::verdictStatusName(r.verdict.status));
        if (r.expertAgreement) {
            verdict += fmt::format(" ({:.0f}% same experts)", 100.0 * *r.expertAgreement);
        }
        t.addRow({ r.op, r.shape, std::string(exec::precisionName(r.mode)), sci(r.metrics.relL2),
            sci(r.metrics.maxAbs),
            std::isfinite(r.verdict.floorRatio) ? fmt::format("{:.1f}×", r.verdict.floorRatio)
                                                : "-",
            verdict, r.implementation });
    }
    fmt::print("{}", t.render());
    if (!report->missing.empty()) {
        fmt::print("\nmissing on day0-cpu: {}\n", fmt::join(report->missing, "; "));
    }
    if (!report->coverage.empty()) {
        fmt::print("\n");
        printCoverage(report->backend, report->coverage);
    }
    for (const auto& r : report->rows) {
        if (r.verdict.status == numerics::VerdictStatus::Fail
            || r.verdict.status == numerics::VerdictStatus::Warn) {
            fmt::print("{}: {}\n", r.op, r.verdict.reason);
        }
    }
    fmt::print("\nverdicts: {} pass, {} warn, {} fail\n", report->passCount, report->warnCount,
        report->failCount);
    return code;
}

const bool registered = registerCommand({ "opcheck",
    "check every operator of a model in a target precision against fp64, and the backend's "
    "coverage",
    61, [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto a = std::make_shared<OpCheckArgs>();
        app.add_option("model", a->model, "model folder, config.json, checkpoint or bundled name")
            ->required();
        app.add_option("--precision", a->precision,
            "target: bf16 (default), fp16, fp8, fp8-e5m2, int8, nvfp4, mxfp4, int4, int4-g32, "
            "fp32");
        app.add_option("--op-precision", a->opPrecision, "per op kind, e.g. attention=fp32");
        app.add_option(
            "--fp8-scaling", a->fp8Scaling, "fp8 scales: tensor (default), block or channel");
        app.add_option("--tokens", a->tokens, "rows of every random activation (default 16)");
        app.add_option(
            "--max-outputs", a->maxOutputs, "cap on output features per GEMM (default 4096)");
        app.add_option("--tolerances", a->tolerances, "tolerance table (default day0-default)");
        app.add_option("--backend", a->backend,
            "where the target runs: cpu (default) or a backend plugin such as cuda");
        app.add_option("--device", a->device, "device index for a GPU backend (default 0)");
        return [a, &global] { return runOpCheckCommand(*a, global); };
    } });

} // namespace

} // namespace day0::cli
