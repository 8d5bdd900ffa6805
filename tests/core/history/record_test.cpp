#include "history/layer_metrics.h"
#include "history/recording.h"
#include "history/run_record.h"
#include "history/run_store.h"
#include "history/timestamp.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>

using namespace day0;
using namespace day0::history;

TEST(Anchor, SplitsLayerAndSubModule)
{
    const auto check = [](const char* anchor, int layer, const char* sub) {
        const AnchorPosition p = parseAnchor(anchor);
        EXPECT_EQ(p.layer, layer) << anchor;
        EXPECT_EQ(p.subModule, sub) << anchor;
    };
    check("model.layers.7.self_attn.q_proj", 7, "self_attn.q_proj");
    check("model.layers.7", 7, "");
    check("model.layers.12.mlp.experts.3", 12, "mlp.experts.3");
    check("model.layers.7#in0", 7, "#in0");
    check("model.layers.7.mlp#in0", 7, "mlp#in0");
    check("model.embed_tokens", -1, "model.embed_tokens");
    check("model.norm", -1, "model.norm");
    check("lm_head", -1, "lm_head");
    check("language_model.model.layers.3.mlp", 3, "mlp");
    check("model.language_model.layers.3.mlp", 3, "mlp");
    check("visual.blocks.2.attn", 2, "visual:attn");
    check("model.layers.x.mlp", -1, "model.layers.x.mlp");
    check("model.layers.", -1, "model.layers.");
    check("model.layers.3x.mlp", -1, "model.layers.3x.mlp");
}

TEST(LayerMetricsTable, InternsAndFindsDuplicates)
{
    LayerMetrics m;
    m.add("model.layers.0.mlp", "rel_l2", 0.1);
    m.add("model.layers.0.mlp", "max_abs", 0.2);
    m.add("model.layers.1.mlp", "rel_l2", 0.3);
    EXPECT_EQ(m.size(), 3u);
    EXPECT_EQ(m.names().size(), 5u) << "two anchors, one sub-module, two metrics";
    EXPECT_EQ(m.metricNames(), (std::vector<std::string> { "rel_l2", "max_abs" }));
    EXPECT_EQ(m.find("model.layers.1.mlp", "rel_l2"), 2u);
    EXPECT_FALSE(m.find("model.layers.1.mlp", "max_abs").has_value());
    EXPECT_EQ(m.firstDuplicate(), "");
    m.add("model.layers.1.mlp", "rel_l2", 0.4);
    EXPECT_EQ(m.firstDuplicate(), "model.layers.1.mlp / rel_l2");
}

TEST(LayerMetricsTable, DepthCurveFollowsLayers)
{
    LayerMetrics m;
    m.add("model.layers.2", "rel_l2", 0.3);
    m.add("model.layers.0", "rel_l2", 0.1);
    m.add("model.layers.1.mlp", "rel_l2", 9.0);
    m.add("model.layers.1", "rel_l2", 0.2);
    m.add("model.layers.1", "max_abs", 5.0);
    m.add("model.norm", "rel_l2", 7.0);
    const auto curve = depthCurve(m, "rel_l2");
    ASSERT_EQ(curve.size(), 3u);
    EXPECT_EQ(curve[0].layer, 0);
    EXPECT_EQ(curve[2].value, 0.3);
    const auto mlp = depthCurve(m, "rel_l2", "mlp");
    ASSERT_EQ(mlp.size(), 1u);
    EXPECT_EQ(mlp[0].value, 9.0);
}

TEST(RunRecordBuild, EnumsRoundTripAndRejectUnknown)
{
    for (RunKind k : { RunKind::Plan, RunKind::Verify, RunKind::Run, RunKind::Compare,
             RunKind::Trace, RunKind::Validate }) {
        EXPECT_EQ(parseRunKind(toString(k)).value(), k);
    }
    for (RunStatus s :
        { RunStatus::Ok, RunStatus::Failed, RunStatus::Error, RunStatus::Cancelled }) {
        EXPECT_EQ(parseRunStatus(toString(s)).value(), s);
    }
    const auto bad = parseRunKind("train");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(
        bad.error().message.find("plan, verify, run, compare, trace, validate"), std::string::npos);
    EXPECT_FALSE(parseRunStatus("passed").ok());
}

TEST(RunRecordBuild, UuidsAreV4AndDistinct)
{
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        const std::string u = makeUuid();
        ASSERT_TRUE(isUuid(u)) << u;
        EXPECT_EQ(u[14], '4');
        EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos);
        seen.insert(u);
    }
    EXPECT_EQ(seen.size(), 1000u);
    EXPECT_FALSE(isUuid("aaaa"));
    EXPECT_FALSE(isUuid("zzzzzzzz-0000-4000-8000-000000000000"));
}

TEST(RunRecordBuild, ValidateNamesTheField)
{
    RunRecord r(RunKind::Plan);
    r.addMemory(0, 0, "weights", Bytes(1)).addMemory(0, 0, "weights", Bytes(2));
    auto v = r.validate();
    ASSERT_FALSE(v.ok());
    EXPECT_NE(
        v.error().message.find("memory component 'weights' of rank 0 stage 0"), std::string::npos);
    RunRecord u(RunKind::Plan);
    u.info.uuid = "nope";
    EXPECT_FALSE(u.validate().ok());
    RunRecord p(RunKind::Plan);
    p.setProperty("a", "1").setProperty("a", "2");
    EXPECT_TRUE(p.validate().ok()) << "setProperty replaces";
    EXPECT_EQ(p.findProperty("a")->value, "2");
    RunRecord art(RunKind::Plan);
    art.addArtifact({ "dump", "", std::nullopt, "" });
    EXPECT_FALSE(art.validate().ok());
}

TEST(RunRecordBuild, MakeArtifactMeasuresFilesAndFolders)
{
    test::TempDir dir("artifact");
    std::filesystem::create_directories(dir / "dump" / "sub");
    std::ofstream(dir / "dump" / "a.bin") << std::string(100, 'x');
    std::ofstream(dir / "dump" / "sub" / "b.bin") << std::string(23, 'y');
    auto folder = makeArtifact("dump", dir / "dump");
    ASSERT_TRUE(folder.ok());
    EXPECT_EQ(folder->size, Bytes(123));
    EXPECT_TRUE(std::filesystem::path(folder->path).is_absolute());
    auto file = makeArtifact("trace", dir / "dump" / "a.bin");
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(file->size, Bytes(100));
    auto missing = makeArtifact("trace", dir / "nope.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("nope.json"), std::string::npos);
}

TEST(Time, ParsesDatesAgesAndIso)
{
    const Timestamp ref(std::chrono::seconds(1'750'000'000));
    EXPECT_EQ(parseTime("2h", ref).value(), ref - std::chrono::hours(2));
    EXPECT_EQ(parseTime("7d", ref).value(), ref - std::chrono::hours(7 * 24));
    EXPECT_EQ(parseTime("2w", ref).value(), ref - std::chrono::hours(14 * 24));
    EXPECT_EQ(parseTime("90m", ref).value(), ref - std::chrono::minutes(90));
    EXPECT_EQ(parseTime("2025-06-15T15:06:40Z", ref).value(), ref);
    const Timestamp precise = ref + std::chrono::microseconds(123456);
    EXPECT_EQ(parseTime(formatIso(precise), ref).value(), precise);
    EXPECT_EQ(formatIso(ref), "2025-06-15T15:06:40.000000Z");
    // Local dates: midnight local time; the day after is exactly 24 h later only without a DST
    // change, so compare through the local formatter instead.
    EXPECT_EQ(formatLocal(parseTime("2025-06-15", ref).value()), "2025-06-15 00:00:00");
    EXPECT_EQ(formatLocal(parseTime("2025-06-15 09:30", ref).value()), "2025-06-15 09:30:00");
    for (const char* bad :
        { "", "yesterday", "2025-13-01", "2025-06-15T25:00", "5y", "-3d", "2025-06-15Zx" }) {
        const auto r = parseTime(bad, ref);
        EXPECT_FALSE(r.ok()) << bad;
    }
    EXPECT_NE(
        parseTime("soon", ref).error().message.find("'soon' is not a time"), std::string::npos);
}

TEST(Recording, StorePathPrecedence)
{
    const RecordingOptions saved = recordingOptions();
    const char* savedStore = std::getenv("DAY0_STORE");
    const std::string savedStoreValue = savedStore ? savedStore : "";
    const char* savedXdg = std::getenv("XDG_DATA_HOME");
    const std::string savedXdgValue = savedXdg ? savedXdg : "";

    ::unsetenv("DAY0_STORE");
    ::setenv("XDG_DATA_HOME", "/data/xdg", 1);
    setRecordingOptions({});
    EXPECT_EQ(storePath(), std::filesystem::path("/data/xdg/day0/runs.sqlite"));
    ::setenv("XDG_DATA_HOME", "relative/ignored", 1);
    ::setenv("HOME", "/home/someone", 1);
    EXPECT_EQ(storePath(), std::filesystem::path("/home/someone/.local/share/day0/runs.sqlite"));
    ::setenv("DAY0_STORE", "/env/store.sqlite", 1);
    EXPECT_EQ(storePath(), std::filesystem::path("/env/store.sqlite"));
    RecordingOptions option;
    option.store = "/option/store.sqlite";
    setRecordingOptions(option);
    EXPECT_EQ(storePath(), std::filesystem::path("/option/store.sqlite"));

    setRecordingOptions(saved);
    if (savedStore) {
        ::setenv("DAY0_STORE", savedStoreValue.c_str(), 1);
    } else {
        ::unsetenv("DAY0_STORE");
    }
    if (savedXdg) {
        ::setenv("XDG_DATA_HOME", savedXdgValue.c_str(), 1);
    } else {
        ::unsetenv("XDG_DATA_HOME");
    }
}

TEST(Recording, RecordRunHonoursOptions)
{
    test::TempDir dir("record");
    const RecordingOptions saved = recordingOptions();
    const auto file = dir / "sub" / "runs.sqlite";

    RecordingOptions off;
    off.store = file;
    off.enabled = false;
    setRecordingOptions(off);
    auto skipped = recordRun(RunRecord(RunKind::Plan));
    ASSERT_TRUE(skipped.ok());
    EXPECT_FALSE(skipped->has_value());
    EXPECT_FALSE(std::filesystem::exists(file)) << "--no-record must not create the store";

    setRecordingOptions({ file, true, "9.9", "day0 plan x" });
    RunRecord r(RunKind::Plan);
    r.info.modelName = "kimi-k2";
    auto recorded = recordRun(r);
    ASSERT_TRUE(recorded.ok()) << recorded.error().message;
    ASSERT_TRUE(recorded->has_value());
    auto store = RunStore::open(file);
    ASSERT_TRUE(store.ok());
    const auto loaded = store->load(**recorded);
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(loaded->info.softwareVersion, "9.9");
    EXPECT_EQ(loaded->info.command, "day0 plan x");
    EXPECT_EQ(loaded->info.modelName, "kimi-k2");

    std::ofstream(dir / "bad.sqlite") << std::string(5000, 'z');
    RecordingOptions bad;
    bad.store = dir / "bad.sqlite";
    setRecordingOptions(bad);
    auto failed = recordRun(r);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.error().message.find("bad.sqlite"), std::string::npos);
    setRecordingOptions(saved);
}

TEST(Recording, SameResultIgnoresWhenAndWhere)
{
    const auto make = [] {
        RunRecord r(RunKind::Plan);
        r.info.modelName = "kimi-k2";
        r.info.plan = "tp=8";
        r.addMetric("tokens_per_s", 1.5e6, "tok/s");
        r.addMetric("nan", std::numeric_limits<double>::quiet_NaN());
        r.setProperty("cluster", "h200:32x8");
        r.addMemory(0, 0, "weights", Bytes(100));
        r.layers.add("model.layers.0", "rel_l2", 1e-3);
        return r;
    };
    RunRecord a = make();
    RunRecord b = make();
    b.info.uuid = makeUuid();
    b.info.host = "elsewhere";
    b.info.command = "day0 plan kimi-k2";
    b.info.duration = Seconds(3.0);
    b.addEvent(LogLevel::Info, "logged later");
    EXPECT_TRUE(sameResult(a, b)) << "NaN equals NaN; ids, times, host, events do not count";
    const auto differs = [&](auto change) {
        RunRecord c = make();
        change(c);
        return !sameResult(a, c);
    };
    EXPECT_TRUE(differs([](RunRecord& c) { c.info.plan = "tp=4"; }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.info.status = RunStatus::Failed; }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.metrics[0].value = 1.6e6; }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.metrics.pop_back(); }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.setProperty("cluster", "h200:16x8"); }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.memory[0].bytes = Bytes(101); }));
    EXPECT_TRUE(differs([](RunRecord& c) { c.layers.add("model.layers.1", "rel_l2", 1e-3); }));
    EXPECT_TRUE(differs([](RunRecord& c) {
        c.layers.clear();
        c.layers.add("model.layers.0", "rel_l2", 2e-3);
    }));
}

TEST(Recording, RecordRunOnceSkipsARepeatedResult)
{
    test::TempDir dir("record_once");
    const RecordingOptions saved = recordingOptions();
    const auto file = dir / "runs.sqlite";
    RecordingOptions options;
    options.store = file;
    setRecordingOptions(options);
    RunRecord r(RunKind::Plan);
    r.info.modelName = "kimi-k2";
    r.info.plan = "tp=8";
    r.addMetric("tokens_per_s", 1.0e6, "tok/s");
    const auto first = recordRunOnce(r);
    ASSERT_TRUE(first.ok()) << first.error().message;
    ASSERT_TRUE(first->has_value());
    EXPECT_TRUE((*first)->added);
    r.info.duration = Seconds(2.0); // another sweep, same outcome
    const auto again = recordRunOnce(r);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE((*again)->added);
    EXPECT_EQ((*again)->id, (*first)->id);
    // A different model whose name contains this one is not "the same model".
    RunRecord shrunk = r;
    shrunk.info.modelName = "kimi-k2-shrunk";
    ASSERT_TRUE(recordRunOnce(shrunk).value()->added);
    EXPECT_FALSE(recordRunOnce(r).value()->added);
    // A changed result is recorded, and then is the newest to compare against.
    r.metrics.front().value = 1.1e6;
    EXPECT_TRUE(recordRunOnce(r).value()->added);
    r.metrics.front().value = 1.0e6;
    EXPECT_TRUE(recordRunOnce(r).value()->added) << "only the newest run is compared";
    auto store = RunStore::open(file);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(store->count().value(), 4);

    options.enabled = false;
    setRecordingOptions(options);
    r.metrics.front().value = 7.0;
    const auto off = recordRunOnce(r);
    ASSERT_TRUE(off.ok());
    EXPECT_FALSE(off->has_value());
    EXPECT_EQ(store->count().value(), 4);
    setRecordingOptions(saved);
}

TEST(LayerMetricsTable, SummarizeFindsSpreadAndNaN)
{
    LayerMetrics m;
    m.add("model.layers.0", "rel_l2", 0.2);
    m.add("model.layers.1", "rel_l2", std::numeric_limits<double>::quiet_NaN());
    m.add("model.layers.2", "rel_l2", 0.7);
    m.add("model.layers.3", "rel_l2", 0.1);
    m.add("model.layers.0", "cos", std::numeric_limits<double>::quiet_NaN());
    const auto stats = summarize(m);
    ASSERT_EQ(stats.size(), 2u);
    EXPECT_EQ(stats[0].metric, "rel_l2");
    EXPECT_EQ(stats[0].count, 4u);
    EXPECT_EQ(stats[0].nanCount, 1u);
    EXPECT_EQ(stats[0].min, 0.1);
    EXPECT_EQ(stats[0].max, 0.7);
    EXPECT_EQ(stats[0].maxAnchor, "model.layers.2");
    EXPECT_TRUE(std::isnan(stats[1].max));
    EXPECT_EQ(stats[1].maxAnchor, "");
}
