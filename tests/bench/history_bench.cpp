// How fast the run store writes and lists. Baselines, measured in the same run on the same
// schema, pragmas and disk:
//  - writing 100,000 per-anchor layer metrics with RunStore::commit (validation, name interning,
//    the run row, one transaction) against a plain loop over one prepared INSERT with the ids
//    computed beforehand (goal: within 1.2x, under 1 s);
//  - listing 10,000 runs with RunStore::list against stepping a raw SELECT of the same columns
//    (goal: under 100 ms).
// The figures are printed after the benchmark table, as ratios to their baselines.

#include "bench_support.h"
#include "history/run_store.h"
#include "history/schema.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>

namespace {

using namespace day0;
using namespace day0::history;

constexpr std::size_t kLayerRows = 100'000;
constexpr int kListedRuns = 10'000;

[[noreturn]] void fail(const std::string& what) { bench::fail("history_bench", what); }

const std::filesystem::path& benchDir() { return bench::scratchDir("history_bench"); }

// Kimi-K2-shaped layer metrics: 61 layers, 384 experts plus the attention and norm modules,
// four error metrics each, cut at 100,000 rows.
const RunRecord& bigRun()
{
    static const RunRecord record = [] {
        RunRecord r(RunKind::Run);
        r.info.modelName = "kimi-k2";
        r.info.precision = "fp8";
        const char* metrics[] = { "rel_l2", "max_abs", "cosine", "snr_db" };
        std::mt19937_64 rng(42);
        std::uniform_real_distribution<double> value(1e-4, 1e-1);
        r.layers.reserve(kLayerRows);
        for (int layer = 0; r.layers.size() < kLayerRows; ++layer) {
            std::vector<std::string> anchors;
            for (const char* sub : { "input_layernorm", "self_attn.q_a_proj",
                     "self_attn.kv_a_proj_with_mqa", "self_attn.o_proj", "self_attn",
                     "post_attention_layernorm", "mlp.gate", "mlp.shared_experts" }) {
                anchors.push_back(fmt::format("model.layers.{}.{}", layer, sub));
            }
            for (int expert = 0; expert < 384; ++expert) {
                anchors.push_back(fmt::format("model.layers.{}.mlp.experts.{}", layer, expert));
            }
            anchors.push_back(fmt::format("model.layers.{}.mlp", layer));
            anchors.push_back(fmt::format("model.layers.{}", layer));
            for (const auto& anchor : anchors) {
                for (const char* metric : metrics) {
                    if (r.layers.size() < kLayerRows) {
                        r.layers.add(anchor, metric, value(rng));
                    }
                }
            }
        }
        return r;
    }();
    return record;
}

RunStore openStore(const std::string& name)
{
    auto store = RunStore::open(benchDir() / name);
    if (!store) {
        fail(store.error().message);
    }
    return std::move(store).value();
}

void check(int rc, sqlite3* db, const char* what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fail(fmt::format("{}: {}", what, sqlite3_errmsg(db)));
    }
}

void exec(sqlite3* db, const char* sql)
{
    check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), db, sql);
}

// The floor: one prepared INSERT stepped 100,000 times inside one transaction, ids known.
void rawInsertLoop(benchmark::State& state)
{
    const RunRecord& run = bigRun();
    const auto file = benchDir() / "raw.sqlite";
    { // create the same schema, and the names, through the store
        auto store = openStore("raw.sqlite");
        if (!store.commit(run)) {
            fail("seeding raw.sqlite");
        }
    }
    sqlite3* db = nullptr;
    check(sqlite3_open(file.c_str(), &db), db, "open");
    sqlite3_busy_timeout(db, 15000);
    exec(db, "PRAGMA journal_mode = WAL");
    exec(db, "PRAGMA synchronous = FULL");
    exec(db, "PRAGMA foreign_keys = ON");
    // Name ids as the store assigned them: text -> id.
    std::map<std::string, std::int64_t> ids;
    sqlite3_stmt* names = nullptr;
    check(sqlite3_prepare_v2(db, "SELECT id, text FROM names", -1, &names, nullptr), db, "names");
    while (sqlite3_step(names) == SQLITE_ROW) {
        ids[reinterpret_cast<const char*>(sqlite3_column_text(names, 1))]
            = sqlite3_column_int64(names, 0);
    }
    sqlite3_finalize(names);
    std::vector<std::int64_t> local(run.layers.names().size());
    for (std::size_t i = 0; i < local.size(); ++i) {
        local[i] = ids.at(run.layers.names()[i]);
    }

    sqlite3_stmt* runInsert = nullptr;
    check(sqlite3_prepare_v2(db,
              "INSERT INTO runs (uuid, kind, created_us, status) VALUES (?1, 'run', 0, 'ok')", -1,
              &runInsert, nullptr),
        db, "prepare run");
    sqlite3_stmt* insert = nullptr;
    check(sqlite3_prepare_v2(db,
              "INSERT INTO layer_metrics (run_id, seq, anchor_id, layer, submodule_id, metric_id, "
              "value) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
              -1, &insert, nullptr),
        db, "prepare");
    for (auto _ : state) {
        exec(db, "BEGIN IMMEDIATE");
        const std::string uuid = makeUuid();
        sqlite3_bind_text(runInsert, 1, uuid.c_str(), -1, SQLITE_TRANSIENT);
        check(sqlite3_step(runInsert), db, "insert run");
        sqlite3_reset(runInsert);
        const std::int64_t runId = sqlite3_last_insert_rowid(db);
        sqlite3_bind_int64(insert, 1, runId);
        const auto& rows = run.layers.rows();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            sqlite3_bind_int64(insert, 2, std::int64_t(i));
            sqlite3_bind_int64(insert, 3, local[rows[i].anchor]);
            sqlite3_bind_int64(insert, 4, rows[i].layer);
            sqlite3_bind_int64(insert, 5, local[rows[i].subModule]);
            sqlite3_bind_int64(insert, 6, local[rows[i].metric]);
            sqlite3_bind_double(insert, 7, rows[i].value);
            check(sqlite3_step(insert), db, "insert");
            sqlite3_reset(insert);
        }
        exec(db, "COMMIT");
    }
    sqlite3_finalize(insert);
    sqlite3_finalize(runInsert);
    sqlite3_close(db);
    state.counters["rows"] = double(kLayerRows);
}

// RunStore::commit of a run holding the same 100,000 rows.
void storeCommit(benchmark::State& state)
{
    const RunRecord& run = bigRun();
    auto store = openStore("store.sqlite");
    if (!store.commit(run)) { // the names exist from here on, as in the baseline
        fail("seeding store.sqlite");
    }
    for (auto _ : state) {
        auto id = store.commit(run);
        if (!id) {
            fail(id.error().message);
        }
    }
    state.counters["rows"] = double(kLayerRows);
}

// The engine's side: filling a RunRecord with 100,000 layer metrics.
void buildRecord(benchmark::State& state)
{
    const RunRecord& source = bigRun();
    for (auto _ : state) {
        LayerMetrics layers;
        layers.reserve(kLayerRows);
        for (std::size_t i = 0; i < source.layers.size(); ++i) {
            layers.add(
                source.layers.anchor(i), source.layers.metric(i), source.layers.row(i).value);
        }
        benchmark::DoNotOptimize(layers.rows().data());
    }
}

RunStore& listedStore()
{
    static RunStore store = [] {
        auto s = openStore("list.sqlite");
        std::vector<RunRecord> runs;
        runs.reserve(kListedRuns);
        const Timestamp start = now();
        for (int i = 0; i < kListedRuns; ++i) {
            RunRecord r(RunKind(i % 6));
            r.info.created = start - std::chrono::minutes(i);
            r.info.label = fmt::format("nightly {}", i);
            r.info.modelName = i % 2 ? "kimi-k2" : "deepseek-v3";
            r.info.plan = "tp=8,pp=4,ep=16";
            r.info.precision = i % 3 ? "bf16" : "fp8";
            r.info.backend = "cuda";
            r.info.duration = Seconds(double(i % 100));
            r.addMetric("tokens_per_s", double(i));
            runs.push_back(std::move(r));
        }
        if (!s.commitAll(runs)) {
            fail("seeding list.sqlite");
        }
        return s;
    }();
    return store;
}

void storeList(benchmark::State& state)
{
    RunStore& store = listedStore();
    for (auto _ : state) {
        auto runs = store.list();
        if (!runs || runs->size() != std::size_t(kListedRuns)) {
            fail("listing");
        }
        benchmark::DoNotOptimize(runs->data());
    }
    state.counters["runs"] = kListedRuns;
}

void rawSelect(benchmark::State& state)
{
    listedStore();
    sqlite3* db = nullptr;
    check(sqlite3_open((benchDir() / "list.sqlite").c_str(), &db), db, "open");
    sqlite3_stmt* stmt = nullptr;
    check(sqlite3_prepare_v2(db,
              "SELECT id, uuid, kind, created_us, label, status, model_name, model_fingerprint, "
              "plan, "
              "precision, backend, host, software_version, command, message, duration_s FROM runs "
              "ORDER BY created_us DESC, id DESC",
              -1, &stmt, nullptr),
        db, "prepare");
    for (auto _ : state) {
        std::size_t bytes = 0;
        while (sqlite3_step(stmt) == SQLITE_ROW) {
            for (int c = 0; c < 16; ++c) {
                bytes += std::size_t(sqlite3_column_bytes(stmt, c));
            }
        }
        sqlite3_reset(stmt);
        benchmark::DoNotOptimize(bytes);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

BENCHMARK(rawInsertLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(storeCommit)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(buildRecord)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(rawSelect)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(storeList)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Prints the figures as ratios to their baselines.
void printSummary(const day0::bench::BenchTimes& times)
{
    const auto ms
        = [&](const char* name) { return times.real(name + std::string("/real_time")) * 1e3; };
    const double raw = ms("rawInsertLoop");
    const double commit = ms("storeCommit");
    const double build = ms("buildRecord");
    const double select = ms("rawSelect");
    const double list = ms("storeList");
    if (raw > 0.0 && commit > 0.0) {
        fmt::print("\nwriting {} layer metrics in one run:\n", kLayerRows);
        fmt::print("  RunStore::commit     {:8.1f} ms  {:5.2f}x the plain insert loop ({:.1f} ms)  "
                   "goal <= 1.2x and < 1000 ms: {}\n",
            commit, commit / raw, raw, commit / raw <= 1.2 && commit < 1000.0 ? "met" : "MISSED");
        if (build > 0.0) {
            fmt::print("  filling the record   {:8.1f} ms  {:5.2f}x the plain insert loop "
                       "(engine side)\n",
                build, build / raw);
        }
    }
    if (select > 0.0 && list > 0.0) {
        fmt::print("listing {} runs:\n", kListedRuns);
        fmt::print(
            "  RunStore::list       {:8.1f} ms  {:5.2f}x stepping the raw SELECT ({:.1f} ms)  "
            "goal < 100 ms: {}\n",
            list, list / select, select, list < 100.0 ? "met" : "MISSED");
    }
}

} // namespace

int main(int argc, char** argv) { return day0::bench::runBenchmarks(argc, argv, printSummary); }
