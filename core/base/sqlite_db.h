#pragma once

#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace day0::sqlite {

/// Maps a SQLite result code onto an Error whose message starts with `name` (the file).
/// Corruption, locking, permissions and full disks are BadInput (exit 2: the file is the input);
/// API misuse is Internal.
Error sqliteError(std::string_view name, int code, std::string_view what, std::string_view detail);

/// One prepared statement (RAII; move-only). Bind indices are 1-based as in SQLite, columns
/// 0-based; a column index below 0 (columnIndex of a column the query lacks) reads as NULL.
/// Not thread-safe: use it from the thread that owns its Database.
class Statement {
public:
    Statement() = default;
    /// Takes `stmt`; `name` names the database in its errors.
    Statement(sqlite3_stmt* stmt, std::string name);
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
    /// The same as a cursor over a file being read: true while a row is available; false at the
    /// end or on an error, which failed() and error() then tell.
    bool next();
    [[nodiscard]] bool failed() const { return m_failed; }
    /// Why next() failed.
    [[nodiscard]] Error error() const;
    /// Steps to completion, ignoring rows; then resets so the statement can run again.
    Result<void> run();
    /// Resets for another run and clears the bindings.
    void reset();

    /// The index of the result column `name`, or -1 when the query has none of that name (the
    /// names are read once, on the first call).
    [[nodiscard]] int columnIndex(std::string_view name) const;
    /// The column as an integer; NULL (or no such column) reads as `fallback`.
    [[nodiscard]] std::int64_t columnInt(int column, std::int64_t fallback = 0) const;
    /// The column as a double; NULL reads as NaN.
    [[nodiscard]] double columnReal(int column) const;
    [[nodiscard]] std::string_view columnText(int column) const;
    [[nodiscard]] bool columnIsNull(int column) const;

    [[nodiscard]] sqlite3_stmt* handle() const { return m_stmt; }

private:
    [[nodiscard]] Error stepError(int code) const;

    sqlite3_stmt* m_stmt = nullptr;
    std::string m_name;
    mutable std::unordered_map<std::string, int> m_columns; ///< filled by columnIndex
    bool m_failed = false;
    int m_failedCode = 0;
};

/// One SQLite connection (RAII; move-only): the run store's read-write database, or a file
/// from anyone read under SQLite's hardening (an Nsight Systems export). Its statements must
/// be destroyed before it. Not thread-safe: one thread at a time.
class Database {
public:
    /// How to open a database to write: an existing file only, or create it when missing.
    enum class Open { ExistingOnly, CreateIfMissing };

    /// Opens `file` to read and write; no SQL runs yet, so a file that is not a database is not
    /// touched here. Errors name the file.
    static Result<Database> open(const std::filesystem::path& file, Open mode);
    /// Opens `file` read-only and immutable (no journal file is created beside it) with the
    /// limits SQLite recommends for a database from anyone: no functions or virtual tables run
    /// from its schema, defensive mode, and at most 64 MiB in one value. Errors name `name`.
    static Result<Database> openUntrusted(const std::filesystem::path& file, std::string name);
    /// The same for an in-memory copy of a database image (a file read from an archive).
    static Result<Database> openUntrustedImage(std::string bytes, std::string name);

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
    /// Names of its tables (views left out: a view under a table's name would run arbitrary SQL
    /// on every read). Fails when the file is not a SQLite database.
    Result<std::set<std::string>> tables() const;
    /// Column names of `table`; empty when it has none or cannot be read.
    [[nodiscard]] std::set<std::string> columns(const std::string& table) const;

    /// The last error of this connection as an Error naming the file and `what` was attempted.
    [[nodiscard]] Error lastError(std::string_view what) const;
    [[nodiscard]] std::int64_t lastInsertRowId() const;
    /// Rows changed by the last INSERT/UPDATE/DELETE.
    [[nodiscard]] std::int64_t changes() const;
    [[nodiscard]] const std::filesystem::path& file() const { return m_file; }
    /// How errors name it: the file as displayed, or the name given to openUntrusted*.
    [[nodiscard]] const std::string& name() const { return m_name; }
    [[nodiscard]] sqlite3* handle() const { return m_db; }

private:
    sqlite3* m_db = nullptr;
    std::filesystem::path m_file;
    std::string m_name;
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

} // namespace day0::sqlite
