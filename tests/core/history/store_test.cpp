#include "history/run_json.h"
#include "history/run_store.h"
#include "history/schema.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace day0;
using namespace day0::history;
using day0::history::test::fileBytes;
using day0::history::test::makeSeededRecord;
using day0::history::test::TempDir;

namespace {

RunStore openOrDie(const std::filesystem::path& file)
{
    auto store = RunStore::open(file);
    if (!store) {
        throw std::runtime_error(store.error().message);
    }
    return std::move(store).value();
}

// Runs a statement on the file through a separate raw connection.
void rawExec(const std::filesystem::path& file, const std::string& sql)
{
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    char* message = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
    EXPECT_EQ(rc, SQLITE_OK) << (message ? message : "");
    sqlite3_free(message);
    sqlite3_close(db);
}

std::int64_t rawCount(const std::filesystem::path& file, const std::string& table)
{
    auto db = Database::open(file, Database::Open::ExistingOnly);
    EXPECT_TRUE(db.ok());
    auto n = db->queryInt("SELECT count(*) FROM " + table);
    EXPECT_TRUE(n.ok()) << n.error().message;
    return n.ok() ? *n : -1;
}

template <typename Set> RunFilter with(Set set)
{
    RunFilter filter;
    set(filter);
    return filter;
}

RunRecord fullRecord()
{
    RunRecord r(RunKind::Verify);
    r.info.label = "FP8 kernels v2";
    r.info.status = RunStatus::Failed;
    r.info.modelName = "kimi-k2";
    r.info.modelFingerprint = "abc123";
    r.info.plan = "tp=8,pp=4";
    r.info.precision = "fp8";
    r.info.backend = "cuda";
    r.info.softwareVersion = "0.1.0";
    r.info.command = "day0 verify ckpt";
    r.info.message = "3 tensors mismatched";
    r.info.duration = Seconds(12.5);
    r.addMetric("tokens_per_s", 1234.5, "tok/s");
    r.addMetric("nan_metric", std::numeric_limits<double>::quiet_NaN());
    r.addMetric("inf_metric", std::numeric_limits<double>::infinity());
    r.setProperty("cluster", "h200:32x8");
    r.setProperty("mode", "infer");
    r.addMemory(0, 0, "weights", Bytes(1LL << 40));
    r.addMemory(0, 0, "kv_cache", Bytes(123456789));
    r.addMemory(1, -1, "weights", Bytes(42));
    r.addArtifact({ "dump", "/tmp/dump", Bytes(4096), "" });
    r.addArtifact({ "trace", "/tmp/trace.json", std::nullopt, std::string(64, 'a') });
    r.addEvent(LogLevel::Warning, "shard 3 slow");
    r.addEvent(LogLevel::Error, "tensor 'x' mismatched");
    r.layers.add("model.layers.0.self_attn.q_proj", "rel_l2", 1e-3);
    r.layers.add("model.layers.0.self_attn.q_proj", "max_abs", 0.5);
    r.layers.add("model.layers.1", "rel_l2", std::numeric_limits<double>::quiet_NaN());
    r.layers.add("lm_head", 7, "custom", "rel_l2", -2.0);
    return r;
}

} // namespace

TEST(RunStore, RoundTripKeepsEveryField)
{
    TempDir dir("roundtrip");
    auto store = openOrDie(dir / "runs.sqlite");
    const RunRecord written = fullRecord();
    const auto before = now();
    auto id = store.commit(written);
    ASSERT_TRUE(id.ok()) << id.error().message;

    auto loaded = store.load(*id);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    const RunInfo& info = loaded->info;
    EXPECT_EQ(info.id, *id);
    EXPECT_TRUE(isUuid(info.uuid));
    EXPECT_GE(info.created, before);
    EXPECT_LE(info.created, now());
    EXPECT_FALSE(info.host.empty());
    EXPECT_EQ(info.kind, RunKind::Verify);
    EXPECT_EQ(info.status, RunStatus::Failed);
    EXPECT_EQ(info.label, "FP8 kernels v2");
    EXPECT_EQ(info.modelName, "kimi-k2");
    EXPECT_EQ(info.modelFingerprint, "abc123");
    EXPECT_EQ(info.plan, "tp=8,pp=4");
    EXPECT_EQ(info.precision, "fp8");
    EXPECT_EQ(info.backend, "cuda");
    EXPECT_EQ(info.softwareVersion, "0.1.0");
    EXPECT_EQ(info.command, "day0 verify ckpt");
    EXPECT_EQ(info.message, "3 tensors mismatched");
    ASSERT_TRUE(info.duration.has_value());
    EXPECT_EQ(info.duration->value, 12.5);

    ASSERT_EQ(loaded->metrics.size(), 3u);
    EXPECT_EQ(loaded->metrics[0].name, "tokens_per_s");
    EXPECT_EQ(loaded->metrics[0].value, 1234.5);
    EXPECT_EQ(loaded->metrics[0].unit, "tok/s");
    EXPECT_TRUE(std::isnan(loaded->metrics[1].value)) << "a NaN metric must survive the store";
    EXPECT_TRUE(std::isinf(loaded->metrics[2].value));
    ASSERT_EQ(loaded->properties.size(), 2u);
    EXPECT_EQ(loaded->findProperty("cluster")->value, "h200:32x8");
    ASSERT_EQ(loaded->memory.size(), 3u);
    EXPECT_EQ(loaded->memory[0].bytes, Bytes(1LL << 40));
    EXPECT_EQ(loaded->memory[2].rank, 1);
    EXPECT_EQ(loaded->memory[2].stage, -1);
    ASSERT_EQ(loaded->artifacts.size(), 2u);
    EXPECT_EQ(loaded->artifacts[0].size, Bytes(4096));
    EXPECT_FALSE(loaded->artifacts[1].size.has_value());
    EXPECT_EQ(loaded->artifacts[1].sha256, std::string(64, 'a'));
    ASSERT_EQ(loaded->events.size(), 2u);
    EXPECT_EQ(loaded->events[0].level, LogLevel::Warning);
    EXPECT_EQ(loaded->events[1].message, "tensor 'x' mismatched");
    EXPECT_EQ(loaded->events[0].time, written.events[0].time);

    const LayerMetrics& layers = loaded->layers;
    ASSERT_EQ(layers.size(), 4u);
    EXPECT_EQ(layers.anchor(0), "model.layers.0.self_attn.q_proj");
    EXPECT_EQ(layers.subModule(0), "self_attn.q_proj");
    EXPECT_EQ(layers.row(0).layer, 0);
    EXPECT_EQ(layers.metric(1), "max_abs");
    EXPECT_EQ(layers.row(1).value, 0.5);
    EXPECT_TRUE(std::isnan(layers.row(2).value));
    EXPECT_EQ(layers.row(3).layer, 7);
    EXPECT_EQ(layers.subModule(3), "custom");
    EXPECT_EQ(layers.row(3).value, -2.0);

    auto counts = store.counts(*id);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->layerMetrics, 4);
    EXPECT_EQ(counts->events, 2);
    auto header = store.load(*id, false);
    ASSERT_TRUE(header.ok());
    EXPECT_TRUE(header->layers.empty());
    EXPECT_EQ(header->metrics.size(), 3u);
}

TEST(RunStore, NamesAreSharedAcrossRuns)
{
    TempDir dir("names");
    auto store = openOrDie(dir / "runs.sqlite");
    ASSERT_TRUE(store.commit(makeSeededRecord(1, 64)).ok());
    const auto names = rawCount(store.file(), "names");
    ASSERT_TRUE(store.commit(makeSeededRecord(2, 64)).ok());
    EXPECT_EQ(rawCount(store.file(), "names"), names)
        << "the same anchors must not be stored twice";
    EXPECT_EQ(rawCount(store.file(), "layer_metrics"), 128);
}

TEST(RunStore, NamesOfARolledBackCommitAreNotRemembered)
{
    TempDir dir("rollback");
    auto store = openOrDie(dir / "runs.sqlite");
    auto other = openOrDie(dir / "runs.sqlite");
    RunRecord fresh(RunKind::Run);
    fresh.layers.add("model.layers.9.brand_new", "fresh_metric", 1.5);
    RunRecord clash = makeSeededRecord(8, 0);
    clash.info.uuid = makeUuid();
    ASSERT_TRUE(store.commit(clash).ok());
    // The batch inserts the new names, then fails on the uuid and rolls back.
    const std::vector<RunRecord> batch { fresh, clash };
    ASSERT_FALSE(store.commitAll(batch).ok());
    EXPECT_EQ(rawCount(store.file(), "names"), 0);
    // Another connection now takes the ids the rolled-back names had.
    RunRecord elsewhere(RunKind::Run);
    elsewhere.layers.add("model.layers.0.other", "other_metric", 2.0);
    ASSERT_TRUE(other.commit(elsewhere).ok());
    auto id = store.commit(fresh);
    ASSERT_TRUE(id.ok()) << id.error().message;
    auto loaded = store.load(*id);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    ASSERT_EQ(loaded->layers.size(), 1u);
    EXPECT_EQ(loaded->layers.anchor(0), "model.layers.9.brand_new");
    EXPECT_EQ(loaded->layers.subModule(0), "brand_new");
    EXPECT_EQ(loaded->layers.metric(0), "fresh_metric");
    EXPECT_EQ(other.load(*id)->layers.metric(0), "fresh_metric");
}

TEST(RunStore, InvalidRecordWritesNothing)
{
    TempDir dir("invalid");
    auto store = openOrDie(dir / "runs.sqlite");
    RunRecord r = makeSeededRecord(3, 10);
    r.layers.add("model.layers.0.mlp", "rel_l2", 1.0);
    r.layers.add("model.layers.0.mlp", "rel_l2", 2.0);
    auto id = store.commit(r);
    ASSERT_FALSE(id.ok());
    EXPECT_NE(id.error().message.find("model.layers.0.mlp / rel_l2"), std::string::npos)
        << id.error().message;
    EXPECT_NE(id.error().message.find("runs.sqlite"), std::string::npos);

    RunRecord twice = makeSeededRecord(4, 0);
    twice.addMetric("tokens_per_s", 1.0);
    auto second = store.commit(twice);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.error().message.find("metric 'tokens_per_s' given twice"), std::string::npos);
    EXPECT_EQ(*store.count(), 0);
}

TEST(RunStore, GivenUuidIsKeptAndMustBeUnique)
{
    TempDir dir("uuid");
    auto store = openOrDie(dir / "runs.sqlite");
    RunRecord r = makeSeededRecord(5, 3);
    r.info.uuid = makeUuid();
    auto id = store.commit(r);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(store.load(*id)->info.uuid, r.info.uuid);
    auto again = store.commit(r);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message.find("is stored already"), std::string::npos);
    EXPECT_EQ(*store.count(), 1);
    EXPECT_EQ(rawCount(store.file(), "layer_metrics"), 3) << "the failed commit must leave no rows";
}

TEST(RunStore, CommitAllIsAllOrNothing)
{
    TempDir dir("batch");
    auto store = openOrDie(dir / "runs.sqlite");
    std::vector<RunRecord> records { makeSeededRecord(6, 5), makeSeededRecord(7, 5) };
    records[1].info.uuid = records[0].info.uuid = makeUuid(); // the second insert must fail
    ASSERT_FALSE(store.commitAll(records).ok());
    EXPECT_EQ(*store.count(), 0);
    EXPECT_EQ(rawCount(store.file(), "layer_metrics"), 0);
    records[1].info.uuid.clear();
    auto ids = store.commitAll(records);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(ids->size(), 2u);
    EXPECT_EQ(*store.count(), 2);
}

TEST(RunStore, ListFiltersAndOrders)
{
    TempDir dir("list");
    auto store = openOrDie(dir / "runs.sqlite");
    const Timestamp base(std::chrono::microseconds(1'750'000'000'000'000LL));
    const auto day = std::chrono::hours(24);
    struct Spec {
        RunKind kind;
        RunStatus status;
        const char* model;
        const char* label;
        const char* precision;
        int dayOffset;
    };
    const Spec specs[] = {
        { RunKind::Plan, RunStatus::Ok, "Kimi-K2", "baseline plan", "bf16", 0 },
        { RunKind::Run, RunStatus::Failed, "kimi-k2", "FP8 attempt", "fp8", 1 },
        { RunKind::Run, RunStatus::Ok, "deepseek-v3", "fp8 retry", "fp8", 2 },
        { RunKind::Verify, RunStatus::Error, "qwen3-8b", "", "bf16", 3 },
    };
    for (const Spec& s : specs) {
        RunRecord r(s.kind);
        r.info.status = s.status;
        r.info.modelName = s.model;
        r.info.label = s.label;
        r.info.precision = s.precision;
        r.info.created = base + s.dayOffset * day;
        ASSERT_TRUE(store.commit(r).ok());
    }
    const auto labels = [&](const RunFilter& f) {
        std::vector<std::string> out;
        const auto runs = store.list(f);
        if (!runs) {
            ADD_FAILURE() << runs.error().message;
            return out;
        }
        for (const RunInfo& info : runs.value()) {
            out.push_back(info.modelName + "/" + std::string(toString(info.kind)));
        }
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(labels(RunFilter {}),
        (V { "qwen3-8b/verify", "deepseek-v3/run", "kimi-k2/run", "Kimi-K2/plan" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.model = "KIMI"; })),
        (V { "kimi-k2/run", "Kimi-K2/plan" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.kind = RunKind::Run; })),
        (V { "deepseek-v3/run", "kimi-k2/run" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.status = RunStatus::Ok; })),
        (V { "deepseek-v3/run", "Kimi-K2/plan" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) {
        f.since = base + day;
        f.until = base + 3 * day;
    })),
        (V { "deepseek-v3/run", "kimi-k2/run" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.label = "fp8"; })),
        (V { "deepseek-v3/run", "kimi-k2/run" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.precision = "bf16"; })),
        (V { "qwen3-8b/verify", "Kimi-K2/plan" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) {
        f.limit = 2;
        f.offset = 1;
    })),
        (V { "deepseek-v3/run", "kimi-k2/run" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) {
        f.model = "kimi";
        f.kind = RunKind::Run;
        f.status = RunStatus::Failed;
    })),
        (V { "kimi-k2/run" }));
    EXPECT_EQ(*store.count(with([&](RunFilter& f) { f.label = "fp8"; })), 2);
    EXPECT_EQ(*store.count(with([&](RunFilter& f) { f.model = "nothing"; })), 0);
    // The search text looks at label, model, plan, precision, backend, host and message.
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.text = "FP8"; })),
        (V { "deepseek-v3/run", "kimi-k2/run" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.text = "qwen"; })), (V { "qwen3-8b/verify" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) {
        f.text = "kimi";
        f.status = RunStatus::Ok;
    })),
        (V { "Kimi-K2/plan" }));
    EXPECT_EQ(*store.count(with([&](RunFilter& f) { f.text = "%"; })), 0) << "no LIKE wildcards";
    EXPECT_EQ(store.modelNames().value(),
        (std::vector<std::string> { "Kimi-K2", "deepseek-v3", "kimi-k2", "qwen3-8b" }));
}

TEST(RunStore, ListsEachRunsToolAndFiltersByIt)
{
    TempDir dir("tools");
    auto store = openOrDie(dir / "runs.sqlite");
    const Timestamp base(std::chrono::microseconds(1'750'000'000'000'000LL));
    const std::pair<RunKind, const char*> specs[] = { { RunKind::Run, "bench" },
        { RunKind::Run, "train" }, { RunKind::Run, "" }, { RunKind::Compare, "eval" } };
    int offset = 0;
    for (const auto& [kind, tool] : specs) {
        RunRecord r(kind);
        r.info.modelName = fmt::format("m{}", offset);
        r.info.created = base + std::chrono::seconds(offset++);
        r.setProperty("seed", "1"); // another property first: the tool is found by its key
        if (*tool != '\0') {
            r.setProperty("tool", tool);
        }
        ASSERT_TRUE(store.commit(r).ok());
    }
    const auto labels = [&](const RunFilter& f) {
        std::vector<std::string> out;
        for (const RunInfo& info : store.list(f).value()) {
            out.push_back(info.modelName + " " + kindLabel(info));
        }
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(labels(RunFilter {}),
        (V { "m3 compare (eval)", "m2 run", "m1 run (train)", "m0 run (bench)" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.tool = "train"; })), (V { "m1 run (train)" }));
    EXPECT_EQ(labels(with([&](RunFilter& f) {
        f.tool = "eval";
        f.kind = RunKind::Run;
    })),
        V {});
    EXPECT_EQ(*store.count(with([&](RunFilter& f) { f.tool = "bench"; })), 1);
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.tool = "ben"; })), V {}) << "the tool is exact";
    EXPECT_EQ(labels(with([&](RunFilter& f) { f.text = "TRAI"; })), (V { "m1 run (train)" }))
        << "the search text finds a tool";
    // Loading one run reads its tool with the header too.
    const auto id = store.list(with([&](RunFilter& f) { f.tool = "bench"; })).value().at(0).id;
    EXPECT_EQ(store.load(id, false).value().info.tool, "bench");
}

TEST(RunStore, ResolvesReferences)
{
    TempDir dir("resolve");
    auto store = openOrDie(dir / "runs.sqlite");
    RunRecord a = makeSeededRecord(10, 0);
    a.info.uuid = "aaaa0000-0000-4000-8000-000000000001";
    a.info.created = Timestamp(std::chrono::microseconds(1000));
    RunRecord b = makeSeededRecord(11, 0);
    b.info.uuid = "aaaa1111-0000-4000-8000-000000000002";
    b.info.created = Timestamp(std::chrono::microseconds(2000));
    const RunId idA = *store.commit(a);
    const RunId idB = *store.commit(b);

    EXPECT_EQ(*store.resolve(std::to_string(idA.value())), idA);
    EXPECT_EQ(*store.resolve("last"), idB);
    EXPECT_EQ(*store.resolve("last~1"), idA);
    EXPECT_EQ(*store.resolve("AAAA1"), idB);
    EXPECT_EQ(*store.resolve(a.info.uuid), idA);
    const auto ambiguous = store.resolve("aaaa");
    ASSERT_FALSE(ambiguous.ok());
    EXPECT_NE(ambiguous.error().message.find("more than one run"), std::string::npos);
    for (const char* missing : { "last~2", "999", "bbbb" }) {
        const auto r = store.resolve(missing);
        ASSERT_FALSE(r.ok()) << missing;
        EXPECT_NE(r.error().message.find("runs.sqlite"), std::string::npos);
    }
    EXPECT_FALSE(store.resolve("last~x").ok());
    EXPECT_FALSE(store.resolve("a").ok());
    EXPECT_FALSE(store.resolve("not-a-run").ok());
}

TEST(RunStore, RemoveDeletesEverythingOfOneRun)
{
    TempDir dir("remove");
    auto store = openOrDie(dir / "runs.sqlite");
    const RunId keep = *store.commit(makeSeededRecord(20, 30));
    const RunId drop = *store.commit(fullRecord());
    auto removed = store.remove(drop);
    ASSERT_TRUE(removed.ok());
    EXPECT_TRUE(*removed);
    EXPECT_FALSE(*store.remove(drop));
    EXPECT_FALSE(store.load(drop).ok());
    EXPECT_EQ(*store.count(), 1);
    for (const char* table : { "metrics", "properties", "memory", "artifacts", "events" }) {
        auto db = Database::open(store.file(), Database::Open::ExistingOnly);
        auto n = db->queryInt(
            fmt::format("SELECT count(*) FROM {} WHERE run_id = {}", table, drop.value()));
        EXPECT_EQ(*n, 0) << table;
    }
    EXPECT_EQ(rawCount(store.file(), "layer_metrics"), 30);
    EXPECT_TRUE(store.load(keep).ok());
    EXPECT_TRUE(store.checkIntegrity().ok());
}

TEST(RunStoreSchema, FreshStoreIsCurrentWalAndOurs)
{
    TempDir dir("fresh");
    const auto file = dir / "nested" / "deeper" / "runs.sqlite";
    {
        auto store = openOrDie(file);
        ASSERT_TRUE(store.commit(makeSeededRecord(1, 1)).ok());
    }
    auto db = Database::open(file, Database::Open::ExistingOnly);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*db->queryInt("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(*db->queryInt("PRAGMA application_id"), kApplicationId);
    auto mode = db->prepare("PRAGMA journal_mode");
    ASSERT_TRUE(mode->step().value());
    EXPECT_EQ(mode->columnText(0), "wal");
    // Reopening an up-to-date store changes nothing.
    auto again = RunStore::open(file);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again->count(), 1);
}

TEST(RunStoreSchema, EmptyFileBecomesAStore)
{
    TempDir dir("empty");
    std::ofstream(dir / "runs.sqlite").close();
    auto store = RunStore::open(dir / "runs.sqlite");
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_TRUE(store->commit(makeSeededRecord(1, 1)).ok());
}

TEST(RunStoreSchema, MissingFileWithoutCreateIsAnError)
{
    TempDir dir("missing");
    RunStore::Options existingOnly;
    existingOnly.createIfMissing = false;
    auto store = RunStore::open(dir / "none.sqlite", existingOnly);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find("none.sqlite"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(dir / "none.sqlite"));
    auto folder = RunStore::open(dir.path());
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.error().message.find("is a folder"), std::string::npos);
}

TEST(RunStoreSchema, NewerSchemaIsRefusedAndUntouched)
{
    TempDir dir("newer");
    const auto file = dir / "runs.sqlite";
    {
        auto store = openOrDie(file);
        ASSERT_TRUE(store.commit(makeSeededRecord(1, 5)).ok());
    }
    rawExec(file, fmt::format("PRAGMA user_version = {}", kSchemaVersion + 1));
    const std::string before = fileBytes(file);
    auto store = RunStore::open(file);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.error().code, ErrorCode::BadInput);
    EXPECT_NE(store.error().message.find("runs.sqlite"), std::string::npos);
    EXPECT_NE(store.error().message.find(fmt::format("schema version {}", kSchemaVersion + 1)),
        std::string::npos)
        << store.error().message;
    EXPECT_NE(store.error().message.find("newer"), std::string::npos);
    EXPECT_EQ(fileBytes(file), before);
}

TEST(RunStoreSchema, NonDatabaseFileIsRefusedAndUntouched)
{
    TempDir dir("garbage");
    const auto file = dir / "runs.sqlite";
    std::string garbage;
    for (int i = 0; i < 2000; ++i) {
        garbage += "this is not a database; ";
    }
    std::ofstream(file, std::ios::binary) << garbage;
    auto store = RunStore::open(file);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.error().code, ErrorCode::BadInput);
    EXPECT_NE(store.error().message.find("runs.sqlite"), std::string::npos);
    EXPECT_NE(store.error().message.find("not a SQLite database"), std::string::npos)
        << store.error().message;
    EXPECT_EQ(fileBytes(file), garbage);
}

TEST(RunStoreSchema, ForeignDatabaseIsRefusedAndUntouched)
{
    TempDir dir("foreign");
    const auto file = dir / "other.sqlite";
    rawExec(file,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes VALUES (1, "
        "'hi');");
    const std::string before = fileBytes(file);
    auto store = RunStore::open(file);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message.find("not a Day0 run store"), std::string::npos)
        << store.error().message;
    EXPECT_EQ(fileBytes(file), before);

    rawExec(dir / "app.sqlite", "PRAGMA application_id = 1234;");
    EXPECT_FALSE(RunStore::open(dir / "app.sqlite").ok());
}

TEST(RunStoreSchema, CorruptPagesAreReportedNotRepaired)
{
    TempDir dir("corrupt");
    const auto file = dir / "runs.sqlite";
    {
        auto store = openOrDie(file);
        for (std::uint64_t seed = 1; seed <= 20; ++seed) {
            ASSERT_TRUE(store.commit(makeSeededRecord(seed, 400)).ok());
        }
    }
    // The store closed cleanly, so the WAL is checkpointed into the file; damage pages 3..
    std::string bytes = fileBytes(file);
    ASSERT_GT(bytes.size(), 20000u);
    for (std::size_t i = 8192; i < bytes.size(); i += 97) {
        bytes[i] = char(bytes[i] ^ 0x5a);
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

    auto store = RunStore::open(file);
    if (store.ok()) {
        const auto check = store->checkIntegrity();
        ASSERT_FALSE(check.ok());
        EXPECT_NE(check.error().message.find("runs.sqlite"), std::string::npos);
        EXPECT_NE(check.error().message.find("integrity check failed"), std::string::npos)
            << check.error().message;
    } else {
        EXPECT_NE(store.error().message.find("runs.sqlite"), std::string::npos);
    }
    EXPECT_EQ(fileBytes(file), bytes);
}

TEST(RunStoreSchema, MigrationsApplyInOrderAndRollBackOnFailure)
{
    TempDir dir("migrate");
    auto db = Database::open(dir / "m.sqlite", Database::Open::CreateIfMissing);
    ASSERT_TRUE(db.ok());
    const Migration steps[] = {
        { 1, "CREATE TABLE t (a INTEGER);" },
        { 2, "ALTER TABLE t ADD COLUMN b TEXT; INSERT INTO t VALUES (1, 'x');" },
        { 3, "CREATE TABLE u (c INTEGER); INSERT INTO nowhere VALUES (1);" },
    };
    ASSERT_TRUE(migrate(*db, std::span(steps, 2)).ok());
    EXPECT_EQ(*db->queryInt("PRAGMA user_version"), 2);
    EXPECT_EQ(*db->queryInt("SELECT count(*) FROM t WHERE b = 'x'"), 1);
    ASSERT_TRUE(migrate(*db, std::span(steps, 2)).ok()) << "applying again is a no-op";
    EXPECT_EQ(*db->queryInt("SELECT count(*) FROM t"), 1);

    auto failed = migrate(*db, steps);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.error().message.find("schema version 3"), std::string::npos)
        << failed.error().message;
    EXPECT_EQ(*db->queryInt("PRAGMA user_version"), 2);
    EXPECT_EQ(*db->queryInt("SELECT count(*) FROM sqlite_schema WHERE name = 'u'"), 0);

    auto newer = migrate(*db, std::span(steps, 1));
    ASSERT_FALSE(newer.ok());
    EXPECT_NE(newer.error().message.find("newer"), std::string::npos);
}

TEST(RunJson, ExportHoldsEverything)
{
    TempDir dir("json");
    auto store = openOrDie(dir / "runs.sqlite");
    const RunId id = *store.commit(fullRecord());
    const auto json = toJson(*store.load(id));
    EXPECT_EQ(json["id"], id.value());
    EXPECT_EQ(json["kind"], "verify");
    EXPECT_EQ(json["status"], "failed");
    EXPECT_EQ(json["model"], "kimi-k2");
    EXPECT_EQ(json["duration_s"], 12.5);
    EXPECT_EQ(json["properties"]["cluster"], "h200:32x8");
    EXPECT_EQ(json["metrics"][0]["value"], 1234.5);
    EXPECT_TRUE(json["metrics"][1]["value"].is_null()) << "NaN is written as null";
    EXPECT_EQ(json["memory"][0]["bytes"], 1LL << 40);
    EXPECT_EQ(json["artifacts"][1]["sha256"], std::string(64, 'a'));
    EXPECT_TRUE(json["artifacts"][1]["size"].is_null());
    EXPECT_EQ(json["events"][0]["level"], "warning");
    ASSERT_EQ(json["layer_metrics"].size(), 4u);
    EXPECT_EQ(json["layer_metrics"][0]["anchor"], "model.layers.0.self_attn.q_proj");
    EXPECT_EQ(json["layer_metrics"][0]["submodule"], "self_attn.q_proj");
    EXPECT_EQ(json["layer_metrics"][0]["layer"], 0);
    const std::string created = json["created"];
    EXPECT_EQ(created.size(), 27u);
    EXPECT_EQ(created.back(), 'Z');
    EXPECT_FALSE(toJson(*store.load(id), false).contains("layer_metrics"));
}
