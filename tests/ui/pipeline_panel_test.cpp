// The pipeline panel: a validation of the session's model runs as a background job, fills the
// step table with status icons, writes the three reports, records a validate run that the Runs
// panel hears of, and can be cancelled.
#include "history/recording.h"
#include "history/run_store.h"
#include "panels/pipeline/figure_renderer.h"
#include "panels/pipeline/pipeline_panel.h"
#include "ui_test_support.h"
#include "widgets/formatting.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>

#include <memory>

using namespace day0;
using namespace day0::ui;

namespace {

using test::ScratchStore;

QString statusOf(const PipelinePanel& panel, int row)
{
    return panel.stepTable()->item(row, 0)->toolTip();
}

} // namespace

TEST(PipelinePanel, ValidatesTheSessionModelAndRecordsTheRun)
{
    ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    PipelinePanel panel(session, jobs);
    panel.setWorkDir(store.dir() + QStringLiteral("/validation"));
    EXPECT_EQ(panel.modelEdit()->text(), QStringLiteral("kimi-k2")) << "follows the session";
    EXPECT_FALSE(panel.openReportButton()->isEnabled());
    QSignalSpy recorded(&session, &Session::runRecorded);
    QSignalSpy finished(&panel, &PipelinePanel::finished);

    panel.startButton()->click();
    EXPECT_TRUE(panel.cancelButton()->isEnabled());
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 60000))
        << "validation did not end";
    EXPECT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());

    ASSERT_EQ(panel.stepTable()->rowCount(), 9) << "day0 validate's steps, serving included";
    for (int row = 0; row < 9; ++row) {
        const QString status = statusOf(panel, row);
        if (row == 4) {
            EXPECT_TRUE(status == QStringLiteral("skipped") || status == QStringLiteral("passed"));
        } else {
            EXPECT_EQ(status, QStringLiteral("passed"))
                << row << ": " << fromQString(panel.stepTable()->item(row, 3)->text());
        }
        EXPECT_FALSE(panel.stepTable()->item(row, 2)->text().isEmpty()) << "duration of " << row;
    }
    EXPECT_TRUE(panel.logView()->toPlainText().contains(QStringLiteral("shrank a homologous")));
    EXPECT_TRUE(panel.openReportButton()->isEnabled());
    EXPECT_FALSE(panel.cancelButton()->isEnabled());

    QFile html(panel.reportPath());
    ASSERT_TRUE(html.open(QIODevice::ReadOnly)) << fromQString(panel.reportPath());
    const QByteArray page = html.readAll();
    EXPECT_TRUE(page.contains("src=\"data:image/png;base64,"))
        << "figures drawn off the GUI thread";
    EXPECT_TRUE(QFile::exists(store.dir() + QStringLiteral("/validation/junit.xml")));

    ASSERT_EQ(recorded.count(), 1);
    const auto id = RunId(recorded.front().front().toLongLong());
    auto opened = history::RunStore::open(history::storePath());
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto run = opened->load(id);
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(run->info.kind, history::RunKind::Validate);
    EXPECT_EQ(run->info.status, history::RunStatus::Ok);
    EXPECT_FALSE(run->layers.empty());
}

TEST(PipelinePanel, StreamWeightsValidatesWithoutLoadingTheModelWhole)
{
    ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    PipelinePanel panel(session, jobs);
    panel.setWorkDir(store.dir() + QStringLiteral("/validation"));
    ASSERT_TRUE(panel.streamBox()->isEnabled()) << "the target runs on the CPU";
    panel.streamBox()->setChecked(true);
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    panel.startButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 60000))
        << "validation did not end";
    EXPECT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());
    // Serving (7) holds the whole model: skipped, saying why; multi-rank's ranks stream too.
    for (int row = 0; row < panel.stepTable()->rowCount(); ++row) {
        const QString text = panel.stepTable()->item(row, 3)->text();
        if (row == 7) {
            EXPECT_EQ(statusOf(panel, row), QStringLiteral("skipped")) << row;
            EXPECT_TRUE(text.contains(QStringLiteral("not streamed"))) << fromQString(text);
        } else {
            EXPECT_EQ(statusOf(panel, row), QStringLiteral("passed"))
                << row << ": " << fromQString(text);
        }
    }
    EXPECT_TRUE(panel.stepTable()->item(6, 3)->text().contains(QStringLiteral("streamed")))
        << "the performance step reports the streamed reads";
}

#if defined(DAY0_HOSTSIM_PLUGIN_DIR) && defined(DAY0_FAKEGPU_PLUGIN_DIR)
// A host-simulated backend plugin stands in for a GPU; the fake one never has a device.
class PipelineBackend : public ::testing::Test {
protected:
    void SetUp() override
    {
        qputenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR ":" DAY0_FAKEGPU_PLUGIN_DIR);
    }
    void TearDown() override { qunsetenv("DAY0_PLUGIN_PATH"); }

    /// A panel on qwen3-0.6b writing into the scratch store's folder, its target on `backend`.
    std::unique_ptr<PipelinePanel> panelOn(const QString& backend)
    {
        test::openModel(m_session, "qwen3-0.6b");
        auto panel = std::make_unique<PipelinePanel>(m_session, m_jobs);
        panel->setWorkDir(m_store.dir() + QStringLiteral("/validation"));
        const int index = panel->backendBox()->findData(backend);
        EXPECT_GE(index, 0) << fromQString(backend);
        panel->backendBox()->setCurrentIndex(index);
        return panel;
    }

    ScratchStore m_store;
    Session m_session;
    JobRunner m_jobs;
};

TEST_F(PipelineBackend, ThePrecisionAndPerformanceStepsRunOnTheChosenBackend)
{
    auto owned = panelOn(QStringLiteral("hostsim"));
    PipelinePanel& panel = *owned;
    EXPECT_FALSE(panel.streamBox()->isEnabled()) << "streamed runs compute on the CPU";
    EXPECT_FALSE(panel.streamBox()->isChecked());
    panel.precisionBox()->setCurrentText(QStringLiteral("fp32"));
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    panel.startButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 60000))
        << "validation did not end";
    EXPECT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());
    // Rows 5 and 6: precision and performance.
    for (const int row : { 5, 6 }) {
        EXPECT_TRUE(panel.stepTable()->item(row, 3)->text().contains(QStringLiteral("on hostsim")))
            << fromQString(panel.stepTable()->item(row, 3)->text());
    }
    ASSERT_EQ(recorded.count(), 1);
    auto opened = history::RunStore::open(history::storePath());
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto run = opened->load(RunId(recorded.front().front().toLongLong()));
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(run->info.backend, "hostsim");
}

TEST_F(PipelineBackend, ABackendWithoutItsDeviceIsReportedAndNothingRuns)
{
    auto owned = panelOn(QStringLiteral("fakegpu"));
    PipelinePanel& panel = *owned;
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    panel.startButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 20000));
    EXPECT_NE(finished.front().front().toInt(), 0);
    EXPECT_TRUE(panel.summaryLabel()->text().contains(QStringLiteral("no FAKE device")))
        << fromQString(panel.summaryLabel()->text());
    EXPECT_FALSE(QFile::exists(m_store.dir() + QStringLiteral("/validation/junit.xml")));
}
#endif

TEST(PipelinePanel, CancelStopsTheJobAndLeavesThePanelUsable)
{
    ScratchStore store;
    Session session;
    JobRunner jobs;
    PipelinePanel panel(session, jobs);
    panel.setWorkDir(store.dir() + QStringLiteral("/validation"));
    panel.modelEdit()->setText(QStringLiteral("deepseek-v3"));
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    QSignalSpy recorded(&session, &Session::runRecorded);
    panel.start();
    ASSERT_TRUE(panel.running());
    panel.cancelButton()->click();
    EXPECT_FALSE(panel.running());
    ASSERT_EQ(finished.count(), 1);
    EXPECT_EQ(finished.front().front().toInt(), 1);
    EXPECT_TRUE(panel.startButton()->isEnabled());
    EXPECT_FALSE(panel.cancelButton()->isEnabled());
    test::settle(jobs);
    EXPECT_EQ(recorded.count(), 0) << "a cancelled job delivers nothing";
    EXPECT_FALSE(panel.openReportButton()->isEnabled());
}

TEST(PipelinePanel, BadPlanIsReportedWithoutSteps)
{
    ScratchStore store;
    Session session;
    JobRunner jobs;
    PipelinePanel panel(session, jobs);
    panel.setWorkDir(store.dir() + QStringLiteral("/validation"));
    panel.modelEdit()->setText(QStringLiteral("kimi-k2"));
    panel.planEdit()->setText(QStringLiteral("tp=zero"));
    QSignalSpy finished(&panel, &PipelinePanel::finished);
    panel.start();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 30000));
    EXPECT_EQ(finished.front().front().toInt(), 2);
    EXPECT_TRUE(panel.summaryLabel()->text().contains(QStringLiteral("tp")));
    EXPECT_EQ(statusOf(panel, 0), QStringLiteral("pending"));
}

TEST(FigureRenderer, DrawsLinesAndBarsAsPng)
{
    pipeline::FigureSpec lines;
    lines.title = "error";
    lines.logY = true;
    lines.series.push_back({ "a", { 0, 1, 2 }, { 1e-3, 2e-3, 4e-3 }, false });
    auto png = renderFigure(lines);
    ASSERT_TRUE(png.ok()) << png.error().message;
    EXPECT_EQ(png->mimeType, "image/png");
    const QImage image = QImage::fromData(
        reinterpret_cast<const uchar*>(png->data.data()), int(png->data.size()), "PNG");
    ASSERT_FALSE(image.isNull());
    EXPECT_GT(test::pixelSpread(image), 5.0) << "not blank";

    pipeline::FigureSpec bars;
    bars.kind = pipeline::FigureSpec::Kind::Bars;
    bars.categories = { "x", "y" };
    bars.yFormat = pipeline::FigureAxis::Bytes;
    bars.series.push_back({ "b", {}, { 1024.0, 2048.0 }, false });
    EXPECT_TRUE(renderFigure(bars).ok());
}
