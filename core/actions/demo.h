#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// Where the demo's shrunk Kimi-K2 checkpoint lives: the shared cache of shrunk checkpoints
/// (exec::shrunkCheckpointPath with exec::demoShrinkOptions), which the precision and topology
/// panels' demos use too.
std::filesystem::path demoCheckpointPath();

/// The prompt of the embedded demo as token ids (the shrunk checkpoints carry no tokenizer).
std::vector<std::int64_t> demoPromptIds();

/// The CPU trace of the demo run, what `day0 shrink kimi-k2 --out DIR --layers 8` followed by
/// `day0 run DIR --ids … --tokens 8 --trace FILE` records: the checkpoint is shrunk first when
/// the cache lacks it, then run on the CPU reference (fp32) and in emulated bf16 with the
/// tracer active, so every scope the engine opens is recorded with the run's phases. Progress
/// names the stage; cancellable between stages and inside the shrink and the runs.
Result<profile::Trace> demoRunTrace(Progress& progress, std::stop_token stop);

/// One step of the headless demo and what it found.
struct DemoStep {
    std::string name; ///< "plan", "checkpoint", "verify", "precision", "timeline", "history"
    std::string summary; ///< one line, with the figures
    bool ok = true; ///< false: a check of this step failed (the summary says which)
    std::optional<std::int64_t> runId; ///< the run it recorded (or the same earlier one)
};

/// The embedded default without the GUI (`day0 demo`, DESIGN.md §6): Kimi-K2 planned for
/// training on 32 × 8 H200, the shrunk Kimi-K2-architecture checkpoint made (once, in the
/// cache) and verified against its manifest, run in emulated bf16 against the fp32 reference
/// with the comparison's verdicts, the CPU timeline of that run, and the runs in the store.
/// Each step records what the CLI verb of the same work records (actions/records,
/// plan/plan_record), through history::recordRunOnce as the workbench's demo does: an unchanged
/// plan is not recorded twice; the measured steps are new runs each time. `onStep` gets each
/// step as it ends. Cancellable; an error of a step ends the demo with that error.
struct DemoReport {
    std::vector<DemoStep> steps;
    [[nodiscard]] bool ok() const;
};
Result<DemoReport> runDemo(Progress& progress, std::stop_token stop,
    const std::function<void(const DemoStep&)>& onStep = {});

} // namespace day0::actions
