#pragma once

#include "base/result.h"
#include "base/sqlite_db.h"

#include <chrono>
#include <filesystem>
#include <span>

namespace day0::history {

// The run store is a base/sqlite_db database.
using sqlite::Database;
using sqlite::Statement;
using sqlite::Transaction;

/// The schema version this build writes; stored in `PRAGMA user_version`.
constexpr int kSchemaVersion = 1;
/// `PRAGMA application_id` of a run store ("Day0"), so a foreign SQLite file is recognised.
constexpr int kApplicationId = 0x44617930;

/// One step of the schema: the SQL that brings version-1 to `version`.
struct Migration {
    int version = 0;
    const char* sql = nullptr;
};

/// The migrations of the run store, oldest first.
std::span<const Migration> storeMigrations();

/// Opens a run store file and makes it ready: checks that it is a SQLite database of ours and
/// not from a newer schema (before anything is written, so such files are never modified), sets
/// the busy timeout, WAL journaling, full synchronous commits and foreign keys, then applies the
/// missing migrations in one transaction. Errors name the file.
Result<Database> openStoreDatabase(
    const std::filesystem::path& file, Database::Open mode, std::chrono::milliseconds busyTimeout);

/// Applies the migrations above the database's user_version in one write transaction (re-reading
/// the version inside it, so concurrent openers migrate once). Exposed for tests.
Result<void> migrate(const Database& db, std::span<const Migration> migrations);

} // namespace day0::history
