// The one SQLite wrapper (base/sqlite_db): the run store's read-write databases and the
// hardened read-only ones of files from anyone (Nsight Systems exports).
#include "base/sqlite_db.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace day0::sqlite {
namespace {

namespace fs = std::filesystem;

fs::path fresh(const std::string& name)
{
    const fs::path dir = fs::path(::testing::TempDir()) / "sqlite_db_test";
    fs::create_directories(dir);
    fs::remove(dir / name);
    return dir / name;
}

/// A small database with a table, a view and NULLs.
fs::path sample(const std::string& name)
{
    const auto file = fresh(name);
    auto db = Database::open(file, Database::Open::CreateIfMissing);
    EXPECT_TRUE(db.ok()) << db.error().message;
    EXPECT_TRUE(db->exec("CREATE TABLE k(id INTEGER, name TEXT, bytes INTEGER);"
                         "INSERT INTO k VALUES (1, 'gemm', 64), (2, NULL, NULL);"
                         "CREATE VIEW v AS SELECT * FROM k;")
                    .ok());
    return file;
}

TEST(SqliteDb, ColumnsByNameWithNullsReadAsTheirFallback)
{
    auto db = Database::openUntrusted(sample("columns.sqlite"), "columns.sqlite");
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto stmt = db->prepare("SELECT id, name, bytes FROM k ORDER BY id");
    ASSERT_TRUE(stmt.ok()) << stmt.error().message;
    const int name = stmt->columnIndex("name");
    const int bytes = stmt->columnIndex("bytes");
    EXPECT_EQ(stmt->columnIndex("absent"), -1);
    ASSERT_TRUE(stmt->next());
    EXPECT_EQ(stmt->columnInt(0), 1);
    EXPECT_EQ(stmt->columnText(name), "gemm");
    EXPECT_EQ(stmt->columnInt(bytes, -1), 64);
    ASSERT_TRUE(stmt->next());
    EXPECT_TRUE(stmt->columnIsNull(name));
    EXPECT_EQ(stmt->columnText(name), "");
    EXPECT_EQ(stmt->columnInt(bytes, -1), -1);
    EXPECT_EQ(stmt->columnInt(-1, 7), 7) << "a column the query lacks reads as NULL";
    EXPECT_FALSE(stmt->next());
    EXPECT_FALSE(stmt->failed());
}

TEST(SqliteDb, TablesLeaveViewsOutAndColumnsAreNamed)
{
    auto db = Database::openUntrusted(sample("tables.sqlite"), "tables.sqlite");
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto tables = db->tables();
    ASSERT_TRUE(tables.ok()) << tables.error().message;
    EXPECT_EQ(*tables, (std::set<std::string> { "k" }));
    EXPECT_EQ(db->columns("k"), (std::set<std::string> { "id", "name", "bytes" }));
    EXPECT_TRUE(db->columns("no \"such\" table").empty());
}

TEST(SqliteDb, AnUntrustedFileIsNeverWritten)
{
    const auto file = sample("readonly.sqlite");
    const auto before = fs::last_write_time(file);
    auto db = Database::openUntrusted(file, "readonly.sqlite");
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto written = db->exec("INSERT INTO k VALUES (3, 'x', 1)");
    ASSERT_FALSE(written.ok());
    EXPECT_NE(written.error().message.find("readonly.sqlite"), std::string::npos);
    EXPECT_EQ(fs::last_write_time(file), before);
    EXPECT_FALSE(fs::exists(file.string() + "-journal"));
    EXPECT_FALSE(fs::exists(file.string() + "-wal"));
}

TEST(SqliteDb, AFileThatIsNotADatabaseIsNamedAsSuch)
{
    const auto file = fresh("text.sqlite");
    std::ofstream(file) << std::string(4096, 'x');
    auto db = Database::openUntrusted(file, "text.sqlite");
    ASSERT_TRUE(db.ok()) << "opening reads nothing yet";
    auto tables = db->tables();
    ASSERT_FALSE(tables.ok());
    EXPECT_NE(tables.error().message.find("text.sqlite: not a SQLite database"), std::string::npos)
        << tables.error().message;
    auto image = Database::openUntrustedImage(std::string(4096, 'x'), "image.sqlite");
    ASSERT_FALSE(image.ok() && image->tables().ok());
}

TEST(SqliteDb, AnOverlongValueIsRefusedNotAllocated)
{
    auto db = Database::openUntrusted(sample("long.sqlite"), "long.sqlite");
    ASSERT_TRUE(db.ok()) << db.error().message;
    // zeroblob beyond the 64 MiB limit: SQLite refuses it instead of allocating it.
    auto stmt = db->prepare("SELECT length(zeroblob(100000000))");
    ASSERT_TRUE(stmt.ok()) << stmt.error().message;
    EXPECT_FALSE(stmt->next());
    ASSERT_TRUE(stmt->failed());
    EXPECT_NE(stmt->error().message.find("long.sqlite"), std::string::npos)
        << stmt->error().message;
}

TEST(SqliteDb, AFailedTransactionRollsBack)
{
    const auto file = sample("transaction.sqlite");
    auto db = Database::open(file, Database::Open::ExistingOnly);
    ASSERT_TRUE(db.ok()) << db.error().message;
    {
        auto t = Transaction::begin(*db);
        ASSERT_TRUE(t.ok()) << t.error().message;
        ASSERT_TRUE(db->exec("INSERT INTO k VALUES (3, 'x', 1)").ok());
    }
    auto count = db->queryInt("SELECT count(*) FROM k");
    ASSERT_TRUE(count.ok()) << count.error().message;
    EXPECT_EQ(*count, 2);
    {
        auto t = Transaction::begin(*db);
        ASSERT_TRUE(t.ok());
        ASSERT_TRUE(db->exec("INSERT INTO k VALUES (3, 'x', 1)").ok());
        ASSERT_TRUE(t->commit().ok());
    }
    EXPECT_EQ(*db->queryInt("SELECT count(*) FROM k"), 3);
}

} // namespace
} // namespace day0::sqlite
