#include "history/sqlite_db.h"

#include "base/file_util.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cmath>
#include <limits>
#include <utility>

namespace day0::history {

namespace {

std::string fileOfStatement(sqlite3_stmt* stmt)
{
    const char* name = sqlite3_db_filename(sqlite3_db_handle(stmt), "main");
    return name ? displayPath(name) : std::string("(store)");
}

} // namespace

Error sqliteError(
    const std::filesystem::path& file, int code, std::string_view what, std::string_view detail)
{
    std::string message = fmt::format("{}: {}: {}", displayPath(file), what, detail);
    switch (code & 0xff) {
    case SQLITE_NOTADB:
        message = fmt::format("{}: {}: not a SQLite database (the file is corrupt or of another "
                              "kind; it was left untouched)",
            displayPath(file), what);
        break;
    case SQLITE_CORRUPT:
        message = fmt::format("{}: {}: the database is corrupt ({}); it was left untouched",
            displayPath(file), what, detail);
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        message = fmt::format("{}: {}: the store stayed locked by another writer ({})",
            displayPath(file), what, detail);
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

Statement::Statement(sqlite3_stmt* stmt)
    : m_stmt(stmt)
{
}

Statement::~Statement() { sqlite3_finalize(m_stmt); }

Statement::Statement(Statement&& other) noexcept
    : m_stmt(std::exchange(other.m_stmt, nullptr))
{
}

Statement& Statement::operator=(Statement&& other) noexcept
{
    if (this != &other) {
        sqlite3_finalize(m_stmt);
        m_stmt = std::exchange(other.m_stmt, nullptr);
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
    sqlite3* db = sqlite3_db_handle(m_stmt);
    const char* sql = sqlite3_sql(m_stmt);
    std::string what = sql ? std::string(sql).substr(0, 60) : std::string("statement");
    for (char& c : what) {
        if (c == '\n') {
            c = ' ';
        }
    }
    return sqliteError(
        fileOfStatement(m_stmt), code, fmt::format("'{}'", what), sqlite3_errmsg(db));
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

std::int64_t Statement::columnInt(int column) const { return sqlite3_column_int64(m_stmt, column); }

double Statement::columnReal(int column) const
{
    if (sqlite3_column_type(m_stmt, column) == SQLITE_NULL) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return sqlite3_column_double(m_stmt, column);
}

std::string_view Statement::columnText(int column) const
{
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, column));
    if (!text) {
        return {};
    }
    return { text, std::size_t(sqlite3_column_bytes(m_stmt, column)) };
}

bool Statement::columnIsNull(int column) const
{
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
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
        Error error = sqliteError(file, rc, "cannot open the run store",
            handle ? sqlite3_errmsg(handle) : sqlite3_errstr(rc));
        sqlite3_close_v2(handle);
        return error;
    }
    sqlite3_extended_result_codes(handle, 1);
    Database db;
    db.m_db = handle;
    db.m_file = file;
    return db;
}

Database::~Database() { sqlite3_close_v2(m_db); }

Database::Database(Database&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr))
    , m_file(std::move(other.m_file))
{
}

Database& Database::operator=(Database&& other) noexcept
{
    if (this != &other) {
        sqlite3_close_v2(m_db);
        m_db = std::exchange(other.m_db, nullptr);
        m_file = std::move(other.m_file);
    }
    return *this;
}

Result<Statement> Database::prepare(std::string_view sql, bool persistent) const
{
    sqlite3_stmt* stmt = nullptr;
    const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
    const int rc = sqlite3_prepare_v3(m_db, sql.data(), int(sql.size()), flags, &stmt, nullptr);
    if (rc != SQLITE_OK) {
        return sqliteError(m_file, rc, fmt::format("cannot prepare '{}'", sql.substr(0, 60)),
            sqlite3_errmsg(m_db));
    }
    return Statement(stmt);
}

Result<void> Database::exec(const std::string& sql) const
{
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
        std::string detail = message ? message : sqlite3_errstr(rc);
        sqlite3_free(message);
        return sqliteError(m_file, rc, fmt::format("'{}'", sql.substr(0, 60)), detail);
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
        return sqliteError(m_file, SQLITE_ERROR, fmt::format("'{}'", sql), "returned no row");
    }
    return stmt->columnInt(0);
}

Error Database::lastError(std::string_view what) const
{
    return sqliteError(m_file, sqlite3_extended_errcode(m_db), what, sqlite3_errmsg(m_db));
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

} // namespace day0::history
