#include "profile/sqlite_db.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cctype>
#include <cstring>

namespace day0::profile::detail {

namespace {

std::string uriEscape(const std::string& path)
{
    std::string out;
    for (const char c : path) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '/' || c == '.' || c == '-' || c == '_') {
            out.push_back(c);
        } else {
            out += fmt::format("%{:02X}", unsigned(u));
        }
    }
    return out;
}

// The limits SQLite's documentation recommends for a database file from anyone
// (sqlite.org/security.html): no functions or virtual tables run from the schema, defensive
// mode, and a bound on one string or blob, so a crafted export cannot make one row take
// gigabytes of memory. Every value an nsys export really holds (a kernel or NVTX name, a
// demangled C++ signature) is far below it.
constexpr int kMaxValueBytes = 64 << 20;

void harden(sqlite3* db)
{
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
}

} // namespace

Result<SqliteDb> SqliteDb::openFile(const std::string& path, const std::string& name)
{
    sqlite3* db = nullptr;
    const std::string uri = "file:" + uriEscape(path) + "?immutable=1";
    const int rc
        = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        sqlite3_close(db);
        return Error::badInput(fmt::format("{}: cannot open as SQLite: {}", name, msg));
    }
    harden(db);
    return SqliteDb(db, name);
}

Result<SqliteDb> SqliteDb::openBytes(std::string bytes, const std::string& name)
{
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return Error::internal(fmt::format("{}: cannot create an in-memory SQLite database", name));
    }
    auto* image = static_cast<unsigned char*>(sqlite3_malloc64(bytes.size()));
    if (image == nullptr) {
        sqlite3_close(db);
        return Error::internal(fmt::format("{}: out of memory for the SQLite image", name));
    }
    std::memcpy(image, bytes.data(), bytes.size());
    const int rc = sqlite3_deserialize(db, "main", image, sqlite3_int64(bytes.size()),
        sqlite3_int64(bytes.size()), SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
    if (rc != SQLITE_OK) {
        std::string msg = sqlite3_errmsg(db);
        sqlite3_close(db);
        return Error::badInput(fmt::format("{}: not a usable SQLite image: {}", name, msg));
    }
    harden(db);
    return SqliteDb(db, name);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : m_db(other.m_db)
    , m_name(std::move(other.m_name))
{
    other.m_db = nullptr;
}

SqliteDb::~SqliteDb()
{
    if (m_db != nullptr) {
        sqlite3_close(m_db);
    }
}

std::string SqliteDb::lastError() const
{
    return m_db != nullptr ? sqlite3_errmsg(m_db) : "no database";
}

Result<std::set<std::string>> SqliteDb::tables() const
{
    // Tables only: an export from nsys has no views, and a view (a recursive one never
    // returns) under a table's name would run arbitrary SQL on every read.
    auto stmt = SqliteStmt::prepare(*this, "SELECT name FROM sqlite_master WHERE type = 'table'");
    if (!stmt.ok()) {
        return stmt.error();
    }
    std::set<std::string> out;
    while (stmt->step()) {
        out.emplace(stmt->text(0));
    }
    if (stmt->failed()) {
        return Error::badInput(fmt::format("{}: not an SQLite database ({})", m_name, lastError()));
    }
    return out;
}

std::set<std::string> SqliteDb::columns(const std::string& table) const
{
    std::set<std::string> out;
    auto stmt = SqliteStmt::prepare(*this, fmt::format("PRAGMA table_info(\"{}\")", table));
    if (!stmt.ok()) {
        return out;
    }
    const int nameCol = stmt->column("name");
    while (stmt->step()) {
        out.emplace(stmt->text(nameCol));
    }
    return out;
}

Result<SqliteStmt> SqliteStmt::prepare(const SqliteDb& db, const std::string& sql)
{
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db.handle(), sql.c_str(), int(sql.size()), &stmt, nullptr)
        != SQLITE_OK) {
        const std::string msg = db.lastError();
        sqlite3_finalize(stmt);
        if (msg.find("file is not a database") != std::string::npos) {
            return Error::badInput(fmt::format("{}: not an SQLite database", db.name()));
        }
        return Error::badInput(fmt::format("{}: query failed: {}", db.name(), msg));
    }
    return SqliteStmt(stmt);
}

SqliteStmt::SqliteStmt(sqlite3_stmt* stmt)
    : m_stmt(stmt)
{
    const int n = sqlite3_column_count(stmt);
    for (int i = 0; i < n; ++i) {
        m_columns.emplace(sqlite3_column_name(stmt, i), i);
    }
}

SqliteStmt::SqliteStmt(SqliteStmt&& other) noexcept
    : m_stmt(other.m_stmt)
    , m_columns(std::move(other.m_columns))
    , m_failed(other.m_failed)
{
    other.m_stmt = nullptr;
}

SqliteStmt::~SqliteStmt() { sqlite3_finalize(m_stmt); }

bool SqliteStmt::step()
{
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc != SQLITE_DONE) {
        m_failed = true;
    }
    return false;
}

int SqliteStmt::column(std::string_view name) const
{
    const auto it = m_columns.find(std::string(name));
    return it == m_columns.end() ? -1 : it->second;
}

bool SqliteStmt::isNull(int col) const
{
    return col < 0 || sqlite3_column_type(m_stmt, col) == SQLITE_NULL;
}

std::int64_t SqliteStmt::integer(int col, std::int64_t fallback) const
{
    if (isNull(col)) {
        return fallback;
    }
    return sqlite3_column_int64(m_stmt, col);
}

std::string_view SqliteStmt::text(int col) const
{
    if (isNull(col)) {
        return {};
    }
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
    return { p, std::size_t(sqlite3_column_bytes(m_stmt, col)) };
}

} // namespace day0::profile::detail
