#include "checkpoint/checkpoint_report.h"
#include "checkpoint/shrink.h"
#include "panels/model/checkpoint_table_model.h"
#include "panels/model/checkpoint_view.h"
#include "panels/model/model_panel.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "ui_test_support.h"

#include <QAbstractItemModelTester>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace day0;
using namespace day0::ui;
namespace ck = day0::checkpoint;
namespace fs = std::filesystem;

namespace {

/// A shrunk Kimi-K2 checkpoint (sharded, with index and manifest), made once per test program.
const fs::path& shrunkKimi()
{
    static QTemporaryDir dir;
    static const fs::path path = [] {
        const fs::path out = fs::path(dir.path().toStdString()) / "kimi-small";
        Progress progress;
        auto r = ck::shrinkModel("kimi-k2", out, {}, progress, {});
        EXPECT_TRUE(r.ok()) << r.error().message;
        return out;
    }();
    return path;
}

/// A private copy of the shrunk checkpoint that a test may damage.
fs::path copyOf(const QTemporaryDir& dir)
{
    const fs::path out = fs::path(dir.path().toStdString()) / "ckpt";
    fs::copy(shrunkKimi(), out, fs::copy_options::recursive);
    return out;
}

QString q(const fs::path& p) { return QString::fromStdString(p.string()); }

void openAndWait(CheckpointView& view, JobRunner& jobs, const fs::path& path)
{
    QSignalSpy opened(&view, &CheckpointView::opened);
    view.openCheckpoint(q(path));
    EXPECT_TRUE(view.busy());
    test::settle(jobs);
    EXPECT_FALSE(view.busy());
}

int rowsWithStatus(const CheckpointTableModel& model, ck::TensorStatus status)
{
    int n = 0;
    for (int r = 0; r < model.rowCount(); ++r) {
        n += model.index(r, 0).data(CheckpointTableModel::StatusRole).toInt() == int(status);
    }
    return n;
}

} // namespace

TEST(CheckpointTableModel, PassesModelTesterAndShowsExpectedValuesOfMissingTensors)
{
    CheckpointTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    ck::TensorReport report;
    report.checked = true;
    report.rows.push_back({ "a.weight", "BF16", { 4, 8 }, "model-1.safetensors", 64,
        ck::TensorStatus::Ok, "BF16", { 4, 8 }, "" });
    report.rows.push_back({ "b.weight", "", {}, "", 0, ck::TensorStatus::Missing, "F32", { 3 },
        "b.weight: missing" });
    report.bytes = 64;
    model.setReport(report);
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_EQ(
        model.index(0, CheckpointTableModel::Shape).data().toString(), QStringLiteral("[4, 8]"));
    EXPECT_EQ(model.index(0, CheckpointTableModel::File).data().toString(),
        QStringLiteral("model-1.safetensors"));
    EXPECT_EQ(model.index(0, CheckpointTableModel::Status).data().toString(), QStringLiteral("ok"));
    EXPECT_EQ(model.index(1, CheckpointTableModel::Dtype).data().toString(), QStringLiteral("F32"));
    EXPECT_EQ(model.index(1, CheckpointTableModel::Shape).data().toString(), QStringLiteral("[3]"));
    EXPECT_EQ(
        model.index(1, CheckpointTableModel::Status).data().toString(), QStringLiteral("missing"));
    EXPECT_EQ(
        model.index(1, 0).data(Qt::ToolTipRole).toString(), QStringLiteral("b.weight: missing"));
    model.setReport({});
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(CheckpointView, ListsTheTensorsOfAShrunkCheckpointAgainstItsConfig)
{
    JobRunner jobs;
    CheckpointView view(jobs);
    openAndWait(view, jobs, shrunkKimi());
    EXPECT_TRUE(view.errorText().isEmpty()) << view.errorText().toStdString();

    // The same rows as the core listing that `day0 inspect --tensors` prints.
    auto opened = ck::Checkpoint::open(shrunkKimi());
    ASSERT_TRUE(opened.ok());
    auto expected = ck::reportTensors(*opened);
    ASSERT_TRUE(expected.ok());
    ASSERT_TRUE(expected->checked);
    const auto* model = view.tableModel();
    ASSERT_EQ(model->rowCount(), int(expected->rows.size()));
    EXPECT_GT(model->rowCount(), 50);
    for (int r = 0; r < model->rowCount(); ++r) {
        const auto& row = expected->rows[std::size_t(r)];
        ASSERT_EQ(
            model->index(r, CheckpointTableModel::Name).data().toString().toStdString(), row.name);
        ASSERT_EQ(
            model->index(r, CheckpointTableModel::File).data().toString().toStdString(), row.file);
        ASSERT_EQ(
            model->index(r, CheckpointTableModel::Status).data().toString(), QStringLiteral("ok"));
    }
    EXPECT_EQ(rowsWithStatus(*model, ck::TensorStatus::Ok), model->rowCount());
    EXPECT_TRUE(view.summaryText().contains(QStringLiteral("%1 ok").arg(model->rowCount())))
        << view.summaryText().toStdString();
    EXPECT_TRUE(view.summaryText().contains(QStringLiteral("sharded safetensors")));

    // Name filter and sorting by bytes.
    auto* proxy = view.filterModel();
    proxy->setNameFilter(QStringLiteral("layers.1.mlp.experts.3."));
    EXPECT_GE(proxy->rowCount(), 3);
    for (int r = 0; r < proxy->rowCount(); ++r) {
        EXPECT_TRUE(proxy->index(r, 0).data().toString().contains(QStringLiteral("experts.3.")));
    }
    proxy->setNameFilter({});
    proxy->sort(CheckpointTableModel::Bytes, Qt::DescendingOrder);
    for (int r = 1; r < proxy->rowCount(); ++r) {
        ASSERT_GE(proxy->index(r - 1, CheckpointTableModel::Bytes)
                      .data(CheckpointTableModel::SortRole)
                      .toULongLong(),
            proxy->index(r, CheckpointTableModel::Bytes)
                .data(CheckpointTableModel::SortRole)
                .toULongLong());
    }
}

TEST(CheckpointView, MarksMissingTensorsWhenTheConfigAsksForMoreLayers)
{
    QTemporaryDir dir;
    const auto path = copyOf(dir);
    nlohmann::json config;
    std::ifstream(path / "config.json") >> config;
    const int layers = config["num_hidden_layers"].get<int>();
    config["num_hidden_layers"] = layers + 1;
    std::ofstream(path / "config.json") << config.dump(2);

    JobRunner jobs;
    CheckpointView view(jobs);
    openAndWait(view, jobs, path);
    const int missing = rowsWithStatus(*view.tableModel(), ck::TensorStatus::Missing);
    EXPECT_GT(missing, 5);
    view.filterModel()->setStatus(ck::TensorStatus::Missing);
    ASSERT_EQ(view.filterModel()->rowCount(), missing);
    const QString prefix = QStringLiteral("model.layers.%1.").arg(layers);
    for (int r = 0; r < missing; ++r) {
        EXPECT_TRUE(view.filterModel()->index(r, 0).data().toString().startsWith(prefix));
        EXPECT_TRUE(
            view.filterModel()->index(r, CheckpointTableModel::File).data().toString().isEmpty());
    }
    EXPECT_TRUE(view.summaryText().contains(QStringLiteral("%1 missing").arg(missing)));
    EXPECT_TRUE(view.summaryText().contains(QStringLiteral("differs from config.json")));
}

TEST(CheckpointView, VerifiesShardsAndNamesTheCorruptedOne)
{
    QTemporaryDir dir;
    const auto path = copyOf(dir);
    JobRunner jobs;
    CheckpointView view(jobs);
    openAndWait(view, jobs, path);
    QSignalSpy verified(&view, &CheckpointView::verified);
    view.verify();
    test::settle(jobs);
    ASSERT_EQ(verified.count(), 1);
    EXPECT_TRUE(verified.at(0).at(0).toBool());
    const auto* table = view.verifyTable();
    ASSERT_GE(table->rowCount(), 3);
    for (int r = 0; r < table->rowCount(); ++r) {
        EXPECT_EQ(table->item(r, 2)->text(), QStringLiteral("ok"));
    }
    EXPECT_TRUE(view.verifyText().contains(QStringLiteral("day0-manifest.json")));

    // Flip one byte in the middle of a shard: same size, different hash.
    std::string shard;
    for (const auto& e : fs::directory_iterator(path)) {
        if (e.path().extension() == ".safetensors") {
            shard = std::max(shard, e.path().filename().string());
        }
    }
    ASSERT_FALSE(shard.empty());
    {
        std::fstream f(path / shard, std::ios::in | std::ios::out | std::ios::binary);
        const auto size = std::streamoff(fs::file_size(path / shard));
        f.seekg(size - 9);
        char c = 0;
        f.read(&c, 1);
        f.seekp(size - 9);
        c = char(c ^ 0x5A);
        f.write(&c, 1);
    }
    view.verify();
    test::settle(jobs);
    ASSERT_EQ(verified.count(), 2);
    EXPECT_FALSE(verified.at(1).at(0).toBool());
    int bad = 0;
    for (int r = 0; r < table->rowCount(); ++r) {
        if (table->item(r, 0)->text().toStdString() == shard) {
            EXPECT_EQ(table->item(r, 2)->text(), QStringLiteral("hash mismatch"));
            ++bad;
        } else {
            EXPECT_EQ(table->item(r, 2)->text(), QStringLiteral("ok"));
        }
    }
    EXPECT_EQ(bad, 1);
    EXPECT_TRUE(view.errorText().contains(QString::fromStdString(shard)))
        << view.errorText().toStdString();

    // A truncated shard: a size mismatch, also named.
    fs::resize_file(path / shard, fs::file_size(path / shard) - 1);
    view.verify();
    test::settle(jobs);
    for (int r = 0; r < table->rowCount(); ++r) {
        if (table->item(r, 0)->text().toStdString() == shard) {
            EXPECT_EQ(table->item(r, 2)->text(), QStringLiteral("size mismatch"));
        }
    }
}

TEST(CheckpointView, OffersToWriteAManifestWhenThereIsNone)
{
    QTemporaryDir dir;
    const auto path = copyOf(dir);
    fs::remove(path / ck::kManifestName);
    JobRunner jobs;
    CheckpointView view(jobs);
    openAndWait(view, jobs, path);
    QSignalSpy verified(&view, &CheckpointView::verified);
    view.verify();
    test::settle(jobs);
    EXPECT_EQ(verified.count(), 0);
    EXPECT_TRUE(view.verifyText().contains(QStringLiteral("no day0-manifest.json")))
        << view.verifyText().toStdString();
    EXPECT_TRUE(view.writeManifestButton()->isVisibleTo(&view));
    view.writeManifest();
    test::settle(jobs);
    ASSERT_TRUE(fs::exists(path / ck::kManifestName));
    EXPECT_TRUE(view.verifyText().startsWith(QStringLiteral("Wrote")));
    view.verify();
    test::settle(jobs);
    ASSERT_EQ(verified.count(), 1);
    EXPECT_TRUE(verified.at(0).at(0).toBool());
}

TEST(CheckpointView, CancelledVerificationLeavesTheBusyStateAndDeliversNothing)
{
    JobRunner jobs;
    CheckpointView view(jobs);
    openAndWait(view, jobs, shrunkKimi());
    QSignalSpy verified(&view, &CheckpointView::verified);
    view.verify();
    ASSERT_TRUE(view.busy());
    EXPECT_TRUE(view.cancelButton()->isVisibleTo(&view));
    view.cancel();
    EXPECT_FALSE(view.busy());
    EXPECT_FALSE(view.cancelButton()->isVisibleTo(&view));
    EXPECT_TRUE(view.verifyButton()->isEnabled());
    test::settle(jobs);
    EXPECT_EQ(verified.count(), 0);
    EXPECT_EQ(view.verifyTable()->rowCount(), 0);
    EXPECT_TRUE(view.errorText().contains(QStringLiteral("cancelled")));
}

TEST(CheckpointView, ShowsOpenErrorsNamingTheFile)
{
    QTemporaryDir dir;
    JobRunner jobs;
    CheckpointView view(jobs);
    const auto missing = fs::path(dir.path().toStdString()) / "no-such-checkpoint";
    openAndWait(view, jobs, missing);
    EXPECT_TRUE(view.errorText().contains(QStringLiteral("no-such-checkpoint")))
        << view.errorText().toStdString();
    EXPECT_EQ(view.tableModel()->rowCount(), 0);
    EXPECT_FALSE(view.verifyButton()->isEnabled());

    // A structural problem: a shard cut short is reported by name, the rest still listed.
    const auto path = copyOf(dir);
    std::string shard;
    for (const auto& e : fs::directory_iterator(path)) {
        if (e.path().extension() == ".safetensors") {
            shard = std::max(shard, e.path().filename().string());
        }
    }
    fs::resize_file(path / shard, fs::file_size(path / shard) - 4);
    openAndWait(view, jobs, path);
    EXPECT_TRUE(view.errorText().contains(QString::fromStdString(shard)))
        << view.errorText().toStdString();
}

TEST(ModelPanel, OpensACheckpointWhenTheSessionAsks)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ModelPanel panel(session, jobs);
    panel.resize(1400, 860);
    session.requestCheckpointOpen(q(shrunkKimi()));
    test::settle(jobs);
    EXPECT_GT(panel.checkpointView()->tableModel()->rowCount(), 50);
    EXPECT_TRUE(panel.checkpointView()->isVisibleTo(&panel));
    EXPECT_GT(test::pixelSpread(panel.grab().toImage()), 12.0);
}

namespace {

/// Flips one byte near the end of the last shard (same size, other hash); returns its name.
std::string corruptLastShard(const fs::path& path)
{
    std::string shard;
    for (const auto& e : fs::directory_iterator(path)) {
        if (e.path().extension() == ".safetensors") {
            shard = std::max(shard, e.path().filename().string());
        }
    }
    EXPECT_FALSE(shard.empty());
    std::fstream f(path / shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::streamoff(fs::file_size(path / shard));
    f.seekg(size - 9);
    char c = 0;
    f.read(&c, 1);
    f.seekp(size - 9);
    c = char(c ^ 0x5A);
    f.write(&c, 1);
    return shard;
}

const history::Metric& metric(const history::RunRecord& run, std::string_view name)
{
    const auto* m = run.findMetric(name);
    EXPECT_NE(m, nullptr) << name;
    static const history::Metric none { "", std::nan(""), "" };
    return m != nullptr ? *m : none;
}

} // namespace

TEST(ModelPanel, RecordsEachVerificationAsDay0VerifyDoes)
{
    test::ScratchStore scratch;
    QTemporaryDir dir;
    const auto path = copyOf(dir);
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ModelPanel panel(session, jobs);
    RunsPanel runs(session, jobs);
    test::settle(jobs);
    QSignalSpy recorded(&session, &Session::runRecorded);
    auto& view = *panel.checkpointView();
    openAndWait(view, jobs, path);
    EXPECT_EQ(recorded.count(), 0) << "opening is not a verification";

    view.verify();
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 1);
    auto store = scratch.open();
    EXPECT_EQ(store.count().value(), 1);
    const RunId first(recorded.at(0).at(0).toLongLong());
    const auto ok = store.load(first).value();
    EXPECT_EQ(ok.info.kind, history::RunKind::Verify);
    EXPECT_EQ(ok.info.status, history::RunStatus::Ok);
    EXPECT_EQ(ok.info.message, "ok");
    EXPECT_EQ(ok.info.modelName, "ckpt");
    EXPECT_EQ(ok.info.modelFingerprint.size(), 64U) << "SHA-256 of config.json";
    ASSERT_NE(ok.findProperty("path"), nullptr);
    EXPECT_EQ(ok.findProperty("path")->value, path.string());
    ASSERT_NE(ok.findProperty("manifest"), nullptr);
    EXPECT_EQ(ok.findProperty("manifest")->value, ck::kManifestName);
    ASSERT_NE(ok.findProperty("format"), nullptr);
    const auto report = view.tableModel()->report();
    EXPECT_EQ(metric(ok, "tensors_ok").value, double(report.count(ck::TensorStatus::Ok)));
    EXPECT_GT(metric(ok, "tensors_ok").value, 50);
    EXPECT_EQ(metric(ok, "tensors_missing").value, 0);
    EXPECT_EQ(metric(ok, "integrity_failures").value, 0);
    EXPECT_EQ(metric(ok, "bytes_hashed").unit, "B");
    EXPECT_GT(metric(ok, "bytes_hashed").value, 0);
    int shards = 0;
    for (const auto& e : fs::directory_iterator(path)) {
        shards += e.path().extension() == ".safetensors";
    }
    EXPECT_EQ(metric(ok, "files").value, shards) << "the weight files";
    EXPECT_GT(view.verifyTable()->rowCount(), shards) << "config.json etc. are hashed too";
    // The runs panel follows the session's announcement.
    ASSERT_EQ(runs.runModel()->rowCount(), 1);
    EXPECT_EQ(runs.runModel()->runs().front().id, first);

    // Showing the same checkpoint again records nothing.
    openAndWait(view, jobs, path);
    EXPECT_EQ(store.count().value(), 1);

    // A hash mismatch: a second run, failed, naming the shard.
    const auto shard = corruptLastShard(path);
    view.verify();
    test::settle(jobs);
    ASSERT_EQ(recorded.count(), 2);
    const auto bad = store.load(RunId(recorded.at(1).at(0).toLongLong())).value();
    EXPECT_EQ(bad.info.kind, history::RunKind::Verify);
    EXPECT_EQ(bad.info.status, history::RunStatus::Failed);
    EXPECT_NE(bad.info.message.find(shard), std::string::npos) << bad.info.message;
    EXPECT_EQ(metric(bad, "integrity_failures").value, 1);
    ASSERT_FALSE(bad.events.empty());
    EXPECT_NE(bad.events.front().message.find(shard), std::string::npos);
    ASSERT_EQ(runs.runModel()->rowCount(), 2);
    EXPECT_EQ(runs.runModel()->runs().front().status, history::RunStatus::Failed);

    // Cancelled: nothing. Every worker is held busy until the cancel is in, so the verification
    // starts (if at all) with its stop requested.
    std::atomic<bool> release { false };
    std::vector<std::unique_ptr<JobTicket>> blockers;
    for (int i = 0; i < std::max(2, QThread::idealThreadCount()); ++i) {
        blockers.push_back(std::make_unique<JobTicket>());
        jobs.start<int>(
            *blockers.back(), QStringLiteral("blocker"), &view,
            [&release](Progress&, std::stop_token) {
                while (!release.load()) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
                return 0;
            },
            [](int&&) {});
    }
    view.verify();
    view.cancel();
    release = true;
    test::settle(jobs);
    EXPECT_EQ(store.count().value(), 2);
    EXPECT_EQ(recorded.count(), 2);

    // With recording off (--no-record), a verification writes nothing.
    auto options = history::recordingOptions();
    options.enabled = false;
    history::setRecordingOptions(options);
    QSignalSpy verified(&view, &CheckpointView::verified);
    view.verify();
    test::settle(jobs);
    EXPECT_EQ(verified.count(), 1) << "the verification itself still runs";
    EXPECT_EQ(store.count().value(), 2);
    EXPECT_EQ(recorded.count(), 2);
}
