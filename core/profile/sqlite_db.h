#pragma once

#include "base/result.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace day0::profile::detail {

/// A read-only SQLite connection (RAII) with the few queries the nsys importer needs.
class SqliteDb {
public:
    /// Opens a file read-only and immutable (no journal files are created next to it).
    static Result<SqliteDb> openFile(const std::string& path, const std::string& name);
    /// Opens an in-memory copy of a database image.
    static Result<SqliteDb> openBytes(std::string bytes, const std::string& name);
    SqliteDb(SqliteDb&& other) noexcept;
    SqliteDb& operator=(SqliteDb&&) = delete;
    ~SqliteDb();

    [[nodiscard]] sqlite3* handle() const { return m_db; }
    [[nodiscard]] const std::string& name() const { return m_name; }
    /// Names of all tables (fails when the file is not an SQLite database).
    Result<std::set<std::string>> tables() const;
    /// Column names of a table.
    [[nodiscard]] std::set<std::string> columns(const std::string& table) const;
    /// The message of the last SQLite error.
    [[nodiscard]] std::string lastError() const;

private:
    SqliteDb(sqlite3* db, std::string name)
        : m_db(db)
        , m_name(std::move(name))
    {
    }
    sqlite3* m_db = nullptr;
    std::string m_name;
};

/// A prepared statement (RAII); columns are addressed by name.
class SqliteStmt {
public:
    static Result<SqliteStmt> prepare(const SqliteDb& db, const std::string& sql);
    SqliteStmt(SqliteStmt&& other) noexcept;
    SqliteStmt& operator=(SqliteStmt&&) = delete;
    ~SqliteStmt();

    /// Advances to the next row; false at the end. Errors surface through `failed()`.
    bool step();
    [[nodiscard]] bool failed() const { return m_failed; }
    /// Column index by name, or -1.
    [[nodiscard]] int column(std::string_view name) const;
    [[nodiscard]] bool isNull(int col) const;
    [[nodiscard]] std::int64_t integer(int col, std::int64_t fallback = 0) const;
    [[nodiscard]] std::string_view text(int col) const;

private:
    explicit SqliteStmt(sqlite3_stmt* stmt);
    sqlite3_stmt* m_stmt = nullptr;
    std::unordered_map<std::string, int> m_columns;
    bool m_failed = false;
};

} // namespace day0::profile::detail
