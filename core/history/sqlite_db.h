#pragma once

#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace day0::history {

/// Maps a SQLite result code onto an Error whose message starts with the store file.
/// Corruption, locking, permissions and full disks are BadInput (exit 2: the store is the input);
/// API misuse is Internal.
Error sqliteError(
    const std::filesystem::path& file, int code, std::string_view what, std::string_view detail);

/// One prepared statement (RAII; move-only). Bind indices are 1-based as in SQLite, columns
/// 0-based. Not thread-safe: use it from the thread that owns its Database.
class Statement {
public:
    Statement() = default;
    explicit Statement(sqlite3_stmt* stmt);
    ~Statement();
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, int value) { return bind(index, std::int64_t(value)); }
    /// Binds a double; NaN is stored as NULL by SQLite and read back as NaN by columnReal().
    Statement& bind(int index, double value);
    /// Binds text (copied by SQLite, so the view may die before step()).
    Statement& bind(int index, std::string_view text);
    Statement& bindNull(int index);

    /// Advances; true when a row is available, false when done.
    Result<bool> step();
    /// Steps to completion, ignoring rows; then resets so the statement can run again.
    Result<void> run();
    /// Resets for another run and clears the bindings.
    void reset();

    [[nodiscard]] std::int64_t columnInt(int column) const;
    /// The column as a double; NULL reads as NaN.
    [[nodiscard]] double columnReal(int column) const;
    [[nodiscard]] std::string_view columnText(int column) const;
    [[nodiscard]] bool columnIsNull(int column) const;

    [[nodiscard]] sqlite3_stmt* handle() const { return m_stmt; }

private:
    [[nodiscard]] Error stepError(int code) const;

    sqlite3_stmt* m_stmt = nullptr;
};

/// One SQLite connection (RAII; move-only). Its statements must be destroyed before it.
/// Not thread-safe: one thread at a time.
class Database {
public:
    /// How to open: an existing file only, or create it when missing.
    enum class Open { ExistingOnly, CreateIfMissing };

    /// Opens `file`; no SQL runs yet, so a file that is not a database is not touched here.
    static Result<Database> open(const std::filesystem::path& file, Open mode);

    Database() = default;
    ~Database();
    Database(Database&& other) noexcept;
    Database& operator=(Database&& other) noexcept;
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    /// Prepares one statement; `persistent` hints SQLite that it will be reused many times.
    Result<Statement> prepare(std::string_view sql, bool persistent = false) const;
    /// Runs one or more statements without results (DDL, pragmas, BEGIN/COMMIT).
    Result<void> exec(const std::string& sql) const;
    /// Runs a query whose single result is an integer (`PRAGMA user_version`, `SELECT count(*)`).
    Result<std::int64_t> queryInt(const std::string& sql) const;

    /// The last error of this connection as an Error naming the file and `what` was attempted.
    [[nodiscard]] Error lastError(std::string_view what) const;
    [[nodiscard]] std::int64_t lastInsertRowId() const;
    /// Rows changed by the last INSERT/UPDATE/DELETE.
    [[nodiscard]] std::int64_t changes() const;
    [[nodiscard]] const std::filesystem::path& file() const { return m_file; }
    [[nodiscard]] sqlite3* handle() const { return m_db; }

private:
    sqlite3* m_db = nullptr;
    std::filesystem::path m_file;
};

/// A write transaction: BEGIN IMMEDIATE takes the write lock at once (waiting up to the busy
/// timeout), so two writers queue instead of deadlocking; the destructor rolls back unless
/// commit() succeeded.
class Transaction {
public:
    static Result<Transaction> begin(const Database& db);
    ~Transaction();
    Transaction(Transaction&& other) noexcept;
    Transaction& operator=(Transaction&&) = delete;
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    Result<void> commit();

private:
    explicit Transaction(const Database& db)
        : m_db(&db)
    {
    }
    const Database* m_db = nullptr;
    bool m_open = false;
};

} // namespace day0::history
