#include "pipeline/pipeline.h"

#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <set>

namespace day0::pipeline {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

std::string stepStatusName(StepStatus status)
{
    switch (status) {
    case StepStatus::Pending:
        return "pending";
    case StepStatus::Running:
        return "running";
    case StepStatus::Passed:
        return "passed";
    case StepStatus::Failed:
        return "failed";
    case StepStatus::Skipped:
        return "skipped";
    case StepStatus::Error:
        return "error";
    }
    return "unknown";
}

bool PipelineResult::passed() const
{
    for (const auto& s : steps) {
        if (s.status == StepStatus::Failed || s.status == StepStatus::Error) {
            return false;
        }
    }
    return !cancelled;
}

int PipelineResult::exitCode() const
{
    bool failed = false;
    for (const auto& s : steps) {
        if (s.status == StepStatus::Error) {
            return 2;
        }
        failed = failed || s.status == StepStatus::Failed;
    }
    return failed || cancelled ? 1 : 0;
}

PipelineResult runPipeline(const std::string& name, const std::vector<Step>& steps,
    Progress& progress, std::stop_token stop, const PipelineObserver& observer,
    Progress* stepProgress)
{
    const auto start = std::chrono::steady_clock::now();
    PipelineResult result;
    result.name = name;
    progress.setTotal(std::int64_t(steps.size()));
    progress.setDone(0);
    std::set<std::string> passed;
    std::mutex logMutex;

    for (const auto& step : steps) {
        StepRecord record;
        record.id = step.id;
        record.title = step.title;

        std::string missing;
        for (const auto& need : step.needs) {
            if (!passed.count(need)) {
                missing += (missing.empty() ? "" : ", ") + need;
            }
        }
        if (stop.stop_requested()) {
            result.cancelled = true;
            record.status = StepStatus::Skipped;
            record.reason = "cancelled";
        } else if (!missing.empty()) {
            record.status = StepStatus::Skipped;
            record.reason = fmt::format("needs {} to pass first", missing);
        } else {
            record.status = StepStatus::Running;
            progress.setStage(step.title);
            if (observer.stepStarted) {
                observer.stepStarted(record);
            }
            const auto stepStart = std::chrono::steady_clock::now();
            Progress ownProgress;
            Progress& current = stepProgress ? *stepProgress : ownProgress;
            current.setTotal(0);
            current.setDone(0);
            current.setStage(step.title);
            StepReport partial;
            StepContext context { current, stop,
                [&](const std::string& line) {
                    std::lock_guard lock(logMutex);
                    record.log.push_back(line);
                },
                &partial };
            Result<StepReport> outcome = Error::internal("step did not run");
            try {
                outcome = step.run(context);
            } catch (const std::exception& e) {
                outcome = Error::internal(fmt::format("step threw: {}", e.what()));
            }
            record.duration = Seconds(secondsSince(stepStart));
            if (outcome && outcome->skipped) {
                record.status = StepStatus::Skipped;
                record.reason = outcome->summary;
                record.report = std::move(outcome.value());
            } else if (outcome) {
                record.status = StepStatus::Passed;
                record.report = std::move(outcome.value());
                passed.insert(step.id);
            } else if (outcome.error().code == ErrorCode::CheckFailed) {
                record.status = StepStatus::Failed;
                record.reason = outcome.error().message;
                record.report = std::move(partial);
            } else if (outcome.error().code == ErrorCode::Cancelled) {
                record.status = StepStatus::Skipped;
                record.reason = "cancelled";
                result.cancelled = true;
            } else {
                record.status = StepStatus::Error;
                record.reason = outcome.error().message;
                record.report = std::move(partial);
            }
        }
        progress.advance();
        if (observer.stepFinished) {
            observer.stepFinished(record);
        }
        result.steps.push_back(std::move(record));
    }
    result.duration = Seconds(secondsSince(start));
    return result;
}

} // namespace day0::pipeline
