// The runs the panels record look like the runs `day0` records for the same command: the same
// kind, header fields, property keys and metric names and units (values too where the work is
// deterministic). Runs the day0 binary when it is built, into the same scratch store.
#include "checkpoint/shrink.h"
#include "panels/model/checkpoint_view.h"
#include "panels/timeline/timeline_panel.h"
#include "panels/topology/topology_panel.h"
#include "ui_test_support.h"

#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>

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
