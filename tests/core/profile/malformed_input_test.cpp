#include "profile/byte_source.h"
#include "profile/chrome_exporter.h"
#include "profile_test_util.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <zlib.h>

#include <fstream>

namespace day0::profile {
namespace {

namespace fs = std::filesystem;
using test::dataFile;

fs::path scratch(const std::string& name)
{
    const auto dir = fs::temp_directory_path() / fmt::format("day0_profile_test_{}", ::getpid());
    fs::create_directories(dir);
    return dir / name;
}

fs::path writeFile(const std::string& name, const std::string& bytes)
{
    const auto path = scratch(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

std::string gzip(const std::string& data)
{
    z_stream z {};
    deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, uLong(data.size())) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = uInt(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

Result<Trace> importPath(const fs::path& p)
{
    Progress progress;
    return importTrace(p, {}, progress, {});
}

bool anyWarningContains(const Trace& t, std::string_view text)
{
    for (const auto& w : t.warnings()) {
        if (w.find(text) != std::string::npos) {
            return true;
        }
    }
    return false;
}

const std::string kGood = R"({"ph":"X","name":"a","cat":"cpu_op","ts":1,"dur":2,"pid":1,"tid":1})";

TEST(MalformedInput, BadEventIsSkippedOthersKept)
{
    const auto path = writeFile("bad_event.json",
        "{\"traceEvents\": [" + kGood + R"(, {"ph":"X","name": , "ts": 5}, )" + kGood + "]}");
    auto r = importPath(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->counts().slices, 2u);
    EXPECT_TRUE(anyWarningContains(*r, "skipped 1 malformed events")) << r->warnings().front();
}

TEST(MalformedInput, ControlCharactersAndBadEscapesAreRepaired)
{
    const std::string name = std::string("a") + char(0x01) + "b\tc\\qd\\u12zz";
    const auto path = writeFile("control.json",
        R"([{"ph":"X","name":")" + name + R"(","cat":"cpu_op","ts":1,"dur":2,"pid":1,"tid":1}])");
    auto r = importPath(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->counts().slices, 1u);
    EXPECT_EQ(r->sliceNameText(0), std::string("a") + char(0x01) + "b\tc\\qd\\u12zz");
    EXPECT_TRUE(anyWarningContains(*r, "control characters"));
    EXPECT_TRUE(anyWarningContains(*r, "invalid backslash escapes"));
}

TEST(MalformedInput, InvalidUtf8IsImportedWithReplacementCharacters)
{
    // A kernel name with bytes that are not UTF-8 (issue #15: such events were dropped).
    const auto path = writeFile("utf8.json",
        "[" + kGood + R"(,{"ph":"X","name":"k)" + std::string("\xff\xfe")
            + R"(_gemm","ts":1,"dur":1,"pid":1,"tid":1},)" + kGood + "]");
    auto r = importPath(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->counts().slices, 3u);
    bool found = false;
    for (std::uint32_t i = 0; i < r->counts().slices; ++i) {
        found = found || r->sliceNameText(i) == "k\xEF\xBF\xBD\xEF\xBF\xBD_gemm";
    }
    EXPECT_TRUE(found);
    EXPECT_TRUE(
        anyWarningContains(*r, "replaced 2 bytes that are not UTF-8 with U+FFFD in 1 events"));
    EXPECT_FALSE(anyWarningContains(*r, "malformed"));
}

TEST(MalformedInput, TruncatedGzipImportsWhatIsComplete)
{
    bool truncated = false;
    auto full = readAllBytes(dataFile("hta_simple_add_rank0.json.gz"), &truncated);
    ASSERT_TRUE(full.ok());
    const std::string packed = gzip(*full);
    const auto path = writeFile("cut.json.gz", packed.substr(0, packed.size() / 2));
    auto r = importPath(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(r->counts().slices, 100u);
    EXPECT_LT(r->counts().slices, 838u);
    EXPECT_TRUE(anyWarningContains(*r, "truncated"));
}

TEST(MalformedInput, CorruptGzipIsAnErrorNamingTheFile)
{
    auto full = readAllBytes(dataFile("hta_simple_add_rank0.json.gz"));
    ASSERT_TRUE(full.ok());
    std::string packed = gzip(*full);
    for (std::size_t i = 200; i < 400; ++i) {
        packed[i] = char(packed[i] ^ 0x5a);
    }
    const auto path = writeFile("corrupt.json.gz", packed);
    auto r = importPath(path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("corrupt.json.gz"), std::string::npos);
    EXPECT_NE(r.error().message.find("gzip"), std::string::npos);
    EXPECT_EQ(exitCodeFor(r.error()), 2);
}

TEST(MalformedInput, EveryCutOfARealTraceImportsOrFailsCleanly)
{
    auto full = readAllBytes(dataFile("hta_event_sync_multi_stream.json.gz"));
    ASSERT_TRUE(full.ok());
    for (std::size_t cut = 0; cut < full->size(); cut += full->size() / 97 + 1) {
        const auto path = writeFile("prefix.json", full->substr(0, cut));
        auto r = importPath(path);
        if (r.ok()) {
            EXPECT_LE(r->counts().slices, 57u);
        } else {
            EXPECT_NE(r.error().message.find("prefix.json"), std::string::npos)
                << r.error().message;
        }
    }
}

TEST(MalformedInput, RandomByteDamageNeverCrashes)
{
    // Deterministic corruption of a real trace: flipped, deleted and inserted bytes in places
    // the scanner, simdjson and the event handler all have to survive.
    auto full = readAllBytes(dataFile("hta_triton_example.json.gz"));
    ASSERT_TRUE(full.ok());
    std::uint64_t seed = 0x9e3779b97f4a7c15ull;
    auto next = [&]() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        return seed;
    };
    const char noise[]
        = { '"', '\\', '{', '}', '[', ']', ',', ':', '\0', '\x01', '\xff', 'e', '-' };
    for (int round = 0; round < 300; ++round) {
        std::string damaged = *full;
        const int edits = 1 + int(next() % 8);
        for (int e = 0; e < edits && !damaged.empty(); ++e) {
            const std::size_t at = next() % damaged.size();
            switch (next() % 3) {
            case 0:
                damaged[at] = noise[next() % sizeof noise];
                break;
            case 1:
                damaged.erase(at, 1 + next() % 16);
                break;
            default:
                damaged.insert(at, 1, noise[next() % sizeof noise]);
            }
        }
        auto r = importPath(writeFile("damaged.json", damaged));
        if (!r.ok()) {
            EXPECT_NE(r.error().message.find("damaged.json"), std::string::npos)
                << r.error().message;
        }
    }
}

TEST(MalformedInput, UnmatchedBeginEndAreReported)
{
    const auto path = writeFile("be.json", R"([
        {"ph":"B","name":"outer","ts":1,"pid":1,"tid":1,"args":{"a":1}},
        {"ph":"B","name":"inner","ts":2,"pid":1,"tid":1},
        {"ph":"E","ts":3,"pid":1,"tid":1,"args":{"b":2}},
        {"ph":"E","ts":4,"pid":1,"tid":2},
        {"ph":"C","name":"mem","ts":5,"pid":1,"args":{"used":10,"free":2.5}},
        {"ph":"i","name":"mark","ts":6,"pid":1,"tid":1,"s":"t"},
        {"ph":"P","name":"sample","ts":7,"pid":1,"tid":1}
    ])");
    auto r = importPath(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->counts().slices, 1u);
    EXPECT_EQ(r->sliceNameText(0), "inner");
    EXPECT_EQ(r->sliceDuration(0), 1000);
    EXPECT_EQ(r->sliceArgs(0).size(), 1u);
    EXPECT_EQ(r->counts().counters, 2u);
    EXPECT_EQ(r->counts().instants, 1u);
    EXPECT_TRUE(anyWarningContains(*r, "'B' events have no matching 'E'"));
    EXPECT_TRUE(anyWarningContains(*r, "no matching begin"));
    EXPECT_TRUE(anyWarningContains(*r, "'P'"));
}

TEST(MalformedInput, NotATraceIsAClearError)
{
    struct Case {
        std::string name;
        std::string bytes;
        std::string expect;
    };
    const Case cases[] = {
        { "empty.json", "", "empty" },
        { "text.txt", "hello world", "not a trace" },
        { "object.json", R"({"foo": 1})", "traceEvents" },
        { "syntax.json", R"({"traceEvents" 1})", "expected ':'" },
    };
    for (const auto& c : cases) {
        auto r = importPath(writeFile(c.name, c.bytes));
        ASSERT_FALSE(r.ok()) << c.name;
        EXPECT_NE(r.error().message.find(c.name), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    }
    auto rep = importPath(dataFile("fuser_h200_report1_head.nsys-rep"));
    ASSERT_FALSE(rep.ok());
    EXPECT_NE(rep.error().message.find("nsys export"), std::string::npos) << rep.error().message;
    auto missing = importPath(scratch("does-not-exist.json"));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("no such file"), std::string::npos);
    auto folder = importPath(fs::temp_directory_path());
    ASSERT_FALSE(folder.ok());
}

fs::path makeDb(const std::string& name, const std::string& sql)
{
    const auto path = scratch(name);
    fs::remove(path);
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    char* err = nullptr;
    sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(err, nullptr) << err;
    sqlite3_close(db);
    return path;
}

TEST(MalformedInput, SqliteWithoutTheNeededTables)
{
    auto none = importPath(makeDb("other.sqlite", "CREATE TABLE t(x);"));
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("CUPTI_ACTIVITY_KIND"), std::string::npos)
        << none.error().message;

    auto noStrings = importPath(makeDb("nostrings.sqlite",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, deviceId INTEGER, "
        "streamId INTEGER,"
        " correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);"));
    ASSERT_FALSE(noStrings.ok());
    EXPECT_NE(noStrings.error().message.find("StringIds"), std::string::npos);
    EXPECT_NE(noStrings.error().message.find("nostrings.sqlite"), std::string::npos);

    // A table without a required column is skipped with a warning; the rest imports.
    auto partial = importPath(makeDb("partial.sqlite",
        "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO StringIds VALUES (1, 'k'), (2, 'cudaLaunchKernel_v7000');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, deviceId INTEGER);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER, end INTEGER, globalTid INTEGER,"
        " correlationId INTEGER, nameId INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 281980910466508, 5, 2), (30, "
        "NULL, 1, 6, 2);"));
    ASSERT_TRUE(partial.ok()) << partial.error().message;
    EXPECT_EQ(partial->counts().slices, 1u);
    EXPECT_EQ(partial->sliceNameText(0), "cudaLaunchKernel");
    EXPECT_TRUE(anyWarningContains(*partial, "has no column 'end'"));
    EXPECT_TRUE(anyWarningContains(*partial, "skipped 1 rows"));
    EXPECT_TRUE(anyWarningContains(*partial, "TARGET_INFO_SESSION_START_TIME"));

    auto garbage = importPath(
        writeFile("garbage.sqlite", std::string("SQLite format 3") + '\0' + std::string(200, 'x')));
    ASSERT_FALSE(garbage.ok());
    EXPECT_NE(garbage.error().message.find("garbage.sqlite"), std::string::npos);
}

TEST(MalformedInput, NsysNamesThatAreNotUtf8AreKeptAsBytesAndExportedAsValidJson)
{
    // A kernel name with a byte that is not UTF-8 (issue #15: exit 3 on export and in the store).
    auto r = importPath(makeDb("badutf8.sqlite",
        "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO StringIds VALUES (1, CAST(x'6bff5f67656d6d' AS TEXT)), "
        "(2, 'cudaLaunchKernel_v7000');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER, end INTEGER, globalTid INTEGER,"
        " correlationId INTEGER, nameId INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 281980910466508, 5, 1);"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->counts().slices, 1u);
    EXPECT_EQ(r->sliceNameText(0), "k\xff_gemm");
    const auto out = scratch("badutf8.json");
    Progress progress;
    ASSERT_TRUE(exportChromeJson(*r, out, progress, {}).ok());
    std::ifstream in(out);
    const auto json = nlohmann::json::parse(in);
    bool found = false;
    for (const auto& e : json["traceEvents"]) {
        found = found || e.value("name", "") == "k\xEF\xBF\xBD_gemm";
    }
    EXPECT_TRUE(found);
}

TEST(MalformedInput, AnNsysValueOfMoreThan64MiBIsRefusedNamingTheFile)
{
    // One string of 64 MiB + 2 bytes: a crafted export cannot make one row take gigabytes.
    auto r = importPath(makeDb("hugestring.sqlite",
        "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO StringIds VALUES (1, hex(zeroblob(33554433)));"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER, end INTEGER, globalTid INTEGER,"
        " correlationId INTEGER, nameId INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 281980910466508, 5, 1);"));
    fs::remove(scratch("hugestring.sqlite"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("hugestring.sqlite"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("too big"), std::string::npos) << r.error().message;
}

} // namespace
} // namespace day0::profile
