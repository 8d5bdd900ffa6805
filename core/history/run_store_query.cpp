// RunStore: reading runs (list, count, load, resolve).
#include "base/file_util.h"
#include "history/run_store.h"
#include "history/run_store_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <unordered_map>
#include <variant>

namespace day0::history {

namespace detail {

const char* const kInfoColumns
    = "id, uuid, kind, created_us, label, status, model_name, model_fingerprint, plan, precision, "
      "backend, host, software_version, command, message, duration_s, "
      "(SELECT value FROM properties WHERE run_id = runs.id AND key = 'tool' ORDER BY seq "
      "LIMIT 1)";

RunInfo readInfo(const Statement& row)
{
    RunInfo info;
    info.id = RunId(row.columnInt(0));
    info.uuid = row.columnText(1);
    // The CHECK constraints of the schema keep kind and status to the known names.
    info.kind = parseRunKind(row.columnText(2)).value();
    info.created = Timestamp(std::chrono::microseconds(row.columnInt(3)));
    info.label = row.columnText(4);
    info.status = parseRunStatus(row.columnText(5)).value();
    info.modelName = row.columnText(6);
    info.modelFingerprint = row.columnText(7);
    info.plan = row.columnText(8);
    info.precision = row.columnText(9);
    info.backend = row.columnText(10);
    info.host = row.columnText(11);
    info.softwareVersion = row.columnText(12);
    info.command = row.columnText(13);
    info.message = row.columnText(14);
    if (!row.columnIsNull(15)) {
        info.duration = Seconds(row.columnReal(15));
    }
    if (!row.columnIsNull(16)) {
        info.tool = row.columnText(16);
    }
    return info;
}

} // namespace detail

namespace {

// The WHERE clause of a filter and the values to bind to it, in order.
struct Where {
    std::string sql;
    std::vector<std::variant<std::int64_t, std::string>> values;

    void add(const char* condition, std::variant<std::int64_t, std::string> value)
    {
        sql += sql.empty() ? " WHERE " : " AND ";
        sql += condition;
        values.push_back(std::move(value));
    }
    /// A condition with `count` placeholders that all take the same value.
    void addRepeated(const std::string& condition, const std::string& value, int count)
    {
        sql += sql.empty() ? " WHERE " : " AND ";
        sql += condition;
        values.insert(values.end(), std::size_t(count), value);
    }
    void bind(Statement& stmt) const
    {
        for (std::size_t i = 0; i < values.size(); ++i) {
            std::visit([&](const auto& v) { stmt.bind(int(i + 1), v); }, values[i]);
        }
    }
};

Where whereFor(const RunFilter& filter)
{
    Where where;
    if (!filter.model.empty()) {
        where.add("instr(lower(model_name), lower(?)) > 0", filter.model);
    }
    if (filter.kind) {
        where.add("kind = ?", std::string(toString(*filter.kind)));
    }
    if (!filter.tool.empty()) {
        where.add("EXISTS (SELECT 1 FROM properties WHERE run_id = runs.id AND key = 'tool' AND "
                  "value = ?)",
            filter.tool);
    }
    if (filter.status) {
        where.add("status = ?", std::string(toString(*filter.status)));
    }
    if (filter.since) {
        where.add("created_us >= ?", std::int64_t(filter.since->time_since_epoch().count()));
    }
    if (filter.until) {
        where.add("created_us < ?", std::int64_t(filter.until->time_since_epoch().count()));
    }
    if (!filter.label.empty()) {
        where.add("instr(lower(label), lower(?)) > 0", filter.label);
    }
    if (!filter.precision.empty()) {
        where.add("precision = ?", filter.precision);
    }
    if (!filter.text.empty()) {
        static constexpr const char* kSearched[]
            = { "label", "model_name", "plan", "precision", "backend", "host", "message" };
        std::string condition = "(";
        for (const char* column : kSearched) {
            condition += fmt::format(
                "{}instr(lower({}), lower(?)) > 0", condition.size() > 1 ? " OR " : "", column);
        }
        // and the run's tool ("bench", "train"...), which the listing shows beside its kind.
        condition += " OR EXISTS (SELECT 1 FROM properties WHERE run_id = runs.id AND key = "
                     "'tool' AND instr(lower(value), lower(?)) > 0)";
        where.addRepeated(condition + ")", filter.text, int(std::size(kSearched)) + 1);
    }
    return where;
}

// Steps through a query, calling `onRow` for each row.
template <typename OnRow> Result<void> forEachRow(Statement& stmt, OnRow&& onRow)
{
    for (;;) {
        auto row = stmt.step();
        DAY0_TRY(row);
        if (!*row) {
            return success();
        }
        onRow(stmt);
    }
}

Result<void> loadLayers(const detail::StoreState& impl, std::int64_t runId, LayerMetrics& layers)
{
    auto stmt = impl.statement("SELECT anchor_id, layer, submodule_id, metric_id, value "
                               "FROM layer_metrics WHERE run_id = ?1 ORDER BY seq");
    DAY0_TRY(stmt);
    auto nameOf = impl.statement("SELECT text FROM names WHERE id = ?1");
    DAY0_TRY(nameOf);
    // Store-wide name ids → indices in this record's name table.
    std::unordered_map<std::int64_t, std::uint32_t> local;
    Result<void> failure = success();
    auto localName = [&](std::int64_t id) -> std::uint32_t {
        const auto it = local.find(id);
        if (it != local.end()) {
            return it->second;
        }
        (*nameOf)->bind(1, id);
        auto found = (*nameOf)->step();
        std::string text;
        if (!found) {
            failure = found.error();
        } else if (!*found) {
            failure
                = Error::badInput(fmt::format("{}: run {} refers to name {} that the store lacks "
                                              "(the database is damaged)",
                    displayPath(impl.db.file()), runId, id));
        } else {
            text = (*nameOf)->columnText(0);
        }
        (*nameOf)->reset();
        const auto index = layers.intern(text);
        local.emplace(id, index);
        return index;
    };
    (*stmt)->bind(1, runId);
    DAY0_TRY(forEachRow(**stmt, [&](const Statement& row) {
        LayerMetrics::Row out;
        out.anchor = localName(row.columnInt(0));
        out.layer = std::int32_t(row.columnInt(1));
        out.subModule = localName(row.columnInt(2));
        out.metric = localName(row.columnInt(3));
        out.value = row.columnReal(4);
        layers.addRow(out);
    }));
    return failure;
}

Result<void> loadChildren(const detail::StoreState& impl, std::int64_t runId, RunRecord& record)
{
    auto query = [&](const char* sql, auto&& onRow) -> Result<void> {
        auto stmt = impl.statement(sql);
        DAY0_TRY(stmt);
        (*stmt)->bind(1, runId);
        return forEachRow(**stmt, onRow);
    };
    DAY0_TRY(query("SELECT name, value, unit FROM metrics WHERE run_id = ?1 ORDER BY seq",
        [&](const Statement& r) {
            record.metrics.push_back(
                { std::string(r.columnText(0)), r.columnReal(1), std::string(r.columnText(2)) });
        }));
    DAY0_TRY(query("SELECT key, value FROM properties WHERE run_id = ?1 ORDER BY seq",
        [&](const Statement& r) {
            record.properties.push_back(
                { std::string(r.columnText(0)), std::string(r.columnText(1)) });
        }));
    DAY0_TRY(
        query("SELECT rank, stage, component, bytes FROM memory WHERE run_id = ?1 ORDER BY seq",
            [&](const Statement& r) {
                record.memory.push_back({ int(r.columnInt(0)), int(r.columnInt(1)),
                    std::string(r.columnText(2)), Bytes(r.columnInt(3)) });
            }));
    DAY0_TRY(query("SELECT kind, path, size, sha256 FROM artifacts WHERE run_id = ?1 ORDER BY seq",
        [&](const Statement& r) {
            Artifact a { std::string(r.columnText(0)), std::string(r.columnText(1)), std::nullopt,
                std::string(r.columnText(3)) };
            if (!r.columnIsNull(2)) {
                a.size = Bytes(r.columnInt(2));
            }
            record.artifacts.push_back(std::move(a));
        }));
    DAY0_TRY(query("SELECT time_us, level, message FROM events WHERE run_id = ?1 ORDER BY seq",
        [&](const Statement& r) {
            record.events.push_back({ Timestamp(std::chrono::microseconds(r.columnInt(0))),
                parseLevel(r.columnText(1)), std::string(r.columnText(2)) });
        }));
    return success();
}

Error noSuchRun(const std::filesystem::path& file, std::string_view reference)
{
    return Error::badInput(
        fmt::format("{}: no run '{}' in this store", displayPath(file), reference));
}

bool allDigits(std::string_view text)
{
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
    });
}

} // namespace

Result<std::vector<RunInfo>> RunStore::list(const RunFilter& filter) const
{
    std::lock_guard lock(m_state->mutex);
    const Where where = whereFor(filter);
    auto stmt
        = m_state->db.prepare(fmt::format("SELECT {} FROM runs{} ORDER BY created_us DESC, id DESC "
                                          "LIMIT {} OFFSET {}",
            detail::kInfoColumns, where.sql, filter.limit > 0 ? filter.limit : -1,
            std::max<std::int64_t>(filter.offset, 0)));
    DAY0_TRY(stmt);
    where.bind(*stmt);
    std::vector<RunInfo> runs;
    DAY0_TRY(
        forEachRow(*stmt, [&](const Statement& row) { runs.push_back(detail::readInfo(row)); }));
    return runs;
}

Result<std::int64_t> RunStore::count(const RunFilter& filter) const
{
    std::lock_guard lock(m_state->mutex);
    const Where where = whereFor(filter);
    auto stmt = m_state->db.prepare("SELECT count(*) FROM runs" + where.sql);
    DAY0_TRY(stmt);
    where.bind(*stmt);
    auto row = stmt->step();
    DAY0_TRY(row);
    return stmt->columnInt(0);
}

Result<std::vector<std::string>> RunStore::modelNames() const
{
    std::lock_guard lock(m_state->mutex);
    auto stmt = m_state->db.prepare(
        "SELECT DISTINCT model_name FROM runs WHERE model_name <> '' ORDER BY model_name");
    DAY0_TRY(stmt);
    std::vector<std::string> names;
    DAY0_TRY(
        forEachRow(*stmt, [&](const Statement& row) { names.emplace_back(row.columnText(0)); }));
    return names;
}

Result<RunRecord> RunStore::load(RunId id, bool withLayers) const
{
    std::lock_guard lock(m_state->mutex);
    // One read transaction, so a concurrent delete cannot leave us half a run.
    DAY0_TRY(m_state->db.exec("BEGIN"));
    struct EndRead {
        const Database& db;
        ~EndRead() { (void)db.exec("COMMIT"); }
    } endRead { m_state->db };

    auto stmt = m_state->statement(
        fmt::format("SELECT {} FROM runs WHERE id = ?1", detail::kInfoColumns));
    DAY0_TRY(stmt);
    (*stmt)->bind(1, id.value());
    auto found = (*stmt)->step();
    DAY0_TRY(found);
    if (!*found) {
        return noSuchRun(file(), std::to_string(id.value()));
    }
    RunRecord record;
    record.info = detail::readInfo(**stmt);
    (*stmt)->reset();
    DAY0_TRY(loadChildren(*m_state, id.value(), record));
    if (withLayers) {
        DAY0_TRY(loadLayers(*m_state, id.value(), record.layers));
    }
    return record;
}

Result<RunCounts> RunStore::counts(RunId id) const
{
    std::lock_guard lock(m_state->mutex);
    RunCounts counts;
    const std::pair<const char*, std::int64_t*> tables[] = {
        { "metrics", &counts.metrics },
        { "properties", &counts.properties },
        { "layer_metrics", &counts.layerMetrics },
        { "memory", &counts.memory },
        { "artifacts", &counts.artifacts },
        { "events", &counts.events },
    };
    for (const auto& [table, out] : tables) {
        auto stmt
            = m_state->statement(fmt::format("SELECT count(*) FROM {} WHERE run_id = ?1", table));
        DAY0_TRY(stmt);
        (*stmt)->bind(1, id.value());
        auto row = (*stmt)->step();
        DAY0_TRY(row);
        *out = (*stmt)->columnInt(0);
        (*stmt)->reset();
    }
    return counts;
}

Result<RunId> RunStore::resolve(std::string_view reference) const
{
    std::lock_guard lock(m_state->mutex);
    std::string sql;
    std::string key;
    if (reference == "last" || reference.starts_with("last~")) {
        std::int64_t back = 0;
        if (reference != "last") {
            const auto digits = reference.substr(5);
            const auto [ptr, ec]
                = std::from_chars(digits.data(), digits.data() + digits.size(), back);
            if (ec != std::errc() || ptr != digits.data() + digits.size() || back < 0) {
                return Error::badInput(fmt::format("'{}' is not a run reference: use an id, a uuid "
                                                   "(prefix), 'last' or 'last~N'",
                    reference));
            }
        }
        sql = fmt::format(
            "SELECT id FROM runs ORDER BY created_us DESC, id DESC LIMIT 2 OFFSET {}", back);
    } else if (allDigits(reference)) {
        sql = "SELECT id FROM runs WHERE id = ?1";
        key = reference;
    } else {
        const bool uuidLike = reference.size() >= 4
            && std::all_of(reference.begin(), reference.end(),
                [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
        if (!uuidLike) {
            return Error::badInput(
                fmt::format("'{}' is not a run reference: use an id, a uuid "
                            "(prefix of 4 or more characters), 'last' or 'last~N'",
                    reference));
        }
        // Every uuid character sorts below 'g', so [prefix, prefix + "g") is the prefix's range.
        sql = "SELECT id FROM runs WHERE uuid >= ?1 AND uuid < ?1 || 'g' LIMIT 2";
        for (const char c : reference) {
            key += char(std::tolower(static_cast<unsigned char>(c)));
        }
    }
    auto stmt = m_state->db.prepare(sql);
    DAY0_TRY(stmt);
    if (!key.empty()) {
        if (allDigits(key)) {
            std::int64_t id = 0;
            std::from_chars(key.data(), key.data() + key.size(), id);
            stmt->bind(1, id);
        } else {
            stmt->bind(1, std::string_view(key));
        }
    }
    auto row = stmt->step();
    DAY0_TRY(row);
    if (!*row) {
        return noSuchRun(file(), reference);
    }
    const RunId id(stmt->columnInt(0));
    if (!key.empty() && !allDigits(key)) {
        auto second = stmt->step();
        DAY0_TRY(second);
        if (*second) {
            return Error::badInput(
                fmt::format("{}: '{}' matches more than one run; give more of the uuid",
                    displayPath(file()), reference));
        }
    }
    return id;
}

} // namespace day0::history
