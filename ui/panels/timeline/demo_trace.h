#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/trace.h"

#include <filesystem>
#include <stop_token>

namespace day0::ui {

/// Where the demo's shrunk Kimi-K2 checkpoint lives: the shared cache of shrunk checkpoints
/// (exec::shrunkCheckpointPath with exec::demoShrinkOptions), which the precision and topology
/// panels' demos use too.
std::filesystem::path demoCheckpointPath();

/// The CPU trace of the demo run, what `day0 shrink kimi-k2 --out DIR --layers 8` followed by
/// `day0 run DIR --ids … --tokens 8 --trace FILE` records: the checkpoint is shrunk first when
/// the cache lacks it, then run on the CPU reference (fp32) and in emulated bf16 with the
/// tracer active, so every scope the engine opens is recorded with the run's phases. Progress
/// names the stage; cancellable between stages and inside the shrink and the runs.
Result<profile::Trace> demoRunTrace(Progress& progress, std::stop_token stop);

} // namespace day0::ui
