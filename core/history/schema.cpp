#include "history/schema.h"

#include "base/file_util.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <array>
#include <chrono>
#include <thread>

namespace day0::history {

namespace {

// Version 1. Child tables are keyed by (run_id, seq): rows of one run are contiguous and in the
// order the engine produced them, so loading and deleting a run are range operations and the
// 100k-row layer table needs no secondary index. Names of anchors, sub-modules and layer metrics
// are interned in `names`, so a layer row is a few integers and a double. Rows of `names` are
// never updated nor deleted (RunStore caches their ids across commits), so a later schema must
// keep them stable.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('plan', 'verify', 'run', 'compare', 'trace', 'validate')),
    created_us INTEGER NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'error', 'cancelled')),
    model_name TEXT NOT NULL DEFAULT '',
    model_fingerprint TEXT NOT NULL DEFAULT '',
    plan TEXT NOT NULL DEFAULT '',
    precision TEXT NOT NULL DEFAULT '',
    backend TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '',
    software_version TEXT NOT NULL DEFAULT '',
    command TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    duration_s REAL
);
CREATE INDEX runs_by_created ON runs (created_us, id);
CREATE INDEX runs_by_model ON runs (model_name, created_us);

CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    value REAL,
    unit TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE properties (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE names (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL UNIQUE
);

CREATE TABLE layer_metrics (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    anchor_id INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    submodule_id INTEGER NOT NULL,
    metric_id INTEGER NOT NULL,
    value REAL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE memory (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    component TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE artifacts (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER,
    sha256 TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE events (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    time_us INTEGER NOT NULL,
    level TEXT NOT NULL CHECK (level IN ('debug', 'info', 'warning', 'error')),
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
)sql";

constexpr std::array kMigrations { Migration { 1, kSchemaV1 } };

Error newerSchemaError(const std::filesystem::path& file, std::int64_t version)
{
    return Error::badInput(fmt::format("{}: the run store has schema version {}, newer than this "
                                       "day0 understands ({}); it was left untouched (use a newer "
                                       "day0, or another store with --store)",
        displayPath(file), version, kSchemaVersion));
}

Error foreignDatabaseError(const std::filesystem::path& file)
{
    return Error::badInput(fmt::format("{}: a SQLite database that is not a Day0 run store; it was "
                                       "left untouched (choose another file with --store)",
        displayPath(file)));
}

struct Header {
    std::int64_t applicationId = 0;
    std::int64_t version = 0;
    std::int64_t objects = 0; ///< tables, indexes... in the file
};

// The identity of the file, read in one snapshot: another process creating the store at this
// moment must not be seen half-way (its tables but not yet its version), which would look like a
// foreign database.
Result<Header> readHeader(const Database& db)
{
    DAY0_TRY(db.exec("BEGIN"));
    auto applicationId = db.queryInt("PRAGMA application_id");
    auto version = db.queryInt("PRAGMA user_version");
    auto objects = db.queryInt("SELECT count(*) FROM sqlite_schema");
    (void)db.exec("COMMIT");
    DAY0_TRY(applicationId);
    DAY0_TRY(version);
    DAY0_TRY(objects);
    return Header { *applicationId, *version, *objects };
}

// Switching a new store to WAL needs it alone for a moment, and SQLite does not always wait for
// that through the busy handler (another process may be creating the same store right now):
// retry within the busy timeout.
Result<void> execWhileBusy(
    const Database& db, const std::string& sql, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto done = db.exec(sql);
        const int code = sqlite3_errcode(db.handle()) & 0xff;
        if (done || (code != SQLITE_BUSY && code != SQLITE_LOCKED)
            || std::chrono::steady_clock::now() >= deadline) {
            return done;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

} // namespace

std::span<const Migration> storeMigrations() { return kMigrations; }

Result<void> migrate(const Database& db, std::span<const Migration> migrations)
{
    auto transaction = Transaction::begin(db);
    if (!transaction) {
        return transaction.error();
    }
    // Read again under the write lock: another process may have migrated since we looked.
    auto version = db.queryInt("PRAGMA user_version");
    if (!version) {
        return version.error();
    }
    const int target = migrations.empty() ? 0 : migrations.back().version;
    if (*version > target) {
        return newerSchemaError(db.file(), *version);
    }
    if (*version == 0) {
        auto objects = db.queryInt("SELECT count(*) FROM sqlite_schema");
        if (!objects) {
            return objects.error();
        }
        if (*objects > 0) {
            return foreignDatabaseError(db.file());
        }
        DAY0_TRY(db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId)));
    }
    for (const Migration& migration : migrations) {
        if (migration.version <= *version) {
            continue;
        }
        auto applied = db.exec(migration.sql);
        if (!applied) {
            return Error { applied.error().code,
                fmt::format("migrating to schema version {}: {}", migration.version,
                    applied.error().message) };
        }
        DAY0_TRY(db.exec(fmt::format("PRAGMA user_version = {}", migration.version)));
    }
    return transaction->commit();
}

Result<Database> openStoreDatabase(
    const std::filesystem::path& file, Database::Open mode, std::chrono::milliseconds busyTimeout)
{
    auto db = Database::open(file, mode);
    if (!db) {
        return db.error();
    }
    sqlite3_busy_timeout(db->handle(), int(busyTimeout.count()));

    // Read-only checks first: nothing is written to a file that is not ours or is newer.
    auto header = readHeader(*db);
    DAY0_TRY(header);
    if (header->applicationId != 0 && header->applicationId != kApplicationId) {
        return foreignDatabaseError(file);
    }
    if (header->version > kSchemaVersion) {
        return newerSchemaError(file, header->version);
    }
    if (header->version == 0 && header->applicationId == 0 && header->objects > 0) {
        return foreignDatabaseError(file);
    }

    // WAL lets readers (the GUI) work while a writer commits; FULL makes a commit durable before
    // it returns, so a committed run survives even a power cut, not only a killed process.
    DAY0_TRY(execWhileBusy(*db, "PRAGMA journal_mode = WAL", busyTimeout));
    DAY0_TRY(db->exec("PRAGMA synchronous = FULL"));
    DAY0_TRY(db->exec("PRAGMA foreign_keys = ON"));
    if (header->version < kSchemaVersion) {
        DAY0_TRY(migrate(*db, storeMigrations()));
    }
    return db;
}

} // namespace day0::history
