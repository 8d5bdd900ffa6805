#include "base/sqlite_db.h"

#include "base/file_util.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace day0::sqlite {

namespace {

// The limits SQLite's documentation recommends for a database file from anyone
// (sqlite.org/security.html): no functions or virtual tables run from the schema, defensive
// mode, and a bound on one string or blob, so a crafted file cannot make one row take gigabytes
// of memory. Every value an nsys export really holds (a kernel or NVTX name, a demangled C++
// signature) is far below it.
constexpr int kMaxValueBytes = 64 << 20;

void harden(sqlite3* db)
{
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
}

/// A path as a file: URI (RFC 3986 percent-encoding of everything but unreserved and '/').
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

std::string sqlHead(std::string_view sql)
{
    std::string what(sql.substr(0, 60));
    for (char& c : what) {
        if (c == '\n') {
            c = ' ';
        }
    }
    return what;
}

} // namespace

Error sqliteError(std::string_view name, int code, std::string_view what, std::string_view detail)
{
    std::string message = fmt::format("{}: {}: {}", name, what, detail);
    switch (code & 0xff) {
    case SQLITE_NOTADB:
        message = fmt::format("{}: {}: not a SQLite database (the file is corrupt or of another "
                              "kind; it was left untouched)",
            name, what);
        break;
    case SQLITE_CORRUPT:
        message = fmt::format(
            "{}: {}: the database is corrupt ({}); it was left untouched", name, what, detail);
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        message = fmt::format(
            "{}: {}: the store stayed locked by another writer ({})", name, what, detail);
        break;
    default:
        break;
    }
    switch (code & 0xff) {
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
    case SQLITE_INTERNAL:
    case SQLITE_NOMEM:
        return Error::internal(std::move(message));
    default:
        return Error::badInput(std::move(message));
    }
}

// ---- Statement -----------------------------------------------------------------------------

Statement::Statement(sqlite3_stmt* stmt, std::string name)
    : m_stmt(stmt)
    , m_name(std::move(name))
{
}

Statement::~Statement() { sqlite3_finalize(m_stmt); }

Statement::Statement(Statement&& other) noexcept
    : m_stmt(std::exchange(other.m_stmt, nullptr))
    , m_name(std::move(other.m_name))
    , m_columns(std::move(other.m_columns))
    , m_failed(other.m_failed)
    , m_failedCode(other.m_failedCode)
{
}

Statement& Statement::operator=(Statement&& other) noexcept
{
    if (this != &other) {
        sqlite3_finalize(m_stmt);
        m_stmt = std::exchange(other.m_stmt, nullptr);
        m_name = std::move(other.m_name);
        m_columns = std::move(other.m_columns);
        m_failed = other.m_failed;
        m_failedCode = other.m_failedCode;
    }
    return *this;
}

Statement& Statement::bind(int index, std::int64_t value)
{
    sqlite3_bind_int64(m_stmt, index, value);
    return *this;
}

Statement& Statement::bind(int index, double value)
{
    sqlite3_bind_double(m_stmt, index, value);
    return *this;
}

Statement& Statement::bind(int index, std::string_view text)
{
    sqlite3_bind_text64(m_stmt, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
}

Statement& Statement::bindNull(int index)
{
    sqlite3_bind_null(m_stmt, index);
    return *this;
}

Error Statement::stepError(int code) const
{
    const char* sql = sqlite3_sql(m_stmt);
    return sqliteError(m_name, code, fmt::format("'{}'", sqlHead(sql ? sql : "statement")),
        sqlite3_errmsg(sqlite3_db_handle(m_stmt)));
}

Result<bool> Statement::step()
{
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc == SQLITE_DONE) {
        return false;
    }
    Error error = stepError(rc);
    sqlite3_reset(m_stmt);
    return error;
}

bool Statement::next()
{
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc != SQLITE_DONE) {
        m_failed = true;
        m_failedCode = rc;
    }
    return false;
}

Error Statement::error() const
{
    return m_failed ? stepError(m_failedCode) : Error::internal("no SQLite error to report");
}

Result<void> Statement::run()
{
    for (;;) {
        const int rc = sqlite3_step(m_stmt);
        if (rc == SQLITE_DONE) {
            sqlite3_reset(m_stmt);
            return success();
        }
        if (rc != SQLITE_ROW) {
            Error error = stepError(rc);
            sqlite3_reset(m_stmt);
            return error;
        }
    }
}

void Statement::reset()
{
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
}

int Statement::columnIndex(std::string_view name) const
{
    if (m_columns.empty()) {
        const int n = sqlite3_column_count(m_stmt);
        for (int i = 0; i < n; ++i) {
            if (const char* column = sqlite3_column_name(m_stmt, i)) {
                m_columns.emplace(column, i);
            }
        }
    }
    const auto it = m_columns.find(std::string(name));
    return it == m_columns.end() ? -1 : it->second;
}

std::int64_t Statement::columnInt(int column, std::int64_t fallback) const
{
    return columnIsNull(column) ? fallback : sqlite3_column_int64(m_stmt, column);
}

double Statement::columnReal(int column) const
{
    if (columnIsNull(column)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return sqlite3_column_double(m_stmt, column);
}

std::string_view Statement::columnText(int column) const
{
    if (columnIsNull(column)) {
        return {};
    }
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, column));
    if (!text) {
        return {};
    }
    return { text, std::size_t(sqlite3_column_bytes(m_stmt, column)) };
}

bool Statement::columnIsNull(int column) const
{
    return column < 0 || sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

// ---- Database ------------------------------------------------------------------------------

Result<Database> Database::open(const std::filesystem::path& file, Open mode)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    if (mode == Open::CreateIfMissing) {
        flags |= SQLITE_OPEN_CREATE;
    }
    sqlite3* handle = nullptr;
    const int rc = sqlite3_open_v2(file.c_str(), &handle, flags, nullptr);
    if (rc != SQLITE_OK) {
        Error error = sqliteError(displayPath(file), rc, "cannot open the run store",
            handle ? sqlite3_errmsg(handle) : sqlite3_errstr(rc));
        sqlite3_close_v2(handle);
        return error;
    }
    sqlite3_extended_result_codes(handle, 1);
    Database db;
    db.m_db = handle;
    db.m_file = file;
    db.m_name = displayPath(file);
    return db;
}

Result<Database> Database::openUntrusted(const std::filesystem::path& file, std::string name)
{
    sqlite3* handle = nullptr;
    const std::string uri = "file:" + uriEscape(file.string()) + "?immutable=1";
    const int rc = sqlite3_open_v2(uri.c_str(), &handle,
        SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = handle != nullptr ? sqlite3_errmsg(handle) : sqlite3_errstr(rc);
        sqlite3_close_v2(handle);
        return Error::badInput(fmt::format("{}: cannot open as SQLite: {}", name, msg));
    }
    harden(handle);
    Database db;
    db.m_db = handle;
    db.m_file = file;
    db.m_name = std::move(name);
    return db;
}

Result<Database> Database::openUntrustedImage(std::string bytes, std::string name)
{
    sqlite3* handle = nullptr;
    if (sqlite3_open_v2(":memory:", &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr)
        != SQLITE_OK) {
        sqlite3_close_v2(handle);
        return Error::internal(fmt::format("{}: cannot create an in-memory SQLite database", name));
    }
    auto* image = static_cast<unsigned char*>(sqlite3_malloc64(bytes.size()));
    if (image == nullptr) {
        sqlite3_close_v2(handle);
        return Error::internal(fmt::format("{}: out of memory for the SQLite image", name));
    }
    std::memcpy(image, bytes.data(), bytes.size());
    const int rc = sqlite3_deserialize(handle, "main", image, sqlite3_int64(bytes.size()),
        sqlite3_int64(bytes.size()), SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
    if (rc != SQLITE_OK) {
        std::string msg = sqlite3_errmsg(handle);
        sqlite3_close_v2(handle);
        return Error::badInput(fmt::format("{}: not a usable SQLite image: {}", name, msg));
    }
    harden(handle);
    Database db;
    db.m_db = handle;
    db.m_name = std::move(name);
    return db;
}

Database::~Database() { sqlite3_close_v2(m_db); }

Database::Database(Database&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr))
    , m_file(std::move(other.m_file))
    , m_name(std::move(other.m_name))
{
}

Database& Database::operator=(Database&& other) noexcept
{
    if (this != &other) {
        sqlite3_close_v2(m_db);
        m_db = std::exchange(other.m_db, nullptr);
        m_file = std::move(other.m_file);
        m_name = std::move(other.m_name);
    }
    return *this;
}

Result<Statement> Database::prepare(std::string_view sql, bool persistent) const
{
    sqlite3_stmt* stmt = nullptr;
    const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
    const int rc = sqlite3_prepare_v3(m_db, sql.data(), int(sql.size()), flags, &stmt, nullptr);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(stmt);
        return sqliteError(m_name, sqlite3_extended_errcode(m_db),
            fmt::format("cannot prepare '{}'", sqlHead(sql)), sqlite3_errmsg(m_db));
    }
    return Statement(stmt, m_name);
}

Result<void> Database::exec(const std::string& sql) const
{
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
        std::string detail = message ? message : sqlite3_errstr(rc);
        sqlite3_free(message);
        return sqliteError(m_name, rc, fmt::format("'{}'", sqlHead(sql)), detail);
    }
    return success();
}

Result<std::int64_t> Database::queryInt(const std::string& sql) const
{
    auto stmt = prepare(sql);
    if (!stmt) {
        return stmt.error();
    }
    auto row = stmt->step();
    if (!row) {
        return row.error();
    }
    if (!*row) {
        return sqliteError(m_name, SQLITE_ERROR, fmt::format("'{}'", sql), "returned no row");
    }
    return stmt->columnInt(0);
}

Result<std::set<std::string>> Database::tables() const
{
    auto stmt = prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
    std::set<std::string> out;
    if (stmt) {
        while (stmt->next()) {
            out.emplace(stmt->columnText(0));
        }
    }
    if (!stmt || stmt->failed()) {
        return Error::badInput(
            fmt::format("{}: not a SQLite database ({})", m_name, sqlite3_errmsg(m_db)));
    }
    return out;
}

std::set<std::string> Database::columns(const std::string& table) const
{
    std::set<std::string> out;
    std::string quoted;
    for (const char c : table) {
        quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    auto stmt = prepare(fmt::format("PRAGMA table_info(\"{}\")", quoted));
    if (!stmt) {
        return out;
    }
    const int nameColumn = stmt->columnIndex("name");
    while (stmt->next()) {
        out.emplace(stmt->columnText(nameColumn));
    }
    return out;
}

Error Database::lastError(std::string_view what) const
{
    return sqliteError(m_name, sqlite3_extended_errcode(m_db), what, sqlite3_errmsg(m_db));
}

std::int64_t Database::lastInsertRowId() const { return sqlite3_last_insert_rowid(m_db); }

std::int64_t Database::changes() const { return sqlite3_changes64(m_db); }

// ---- Transaction ---------------------------------------------------------------------------

Result<Transaction> Transaction::begin(const Database& db)
{
    DAY0_TRY(db.exec("BEGIN IMMEDIATE"));
    Transaction transaction(db);
    transaction.m_open = true;
    return transaction;
}

Transaction::~Transaction()
{
    if (m_open && m_db) {
        // Best effort: if ROLLBACK itself fails SQLite has already rolled back on the error.
        sqlite3_exec(m_db->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
}

Transaction::Transaction(Transaction&& other) noexcept
    : m_db(other.m_db)
    , m_open(std::exchange(other.m_open, false))
{
}

Result<void> Transaction::commit()
{
    DAY0_TRY(m_db->exec("COMMIT"));
    m_open = false;
    return success();
}

} // namespace day0::sqlite
