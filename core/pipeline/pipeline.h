#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "base/units.h"

#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::pipeline {

/// Outcome of one step.
enum class StepStatus {
    Pending,
    Running,
    Passed,
    Failed, ///< a check failed (the validation fails, exit 1)
    Skipped, ///< not run, with the reason (e.g. a step it needs failed)
    Error, ///< the step could not run (bad input, internal error)
};

/// "passed", "failed", ...
std::string stepStatusName(StepStatus status);

/// What a step reports besides its status.
struct StepReport {
    std::string summary; ///< one line for tables ("9 shards, 4.1 GiB, all hashes match")
    std::vector<std::string> details; ///< further lines (per-tensor problems, notes)
    std::map<std::string, double> metrics; ///< figures for the report and the run store
    std::vector<std::string> artifacts; ///< files the step wrote (dumps, traces), relative paths
    /// The step chose not to run (a feature missing from this build): it ends Skipped with
    /// `summary` as the reason, and steps that need it are skipped too.
    bool skipped = false;
};

/// The full record of a step after the pipeline ran.
struct StepRecord {
    std::string id; ///< "verify", "shard", ...
    std::string title; ///< "Weight acquisition and integrity"
    StepStatus status = StepStatus::Pending;
    Seconds duration;
    StepReport report;
    std::string reason; ///< why it failed or was skipped
    std::vector<std::string> log; ///< messages the step logged, in order
};

/// Passed to a step while it runs.
struct StepContext {
    Progress& progress;
    std::stop_token stop;
    std::function<void(const std::string&)> log; ///< appends to the step's log (thread-safe)
    /// Details and metrics gathered so far; kept in the record when the step fails, so a failed
    /// check still shows what it found (a step may also return a copy of it on success).
    StepReport* partial = nullptr;
};

/// A step: returns its report on success; Error::checkFailed for a failed check, any other
/// Error when it could not run.
using StepFunction = std::function<Result<StepReport>(StepContext&)>;

/// A step declaration.
struct Step {
    std::string id;
    std::string title;
    std::vector<std::string> needs; ///< ids of steps that must have passed first
    StepFunction run;
};

/// Observes a pipeline run (the GUI's pipeline panel, the CLI's progress lines). Called on the
/// thread that runs the pipeline.
struct PipelineObserver {
    std::function<void(const StepRecord&)> stepStarted;
    std::function<void(const StepRecord&)> stepFinished;
};

/// The result of a pipeline run.
struct PipelineResult {
    std::string name; ///< "day0 validate kimi-k2"
    std::vector<StepRecord> steps;
    Seconds duration;
    bool cancelled = false;

    /// True when no step failed or errored (skipped steps do not fail a run).
    [[nodiscard]] bool passed() const;
    /// Exit code per DESIGN.md: 0 passed, 1 a check failed, 2 a step could not run.
    [[nodiscard]] int exitCode() const;
};

/// Runs steps in order. A step whose needs did not all pass is skipped with the reason; after a
/// cancel the remaining steps are skipped as cancelled. Progress counts finished steps.
/// `stepProgress`, when given, is the Progress each step reports to (reset before every step), so
/// a front end can poll the running step's own progress.
PipelineResult runPipeline(const std::string& name, const std::vector<Step>& steps,
    Progress& progress, std::stop_token stop, const PipelineObserver& observer = {},
    Progress* stepProgress = nullptr);

} // namespace day0::pipeline
