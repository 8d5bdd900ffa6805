// day0 demo: the workbench's embedded default headless (DESIGN.md §6) — Kimi-K2 planned on
// 32 x 8 H200, the shrunk demo checkpoint verified, run in emulated bf16 against fp32, its CPU
// timeline, and the run history — each step recorded as its own verb records it, once.
#include "actions/demo.h"
#include "base/json_util.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <optional>

namespace day0::cli {

namespace {

int runDemoVerb(const GlobalOptions& global)
{
    std::size_t index = 0;
    const auto observer = [&](const actions::DemoStep& step) {
        ++index;
        if (global.json) {
            return;
        }
        // Above the progress bar (on a terminal), one line per step as it ends.
        if (!global.quiet && ::isatty(::fileno(stderr)) != 0) {
            fmt::print(stderr, "\r\033[K");
        }
        fmt::print(
            "[{}/6] {:<10} {}{}\n", index, step.name, step.ok ? "" : "FAILED: ", step.summary);
        std::fflush(stdout);
    };
    Progress progress;
    Result<actions::DemoReport> report = Error::internal("not run");
    {
        ProgressBar bar(progress, "demo", !global.quiet && !global.json);
        report = actions::runDemo(progress, interruptToken(), observer);
    }
    if (!report) {
        return reportError(report.error());
    }
    if (global.json) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& s : report->steps) {
            steps.push_back({ { "step", s.name }, { "ok", s.ok }, { "summary", s.summary },
                { "run_id", s.runId ? nlohmann::json(*s.runId) : nlohmann::json(nullptr) } });
        }
        fmt::print(
            "{}\n", dumpJson(nlohmann::json { { "ok", report->ok() }, { "steps", steps } }, 2));
    } else {
        fmt::print("{}\n",
            report->ok() ? "demo: every step ok; open the workbench (day0-workbench) to see them"
                         : "demo: a check FAILED (see above)");
    }
    return report->ok() ? 0 : 1;
}

const bool registered = registerCommand({ "demo",
    "the embedded demo headless: plan Kimi-K2, verify, run bf16 against fp32, timeline, history",
    95, [](CLI::App&, const GlobalOptions& global) -> std::function<int()> {
        return [&global] { return runDemoVerb(global); };
    } });

} // namespace

} // namespace day0::cli
