// The runs the panels record look like the runs `day0` records for the same command: the same
// kind, header fields, property keys and metric names and units (values too where the work is
// deterministic). Runs the day0 binary when it is built, into the same scratch store.
#include "checkpoint/shrink.h"
#include "panels/model/checkpoint_view.h"
#include "panels/pipeline/pipeline_panel.h"
#include "panels/planner/planner_panel.h"
#include "panels/precision/precision_work.h"
#include "panels/timeline/timeline_panel.h"
#include "panels/topology/topology_panel.h"
#include "ui_test_support.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace day0;
using namespace day0::ui;
namespace fs = std::filesystem;

namespace {

/// `day0 <args> --store <the scratch store> -q`; the run it recorded, or nullopt with a failure.
std::optional<history::RunRecord> recordedByCli(QStringList args)
{
    const QString exe = QStringLiteral(DAY0_CLI_PATH);
    args << QStringLiteral("--store") << toQString(history::storePath().string())
         << QStringLiteral("-q");
    QProcess process;
    process.start(exe, args);
    EXPECT_TRUE(process.waitForFinished(120000));
    EXPECT_EQ(process.exitCode(), 0) << process.readAllStandardError().toStdString();
    auto store = history::RunStore::open(history::storePath());
    EXPECT_TRUE(store.ok());
    history::RunFilter newest;
    newest.limit = 1;
    auto runs = store->list(newest);
    if (!runs || runs->empty()) {
        ADD_FAILURE() << "day0 " << args.join(QLatin1Char(' ')).toStdString()
                      << " recorded nothing";
        return std::nullopt;
    }
    auto run = store->load(runs->front().id);
    EXPECT_TRUE(run.ok());
    return run.ok() ? std::optional(std::move(*run)) : std::nullopt;
}

std::vector<std::string> propertyKeys(const history::RunRecord& r)
{
    std::vector<std::string> keys;
    for (const auto& p : r.properties) {
        keys.push_back(p.key);
    }
    return keys;
}

std::vector<std::string> metricNames(const history::RunRecord& r)
{
    std::vector<std::string> names;
    for (const auto& m : r.metrics) {
        names.push_back(m.name + " [" + m.unit + "]");
    }
    return names;
}

/// The same shape: header fields, property keys, metric names and units, in order.
void expectAlike(const history::RunRecord& gui, const history::RunRecord& cli)
{
    EXPECT_EQ(gui.info.kind, cli.info.kind);
    EXPECT_EQ(gui.info.status, cli.info.status);
    EXPECT_EQ(gui.info.modelName, cli.info.modelName);
    EXPECT_EQ(gui.info.modelFingerprint, cli.info.modelFingerprint);
    EXPECT_EQ(gui.info.plan, cli.info.plan);
    EXPECT_EQ(gui.info.precision, cli.info.precision);
    EXPECT_EQ(gui.info.backend, cli.info.backend);
    EXPECT_EQ(gui.info.message, cli.info.message);
    EXPECT_EQ(propertyKeys(gui), propertyKeys(cli));
    EXPECT_EQ(metricNames(gui), metricNames(cli));
    EXPECT_EQ(gui.artifacts.size(), cli.artifacts.size());
}

history::RunRecord load(qint64 id)
{
    auto store = history::RunStore::open(history::storePath());
    EXPECT_TRUE(store.ok());
    auto run = store->load(RunId(id));
    EXPECT_TRUE(run.ok()) << run.error().message;
    return std::move(run).value();
}

bool cliBuilt()
{
    const QString exe = QStringLiteral(DAY0_CLI_PATH);
    return !exe.isEmpty() && QFileInfo::exists(exe);
}

} // namespace

TEST(RecordAlike, ModelPanelVerifyAsDay0Verify)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    const fs::path ckpt = fs::path(scratch.dir().toStdString()) / "kimi-small";
    Progress progress;
    ASSERT_TRUE(checkpoint::shrinkModel("kimi-k2", ckpt, {}, progress, {}).ok());
    JobRunner jobs;
    CheckpointView view(jobs);
    QSignalSpy recorded(&view, &CheckpointView::runRecorded);
    view.openCheckpoint(toQString(ckpt.string()));
    test::settle(jobs);
    view.verify();
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 1) << view.errorText().toStdString();
    const auto gui = load(recorded.at(0).at(0).toLongLong());
    const auto cli = recordedByCli({ QStringLiteral("verify"), toQString(ckpt.string()) });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    EXPECT_EQ(gui.properties.front().value, cli->properties.front().value) << "the path";
    for (const char* m : { "files", "tensors", "tensor_bytes", "bytes_hashed", "tensors_ok" }) {
        ASSERT_NE(gui.findMetric(m), nullptr) << m;
        EXPECT_EQ(gui.findMetric(m)->value, cli->findMetric(m)->value) << m;
    }
}

TEST(RecordAlike, TopologyRunAsDay0RunPlan)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x2", plan::Mode::Infer, "tp=2,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    QSignalSpy recorded(&session, &Session::runRecorded);
    panel.runPlan();
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 1) << panel.runStatus().toStdString();
    const auto gui = load(recorded.at(0).at(0).toLongLong());
    const auto* checkpoint = gui.findProperty("checkpoint");
    ASSERT_NE(checkpoint, nullptr);
    // The panel's prompt (one replica) and token count, given to the CLI.
    const auto cli = recordedByCli({ QStringLiteral("run"), toQString(checkpoint->value),
        QStringLiteral("--plan"), toQString(gui.info.plan), QStringLiteral("--ranks"),
        QStringLiteral("in-process"), QStringLiteral("--ids"), QStringLiteral("1,2,3,5,8"),
        QStringLiteral("--tokens"), QStringLiteral("4") });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    for (const char* p :
        { "checkpoint", "ranks", "communicator", "sequence0.prompt_ids", "sequence0.generated" }) {
        ASSERT_NE(cli->findProperty(p), nullptr) << p;
        EXPECT_EQ(gui.findProperty(p)->value, cli->findProperty(p)->value) << p;
    }
}

TEST(RecordAlike, TimelineTraceAsDay0TraceImport)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    TimelinePanel panel(session, jobs);
    QSignalSpy recorded(&session, &Session::runRecorded);
    const QString file = QFileInfo(QString::fromUtf8(DAY0_TEST_DATA_DIR)
        + QStringLiteral("/profile/hta_simple_add_rank0.json.gz"))
                             .absoluteFilePath();
    panel.openTraces({ file });
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 1);
    const auto gui = load(recorded.at(0).at(0).toLongLong());
    const auto cli = recordedByCli({ QStringLiteral("trace"), QStringLiteral("import"), file });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    EXPECT_TRUE(history::sameResult(gui, *cli)) << "the same files give the same result";
}

// Metric values both records must hold equal: the comparison is deterministic (same weights,
// same prompt, same precisions); times are not.
void expectSameComparison(const history::RunRecord& gui, const history::RunRecord& cli)
{
    for (const char* m : { "compared_captures", "verdict_pass", "verdict_warn", "verdict_fail",
             "verdict_not_judged", "logits_kl_mean", "logits_top1_agreement", "max_rel_l2" }) {
        ASSERT_NE(gui.findMetric(m), nullptr) << m;
        ASSERT_NE(cli.findMetric(m), nullptr) << m;
        EXPECT_EQ(gui.findMetric(m)->value, cli.findMetric(m)->value) << m;
        EXPECT_EQ(gui.findMetric(m)->unit, cli.findMetric(m)->unit) << m;
    }
    for (const char* p : { "verdict", "tolerance_table", "max_rel_l2_anchor" }) {
        ASSERT_NE(gui.findProperty(p), nullptr) << p;
        EXPECT_EQ(gui.findProperty(p)->value, cli.findProperty(p)->value) << p;
    }
    // The same layer metrics, value for value: what the Runs panel's heatmap compares.
    ASSERT_EQ(gui.layers.size(), cli.layers.size());
    EXPECT_GT(gui.layers.size(), 0u);
    for (std::size_t i = 0; i < gui.layers.size(); ++i) {
        const double a = gui.layers.row(i).value;
        const double b = cli.layers.row(i).value;
        EXPECT_EQ(gui.layers.anchor(i), cli.layers.anchor(i)) << i;
        EXPECT_EQ(gui.layers.metric(i), cli.layers.metric(i)) << i;
        EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b)))
            << gui.layers.anchor(i) << " " << gui.layers.metric(i);
    }
}

TEST(RecordAlike, PrecisionPanelRunAsDay0RunWithAReference)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    const fs::path ckpt = fs::path(scratch.dir().toStdString()) / "llama-small";
    Progress progress;
    ASSERT_TRUE(checkpoint::shrinkModel("llama-3.1-8b", ckpt, {}, progress, {}).ok());
    PrecisionRunRequest request;
    request.modelSource = ckpt.string();
    request.prompt = "1, 2, 3";
    request.tokens = 2;
    auto run = runPrecision(request, progress, {});
    ASSERT_TRUE(run) << run.error().message;
    ASSERT_TRUE((*run)->recordedRun) << (*run)->recordError;
    const auto gui = load(*(*run)->recordedRun);
    // The panel runs bf16 against fp32 with inject mode, as these flags do.
    const auto cli = recordedByCli({ QStringLiteral("run"), toQString(ckpt.string()),
        QStringLiteral("--ids"), QStringLiteral("1,2,3"), QStringLiteral("--tokens"),
        QStringLiteral("2"), QStringLiteral("--precision"), QStringLiteral("bf16"),
        QStringLiteral("--reference"), QStringLiteral("fp32"), QStringLiteral("--inject") });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    expectSameComparison(gui, *cli);
    for (const char* p : { "checkpoint", "prompt_ids", "generated", "reference" }) {
        ASSERT_NE(cli->findProperty(p), nullptr) << p;
        EXPECT_EQ(gui.findProperty(p)->value, cli->findProperty(p)->value) << p;
    }
}

TEST(RecordAlike, PrecisionPanelCompareAsDay0Compare)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    const fs::path dir(scratch.dir().toStdString());
    Progress progress;
    ASSERT_TRUE(checkpoint::shrinkModel("llama-3.1-8b", dir / "ckpt", {}, progress, {}).ok());
    // Two dumps of the same prompt, bf16 and fp32, written by day0 itself.
    for (const auto& [name, precision] : { std::pair { "ref", "fp32" }, { "tgt", "bf16" } }) {
        QProcess process;
        process.start(QStringLiteral(DAY0_CLI_PATH),
            { QStringLiteral("run"), toQString((dir / "ckpt").string()), QStringLiteral("--ids"),
                QStringLiteral("1,2,3"), QStringLiteral("--tokens"), QStringLiteral("2"),
                QStringLiteral("--precision"), QString::fromLatin1(precision),
                QStringLiteral("--dump"), toQString((dir / name).string()),
                QStringLiteral("--no-record"), QStringLiteral("-q") });
        ASSERT_TRUE(process.waitForFinished(120000));
        ASSERT_EQ(process.exitCode(), 0) << process.readAllStandardError().toStdString();
    }
    auto run = compareDumpFolders(dir / "ref", dir / "tgt", progress, {});
    ASSERT_TRUE(run) << run.error().message;
    ASSERT_TRUE((*run)->recordedRun) << (*run)->recordError;
    const auto gui = load(*(*run)->recordedRun);
    const auto cli = recordedByCli({ QStringLiteral("compare"), toQString((dir / "ref").string()),
        toQString((dir / "tgt").string()) });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    expectSameComparison(gui, *cli);
}

TEST(RecordAlike, PipelinePanelValidationAsDay0Validate)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-0.6b");
    PipelinePanel panel(session, jobs);
    panel.setWorkDir(scratch.dir() + QStringLiteral("/gui"));
    QSignalSpy recorded(&session, &Session::runRecorded);
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    panel.startButton()->click();
    QElapsedTimer clock;
    clock.start();
    while (finished.count() == 0 && clock.elapsed() < 120000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    }
    ASSERT_EQ(finished.count(), 1) << "the validation did not end";
    ASSERT_EQ(recorded.count(), 1);
    const auto gui = load(recorded.at(0).at(0).toLongLong());
    // The panel writes its three reports into its work folder; the CLI is asked for the same.
    const QString cliWork = scratch.dir() + QStringLiteral("/cli");
    const auto cli = recordedByCli(
        { QStringLiteral("validate"), QStringLiteral("qwen3-0.6b"), QStringLiteral("--work"),
            cliWork, QStringLiteral("--junit"), cliWork + QStringLiteral("/junit.xml"),
            QStringLiteral("--report"), cliWork + QStringLiteral("/report.html"),
            QStringLiteral("--json-report"), cliWork + QStringLiteral("/report.json") });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    EXPECT_EQ(gui.info.status, history::RunStatus::Ok) << gui.info.message;
    // What does not depend on timing: the steps' verdicts and the counts of the checkpoint
    // (shrunk with the same seed) and of its shards.
    for (const auto& p : gui.properties) {
        ASSERT_NE(cli->findProperty(p.key), nullptr) << p.key;
        EXPECT_EQ(p.value, cli->findProperty(p.key)->value) << p.key;
    }
    for (const char* m : { "steps_passed", "weights.files", "weights.tensors",
             "weights.tensor_bytes", "weights.shrunk_parameters" }) {
        ASSERT_NE(gui.findMetric(m), nullptr) << m;
        EXPECT_EQ(gui.findMetric(m)->value, cli->findMetric(m)->value) << m;
    }
    EXPECT_EQ(gui.layers.size(), cli->layers.size());
}

TEST(RecordAlike, PlannerPanelSweepAsDay0Plan)
{
    if (!cliBuilt()) {
        GTEST_SKIP() << "day0 is not built";
    }
    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    test::openModel(session, "qwen3-30b-a3b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=1");
    // The panel may plan as soon as it sees the model; a repeated identical sweep adds no run.
    QSignalSpy recorded(&session, &Session::runRecorded);
    PlannerPanel panel(session, jobs);
    test::settle(jobs);
    panel.runPlanner();
    test::settle(jobs);
    ASSERT_GE(recorded.count(), 1);
    const auto gui = load(recorded.back().at(0).toLongLong());
    // The panel keeps 200 layouts with its default 10% headroom; the session's workload is the
    // CLI's default.
    const auto cli = recordedByCli({ QStringLiteral("plan"), QStringLiteral("qwen3-30b-a3b"),
        QStringLiteral("--cluster"), QStringLiteral("h200:2x8"), QStringLiteral("--mode"),
        QStringLiteral("train"), QStringLiteral("--top"), QStringLiteral("200"),
        QStringLiteral("--headroom"), QStringLiteral("0.1") });
    ASSERT_TRUE(cli);
    expectAlike(gui, *cli);
    // The sweep is deterministic: the same best layout with the same figures.
    for (const auto& p : cli->properties) {
        ASSERT_NE(gui.findProperty(p.key), nullptr) << p.key;
        EXPECT_EQ(gui.findProperty(p.key)->value, p.value) << p.key;
    }
    for (const auto& m : cli->metrics) {
        ASSERT_NE(gui.findMetric(m.name), nullptr) << m.name;
        EXPECT_DOUBLE_EQ(gui.findMetric(m.name)->value, m.value) << m.name;
    }
}
