#include "history/recording.h"

#include "history/run_store.h"

#include <cstdlib>
#include <mutex>

namespace day0::history {

namespace {

std::mutex& optionsMutex()
{
    static std::mutex mutex;
    return mutex;
}

RecordingOptions& options()
{
    static RecordingOptions current;
    return current;
}

std::filesystem::path absoluteEnv(const char* name)
{
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return {};
    }
    std::filesystem::path path(value);
    // The XDG base directory specification says relative paths are to be ignored.
    return path.is_absolute() ? path : std::filesystem::path();
}

} // namespace

void setRecordingOptions(RecordingOptions newOptions)
{
    std::lock_guard lock(optionsMutex());
    options() = std::move(newOptions);
}

RecordingOptions recordingOptions()
{
    std::lock_guard lock(optionsMutex());
    return options();
}

std::filesystem::path defaultStorePath()
{
    auto base = absoluteEnv("XDG_DATA_HOME");
    if (base.empty()) {
        const auto home = absoluteEnv("HOME");
        base = (home.empty() ? std::filesystem::path(".") : home) / ".local" / "share";
    }
    return base / "day0" / "runs.sqlite";
}

std::filesystem::path storePath()
{
    const RecordingOptions current = recordingOptions();
    if (!current.store.empty()) {
        return current.store;
    }
    if (const char* env = std::getenv("DAY0_STORE"); env != nullptr && *env != '\0') {
        return env;
    }
    return defaultStorePath();
}

Result<std::optional<RunId>> recordRun(const RunRecord& record)
{
    const RecordingOptions current = recordingOptions();
    if (!current.enabled) {
        return std::optional<RunId>();
    }
    auto store = RunStore::open(storePath());
    DAY0_TRY(store);
    RunId id;
    if (record.info.softwareVersion.empty() || record.info.command.empty()) {
        RunRecord filled = record;
        if (filled.info.softwareVersion.empty()) {
            filled.info.softwareVersion = current.softwareVersion;
        }
        if (filled.info.command.empty()) {
            filled.info.command = current.command;
        }
        auto committed = store->commit(filled);
        DAY0_TRY(committed);
        id = *committed;
    } else {
        auto committed = store->commit(record);
        DAY0_TRY(committed);
        id = *committed;
    }
    return std::optional<RunId>(id);
}

Result<std::optional<Recorded>> recordRunOnce(const RunRecord& record)
{
    if (!recordingOptions().enabled) {
        return std::optional<Recorded>();
    }
    const auto file = storePath();
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
        auto store = RunStore::open(file);
        DAY0_TRY(store);
        RunFilter filter;
        filter.kind = record.info.kind;
        filter.model = record.info.modelName; // a substring match: the exact name is looked for
        filter.limit = 16;
        auto runs = store->list(filter);
        DAY0_TRY(runs);
        for (const RunInfo& info : *runs) {
            if (info.modelName != record.info.modelName) {
                continue;
            }
            auto newest = store->load(info.id, !record.layers.empty());
            DAY0_TRY(newest);
            if (sameResult(*newest, record)) {
                return std::optional(Recorded { info.id, false });
            }
            break;
        }
    }
    auto id = recordRun(record);
    DAY0_TRY(id);
    return *id ? std::optional(Recorded { **id, true }) : std::optional<Recorded>();
}

} // namespace day0::history
