#include "panels/runs/run_store_access.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "history/run_json.h"

namespace day0::ui {

namespace {

Result<history::RunStore> openForReading(const std::filesystem::path& file)
{
    history::RunStore::Options options;
    options.createIfMissing = false;
    return history::RunStore::open(file, options);
}

bool fileExists(const std::filesystem::path& file)
{
    std::error_code ec;
    return std::filesystem::exists(file, ec);
}

Result<StoreStamp> stampOf(const history::RunStore& store)
{
    auto count = store.count();
    DAY0_TRY(count);
    history::RunFilter newest;
    newest.limit = 1;
    auto runs = store.list(newest);
    DAY0_TRY(runs);
    return StoreStamp { *count, runs->empty() ? std::int64_t(0) : runs->front().id.value() };
}

} // namespace

RunListing readListing(const std::filesystem::path& file, const history::RunFilter& filter)
{
    RunListing out;
    out.store = displayPath(file);
    if (!fileExists(file)) {
        out.missing = true;
        return out;
    }
    auto store = openForReading(file);
    if (!store) {
        out.error = store.error().message;
        return out;
    }
    auto runs = store->list(filter);
    auto matching = store->count(filter);
    auto models = store->modelNames();
    auto stamp = stampOf(*store);
    for (const Error* error :
        { runs ? nullptr : &runs.error(), matching ? nullptr : &matching.error(),
            models ? nullptr : &models.error(), stamp ? nullptr : &stamp.error() }) {
        if (error) {
            out.error = error->message;
            return out;
        }
    }
    out.runs = std::move(*runs);
    out.matching = *matching;
    out.models = std::move(*models);
    out.stamp = *stamp;
    return out;
}

std::optional<StoreStamp> readStamp(const std::filesystem::path& file)
{
    if (!fileExists(file)) {
        return StoreStamp {};
    }
    auto store = openForReading(file);
    if (!store) {
        return std::nullopt;
    }
    auto stamp = stampOf(*store);
    return stamp ? std::optional(*stamp) : std::nullopt;
}

LoadedRuns loadRuns(const std::filesystem::path& file, const std::vector<RunId>& ids,
    Progress& progress, std::stop_token stop)
{
    LoadedRuns out;
    out.ids = ids;
    if (ids.empty()) {
        return out;
    }
    progress.setTotal(std::int64_t(ids.size()));
    auto store = openForReading(file);
    if (!store) {
        out.error = store.error().message;
        return out;
    }
    std::vector<history::RunRecord> records;
    for (const RunId id : ids) {
        if (stop.stop_requested()) {
            out.error = Error::cancelled().message;
            return out;
        }
        auto record = store->load(id);
        if (!record) {
            out.error = record.error().message;
            return out;
        }
        records.push_back(std::move(*record));
        progress.advance();
    }
    out.properties = records.front().properties;
    out.comparison = std::make_shared<const history::RunComparison>(
        history::compareRuns(records.front(), records.back()));
    if (history::isBenchRun(records.front()) || history::isBenchRun(records.back())) {
        out.bench = std::make_shared<const history::BenchComparison>(
            history::compareBenches(records.front(), records.back()));
    }
    return out;
}

std::pair<int, std::string> deleteStoredRuns(
    const std::filesystem::path& file, const std::vector<RunId>& ids)
{
    auto store = openForReading(file);
    if (!store) {
        return { 0, store.error().message };
    }
    int deleted = 0;
    for (const RunId id : ids) {
        auto removed = store->remove(id);
        if (!removed) {
            return { deleted, removed.error().message };
        }
        deleted += *removed ? 1 : 0;
    }
    return { deleted, {} };
}

std::string exportStoredRun(
    const std::filesystem::path& file, RunId id, const std::filesystem::path& target)
{
    auto store = openForReading(file);
    if (!store) {
        return store.error().message;
    }
    auto run = store->load(id);
    if (!run) {
        return run.error().message;
    }
    auto written = writeFileAtomic(target, dumpJson(history::toJson(*run), 2) + "\n");
    return written ? std::string() : written.error().message;
}

} // namespace day0::ui
