// RunStore: opening, writing and deleting runs. Queries are in run_store_query.cpp.
#include "history/run_store.h"

#include "base/file_util.h"
#include "history/run_store_impl.h"
#include "history/schema.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <system_error>

namespace day0::history {

namespace {

constexpr const char* kInsertRun
    = "INSERT INTO runs (uuid, kind, created_us, label, status, model_name, model_fingerprint, "
      "plan, precision, backend, host, software_version, command, message, duration_s) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
constexpr const char* kInsertLayer
    = "INSERT INTO layer_metrics (run_id, seq, anchor_id, layer, submodule_id, metric_id, value) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

std::string hostName()
{
    std::array<char, 256> buffer {};
    if (::gethostname(buffer.data(), buffer.size() - 1) != 0) {
        return {};
    }
    return buffer.data();
}

Result<void> insertChildren(
    const detail::StoreState& impl, std::int64_t runId, const RunRecord& record)
{
    if (!record.metrics.empty()) {
        auto stmt = impl.statement(
            "INSERT INTO metrics (run_id, seq, name, value, unit) VALUES (?1, ?2, ?3, ?4, ?5)");
        DAY0_TRY(stmt);
        for (std::size_t i = 0; i < record.metrics.size(); ++i) {
            const Metric& m = record.metrics[i];
            (*stmt)
                ->bind(1, runId)
                .bind(2, std::int64_t(i))
                .bind(3, m.name)
                .bind(4, m.value)
                .bind(5, m.unit);
            DAY0_TRY((*stmt)->run());
        }
    }
    if (!record.properties.empty()) {
        auto stmt = impl.statement(
            "INSERT INTO properties (run_id, seq, key, value) VALUES (?1, ?2, ?3, ?4)");
        DAY0_TRY(stmt);
        for (std::size_t i = 0; i < record.properties.size(); ++i) {
            const Property& p = record.properties[i];
            (*stmt)->bind(1, runId).bind(2, std::int64_t(i)).bind(3, p.key).bind(4, p.value);
            DAY0_TRY((*stmt)->run());
        }
    }
    if (!record.memory.empty()) {
        auto stmt
            = impl.statement("INSERT INTO memory (run_id, seq, rank, stage, component, bytes) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        DAY0_TRY(stmt);
        for (std::size_t i = 0; i < record.memory.size(); ++i) {
            const MemoryEntry& e = record.memory[i];
            (*stmt)->bind(1, runId).bind(2, std::int64_t(i)).bind(3, e.rank).bind(4, e.stage);
            (*stmt)->bind(5, e.component).bind(6, e.bytes.value);
            DAY0_TRY((*stmt)->run());
        }
    }
    if (!record.artifacts.empty()) {
        auto stmt = impl.statement("INSERT INTO artifacts (run_id, seq, kind, path, size, sha256) "
                                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        DAY0_TRY(stmt);
        for (std::size_t i = 0; i < record.artifacts.size(); ++i) {
            const Artifact& a = record.artifacts[i];
            (*stmt)->bind(1, runId).bind(2, std::int64_t(i)).bind(3, a.kind).bind(4, a.path);
            if (a.size) {
                (*stmt)->bind(5, a.size->value);
            } else {
                (*stmt)->bindNull(5);
            }
            (*stmt)->bind(6, a.sha256);
            DAY0_TRY((*stmt)->run());
        }
    }
    if (!record.events.empty()) {
        auto stmt = impl.statement("INSERT INTO events (run_id, seq, time_us, level, message) "
                                   "VALUES (?1, ?2, ?3, ?4, ?5)");
        DAY0_TRY(stmt);
        for (std::size_t i = 0; i < record.events.size(); ++i) {
            const Event& e = record.events[i];
            (*stmt)
                ->bind(1, runId)
                .bind(2, std::int64_t(i))
                .bind(3, e.time.time_since_epoch().count());
            (*stmt)->bind(4, levelName(e.level)).bind(5, e.message);
            DAY0_TRY((*stmt)->run());
        }
    }
    return success();
}

// Maps the record's interned names onto rows of the shared `names` table. Names met for the
// first time in this transaction are collected in `pending`.
Result<std::vector<std::int64_t>> storeNames(
    const detail::StoreState& state, const LayerMetrics& layers, detail::NameIds& pending)
{
    std::vector<bool> used(layers.names().size(), false);
    for (const auto& row : layers.rows()) {
        used[row.anchor] = used[row.subModule] = used[row.metric] = true;
    }
    std::vector<std::int64_t> ids(layers.names().size(), 0);
    Statement* select = nullptr;
    Statement* insert = nullptr;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (!used[i]) {
            continue;
        }
        const std::string& text = layers.names()[i];
        if (const auto known = state.committedNames.find(text);
            known != state.committedNames.end()) {
            ids[i] = known->second;
            continue;
        }
        if (const auto seen = pending.find(text); seen != pending.end()) {
            ids[i] = seen->second;
            continue;
        }
        if (!select) {
            auto s = state.statement("SELECT id FROM names WHERE text = ?1");
            DAY0_TRY(s);
            auto n = state.statement("INSERT INTO names (text) VALUES (?1)");
            DAY0_TRY(n);
            select = *s;
            insert = *n;
        }
        select->bind(1, text);
        auto found = select->step();
        DAY0_TRY(found);
        if (*found) {
            ids[i] = select->columnInt(0);
        } else {
            insert->bind(1, text);
            DAY0_TRY(insert->run());
            ids[i] = state.db.lastInsertRowId();
        }
        select->reset();
        pending.emplace(text, ids[i]);
    }
    return ids;
}

Result<void> insertLayers(const detail::StoreState& impl, std::int64_t runId,
    const LayerMetrics& layers, detail::NameIds& pending)
{
    if (layers.empty()) {
        return success();
    }
    auto ids = storeNames(impl, layers, pending);
    DAY0_TRY(ids);
    auto stmt = impl.statement(kInsertLayer);
    DAY0_TRY(stmt);
    Statement& insert = **stmt;
    insert.bind(1, runId); // stays bound: run() resets without clearing bindings
    const auto& rows = layers.rows();
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& row = rows[i];
        insert.bind(2, std::int64_t(i)).bind(3, (*ids)[row.anchor]).bind(4, row.layer);
        insert.bind(5, (*ids)[row.subModule]).bind(6, (*ids)[row.metric]).bind(7, row.value);
        DAY0_TRY(insert.run());
    }
    return success();
}

Result<RunId> writeRun(
    const detail::StoreState& impl, const RunRecord& record, detail::NameIds& pending)
{
    const RunInfo& info = record.info;
    if (!info.uuid.empty()) {
        auto existing = impl.statement("SELECT id FROM runs WHERE uuid = ?1");
        DAY0_TRY(existing);
        (*existing)->bind(1, info.uuid);
        auto found = (*existing)->step();
        DAY0_TRY(found);
        (*existing)->reset();
        if (*found) {
            return Error::badInput(fmt::format("{}: a run with uuid {} is stored already",
                displayPath(impl.db.file()), info.uuid));
        }
    }
    auto stmt = impl.statement(kInsertRun);
    DAY0_TRY(stmt);
    Statement& insert = **stmt;
    const Timestamp created = info.created == Timestamp {} ? now() : info.created;
    insert.bind(1, info.uuid.empty() ? makeUuid() : info.uuid)
        .bind(2, toString(info.kind))
        .bind(3, std::int64_t(created.time_since_epoch().count()))
        .bind(4, info.label)
        .bind(5, toString(info.status))
        .bind(6, info.modelName)
        .bind(7, info.modelFingerprint)
        .bind(8, info.plan)
        .bind(9, info.precision)
        .bind(10, info.backend)
        .bind(11, info.host.empty() ? hostName() : info.host)
        .bind(12, info.softwareVersion)
        .bind(13, info.command)
        .bind(14, info.message);
    if (info.duration) {
        insert.bind(15, info.duration->value);
    } else {
        insert.bindNull(15);
    }
    DAY0_TRY(insert.run());
    const std::int64_t runId = impl.db.lastInsertRowId();
    DAY0_TRY(insertChildren(impl, runId, record));
    DAY0_TRY(insertLayers(impl, runId, record.layers, pending));
    return RunId(runId);
}

} // namespace

Result<Statement*> detail::StoreState::statement(const std::string& sql) const
{
    auto it = statements.find(sql);
    if (it == statements.end()) {
        auto prepared = db.prepare(sql, true);
        DAY0_TRY(prepared);
        it = statements.emplace(sql, std::move(prepared).value()).first;
    } else {
        it->second.reset();
    }
    return &it->second;
}

RunStore::RunStore(std::unique_ptr<detail::StoreState> impl)
    : m_state(std::move(impl))
{
}

RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

Result<RunStore> RunStore::open(const std::filesystem::path& file, const Options& options)
{
    std::error_code ec;
    if (options.createIfMissing && file.has_parent_path()) {
        std::filesystem::create_directories(file.parent_path(), ec);
        if (ec) {
            return Error::badInput(fmt::format(
                "{}: cannot create the store's folder: {}", displayPath(file), ec.message()));
        }
    }
    if (!options.createIfMissing && !std::filesystem::exists(file, ec)) {
        return Error::badInput(fmt::format("{}: no run store at this path", displayPath(file)));
    }
    if (std::filesystem::is_directory(file, ec)) {
        return Error::badInput(
            fmt::format("{}: is a folder, expected a run store file", displayPath(file)));
    }
    const auto mode
        = options.createIfMissing ? Database::Open::CreateIfMissing : Database::Open::ExistingOnly;
    auto db = openStoreDatabase(file, mode, options.busyTimeout);
    DAY0_TRY(db);
    auto impl = std::make_unique<detail::StoreState>();
    impl->db = std::move(db).value();
    return RunStore(std::move(impl));
}

const std::filesystem::path& RunStore::file() const { return m_state->db.file(); }

Result<RunId> RunStore::commit(const RunRecord& record)
{
    auto ids = commitAll(std::span(&record, 1));
    DAY0_TRY(ids);
    return ids->front();
}

Result<std::vector<RunId>> RunStore::commitAll(std::span<const RunRecord> records)
{
    for (const RunRecord& record : records) {
        auto valid = record.validate();
        if (!valid) {
            return valid.error().withContext(displayPath(file()));
        }
    }
    std::lock_guard lock(m_state->mutex);
    auto transaction = Transaction::begin(m_state->db);
    DAY0_TRY(transaction);
    std::vector<RunId> ids;
    ids.reserve(records.size());
    detail::NameIds pending;
    for (const RunRecord& record : records) {
        auto id = writeRun(*m_state, record, pending);
        DAY0_TRY(id);
        ids.push_back(*id);
    }
    DAY0_TRY(transaction->commit());
    m_state->committedNames.merge(pending);
    return ids;
}

Result<bool> RunStore::remove(RunId id)
{
    std::lock_guard lock(m_state->mutex);
    auto transaction = Transaction::begin(m_state->db);
    DAY0_TRY(transaction);
    auto stmt = m_state->statement("DELETE FROM runs WHERE id = ?1");
    DAY0_TRY(stmt);
    (*stmt)->bind(1, id.value());
    DAY0_TRY((*stmt)->run());
    const bool removed = m_state->db.changes() > 0;
    DAY0_TRY(transaction->commit());
    return removed;
}

Result<void> RunStore::checkIntegrity() const
{
    std::lock_guard lock(m_state->mutex);
    const auto failed = [&](const std::string& what) {
        return Error::checkFailed(
            fmt::format("{}: integrity check failed: {}", displayPath(file()), what));
    };
    // integrity_check reports damage as rows; foreign_key_check reports one row per orphan.
    // Either may also stop with an error when the damage is bad enough.
    const std::pair<const char*, bool> checks[]
        = { { "PRAGMA integrity_check", true }, { "PRAGMA foreign_key_check", false } };
    for (const auto& [pragma, rowsAreMessages] : checks) {
        auto stmt = m_state->db.prepare(pragma);
        if (!stmt) {
            return failed(stmt.error().message);
        }
        std::vector<std::string> problems;
        for (;;) {
            auto row = stmt->step();
            if (!row) {
                return failed(row.error().message);
            }
            if (!*row) {
                break;
            }
            std::string text(stmt->columnText(0));
            if (!rowsAreMessages) {
                text = fmt::format("row {} of table '{}' refers to a missing {}",
                    stmt->columnInt(1), text, stmt->columnText(2));
            }
            if (text != "ok" && problems.size() < 5) {
                problems.push_back(std::move(text));
            }
        }
        if (!problems.empty()) {
            std::string joined;
            for (const auto& p : problems) {
                joined += joined.empty() ? p : "; " + p;
            }
            return failed(joined);
        }
    }
    return success();
}

} // namespace day0::history
