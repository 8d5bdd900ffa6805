#include "checkpoint/tensor_file.h"
#include "exec/checkpoint_weights.h"
#include "exec/precision_run.h"
#include "exec/shrunk_cache.h"
#include "history/recording.h"
#include "history/run_store.h"
#include "numerics/comparison_grid.h"
#include "numerics/error_distribution.h"
#include "panels/builtin_panels.h"
#include "panels/precision/precision_panel.h"
#include "precision_panel_fixture.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

using namespace day0;
using namespace day0::ui;
namespace fs = std::filesystem;

namespace {

// Shrunk checkpoints go to a scratch cache for the whole test program, never the user's.
class ScratchCache : public ::testing::Environment {
public:
    void SetUp() override
    {
        ASSERT_TRUE(m_dir.isValid());
        qputenv("XDG_CACHE_HOME", m_dir.path().toUtf8());
    }

private:
    QTemporaryDir m_dir;
};

const auto* const kCache = ::testing::AddGlobalTestEnvironment(new ScratchCache);

using PrecisionPanelTest = test::PrecisionPanelFixture;

} // namespace

TEST_F(PrecisionPanelTest, AComparisonOfDumpsIsShownAsItGrowsThenWhole)
{
    PrecisionPanel panel(m_session, m_jobs);
    QSignalSpy grew(&panel, &PrecisionPanel::comparisonGrew);
    QSignalSpy delivered(&panel, &PrecisionPanel::resultDelivered);
    compareFixture(panel);
    ASSERT_GE(grew.count(), 2) << "about every tenth of the captures";
    int previous = 0;
    for (const auto& args : grew) {
        EXPECT_GT(args.at(0).toInt(), previous) << "each stage holds more rows";
        previous = args.at(0).toInt();
    }
    EXPECT_EQ(delivered.count(), 1);
    ASSERT_NE(panel.current(), nullptr);
    EXPECT_FALSE(panel.current()->partial) << "the whole comparison replaces what grew";
    EXPECT_GE(int(panel.current()->comparison.rows.size()), previous);
    EXPECT_EQ(panel.overlay(), nullptr) << "a comparison so far is never kept as the overlay";
    // The summary says what the target's precision rounded where, from its dump.
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("precisionSummary"));
    ASSERT_NE(summary, nullptr);
    const std::string recipe = panel.current()->target->info.extra.value("precision_recipe", "");
    ASSERT_FALSE(recipe.empty());
    EXPECT_NE(summary->text().indexOf(QStringLiteral("Recipe: ")), -1)
        << summary->text().toStdString();
}

TEST_F(PrecisionPanelTest, HeatmapCellsEqualTheMetricsOfCompareDumps)
{
    PrecisionPanel panel(m_session, m_jobs);
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    compareFixture(panel);
    const auto want = expected();
    const QSize size = panel.heatmapPlot()->heatmapSize();
    ASSERT_EQ(size.height(), 4) << "one row per layer";
    ASSERT_GE(size.width(), 5) << "sub-modules and the layer output";
    for (const auto metric : { numerics::GridMetric::RelL2, numerics::GridMetric::MaxRel,
             numerics::GridMetric::CosineDistance, numerics::GridMetric::OwnRelL2,
             numerics::GridMetric::FloorRatio }) {
        panel.setMetric(metric);
        int checked = 0;
        for (int r = 0; r < size.height(); ++r) {
            for (int c = 0; c < size.width(); ++c) {
                const int index = panel.rowAt(r, c);
                if (index < 0) {
                    EXPECT_TRUE(std::isnan(panel.heatmapPlot()->heatmapCell(r, c)));
                    continue;
                }
                const auto& name = panel.current()->comparison.rows[std::size_t(index)].name;
                const auto* row = find(want, name);
                ASSERT_NE(row, nullptr) << name;
                EXPECT_EQ(row->layer, r) << name;
                const double cell = panel.heatmapPlot()->heatmapCell(r, c);
                switch (metric) {
                case numerics::GridMetric::RelL2:
                    EXPECT_DOUBLE_EQ(cell, row->metrics->relL2) << name;
                    break;
                case numerics::GridMetric::MaxRel:
                    EXPECT_DOUBLE_EQ(cell, row->metrics->maxRel) << name;
                    break;
                case numerics::GridMetric::CosineDistance:
                    EXPECT_DOUBLE_EQ(cell, std::max(0.0, 1.0 - row->metrics->cosine)) << name;
                    break;
                case numerics::GridMetric::OwnRelL2:
                    ASSERT_TRUE(row->own.has_value()) << name;
                    EXPECT_DOUBLE_EQ(cell, row->own->relL2) << name;
                    break;
                default:
                    EXPECT_DOUBLE_EQ(cell, row->verdict.floorRatio) << name;
                }
                ++checked;
            }
        }
        EXPECT_GE(checked, 20);
    }
    // The depth chart follows the selected cell's sub-module, one point per layer, with the
    // tolerance band: the layer outputs (last column), then the attention.
    panel.setMetric(numerics::GridMetric::RelL2);
    panel.selectCell(0, size.width() - 1);
    EXPECT_EQ(panel.depthSubModule(), "");
    auto points = panel.depthPlot()->linePoints(0);
    ASSERT_EQ(points.size(), 4);
    EXPECT_DOUBLE_EQ(points[3].y(), find(want, "model.layers.3")->metrics->relL2);
    EXPECT_EQ(panel.depthPlot()->bandCount(), 1);
    for (int c = 0; c < size.width(); ++c) {
        const int index = panel.rowAt(1, c);
        if (index >= 0
            && panel.current()->comparison.rows[std::size_t(index)].name
                == "model.layers.1.self_attn") {
            panel.selectCell(1, c);
        }
    }
    EXPECT_EQ(panel.depthSubModule(), "self_attn");
    points = panel.depthPlot()->linePoints(0);
    ASSERT_EQ(points.size(), 4);
    EXPECT_DOUBLE_EQ(points[2].y(), find(want, "model.layers.2.self_attn")->metrics->relL2);
    test::settle(m_jobs);

    // Recorded as a comparison, layer metrics and all.
    ASSERT_TRUE(panel.current()->recordedRun.has_value()) << panel.current()->recordError;
    ASSERT_EQ(recorded.count(), 1);
    EXPECT_EQ(recorded.front().front().toLongLong(), *panel.current()->recordedRun);
    auto store = history::RunStore::open(history::storePath());
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto run = store->load(RunId(*panel.current()->recordedRun));
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(run->info.kind, history::RunKind::Compare);
    EXPECT_EQ(run->info.precision, "bf16");
    const auto at = run->layers.find("model.layers.2.self_attn", "rel_l2");
    ASSERT_TRUE(at.has_value());
    EXPECT_DOUBLE_EQ(
        run->layers.row(*at).value, find(want, "model.layers.2.self_attn")->metrics->relL2);
    EXPECT_TRUE(run->layers.find("model.layers.2", "own_rel_l2").has_value());
}

TEST_F(PrecisionPanelTest, HoverShowsTheVerdictAndTheRuleThatDecided)
{
    PrecisionPanel panel(m_session, m_jobs);
    compareFixture(panel);
    const auto& rows = panel.current()->comparison.rows;
    const int index = panel.rowAt(1, 1);
    ASSERT_GE(index, 0);
    const auto& verdict = rows[std::size_t(index)].verdict;
    ASSERT_FALSE(verdict.rule.empty());
    const QString text = panel.heatmapPlot()->heatmapCellText(1, 1);
    EXPECT_TRUE(text.contains(QString::fromStdString(rows[std::size_t(index)].name)))
        << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("rule ") + QString::fromStdString(verdict.rule)))
        << text.toStdString();
    EXPECT_TRUE(text.contains(QString::fromStdString(verdict.table))) << text.toStdString();
    EXPECT_TRUE(text.contains(QString::fromStdString(verdict.reason))) << text.toStdString();
}

TEST_F(PrecisionPanelTest, ClickingACellFillsTheHistogramScatterAndOwnError)
{
    PrecisionPanel panel(m_session, m_jobs);
    compareFixture(panel);
    const int row = 2;
    const int column = 1;
    const int index = panel.rowAt(row, column);
    ASSERT_GE(index, 0);
    const std::string name = panel.current()->comparison.rows[std::size_t(index)].name;
    const QPoint at = panel.heatmapPlot()->heatmapCellPosition(row, column);
    ASSERT_GE(at.x(), 0);
    auto* canvas = panel.heatmapPlot()->childAt(at);
    ASSERT_NE(canvas, nullptr);
    QTest::mouseClick(canvas, Qt::LeftButton, {}, canvas->mapFrom(panel.heatmapPlot(), at));
    test::settle(m_jobs);
    ASSERT_TRUE(panel.detail().has_value()) << panel.errorText().toStdString();
    EXPECT_EQ(panel.detail()->anchor, name);
    EXPECT_EQ(m_session.selectedAnchor().toStdString(), name);
    // The histogram holds every element of the tensor.
    auto r = checkpoint::readDump(root() / "reference");
    auto t = checkpoint::readDump(root() / "target");
    auto want = numerics::relativeErrorHistogram(*r->tensor(name), *t->tensor(name));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(panel.histogramPlot()->barLayerCount(), 1);
    double total = 0;
    for (std::size_t b = 0; b < want->counts.size(); ++b) {
        EXPECT_EQ(panel.histogramPlot()->barValue(0, int(b)), double(want->counts[b])) << b;
        total += panel.histogramPlot()->barValue(0, int(b));
    }
    EXPECT_GT(total, 0);
    EXPECT_EQ(panel.scatterPlot()->scatterSeriesCount(), 1);
    ASSERT_TRUE(panel.detail()->own.has_value()) << "the inject-mode dump next to the target";
    EXPECT_EQ(panel.ownPlot()->barValue(0, 1), *panel.detail()->own);
}

TEST_F(PrecisionPanelTest, PositionsViewShowsTheErrorOfEveryToken)
{
    PrecisionPanel panel(m_session, m_jobs);
    compareFixture(panel);
    panel.setPositionsView(true);
    test::settle(m_jobs);
    const QSize size = panel.heatmapPlot()->heatmapSize();
    ASSERT_EQ(size.width(), 7) << "5 prompt tokens and 2 fed-back generated ones";
    ASSERT_GE(size.height(), 6) << "embedding, 4 layers, norm, logits";
    auto r = checkpoint::readDump(root() / "reference");
    auto t = checkpoint::readDump(root() / "target");
    const int index = panel.rowAt(2, 0);
    ASSERT_GE(index, 0);
    const auto& name = panel.current()->comparison.rows[std::size_t(index)].name;
    auto perPosition = numerics::relL2PerPosition(*r->tensor(name), *t->tensor(name));
    ASSERT_TRUE(perPosition.ok());
    for (int p = 0; p < size.width(); ++p) {
        EXPECT_DOUBLE_EQ(panel.heatmapPlot()->heatmapCell(2, p), (*perPosition)[std::size_t(p)]);
    }
}

TEST_F(PrecisionPanelTest, BadDumpFoldersGiveAnErrorNamingThem)
{
    PrecisionPanel panel(m_session, m_jobs);
    panel.show();
    QTemporaryDir dir;
    const QString missing = dir.filePath(QStringLiteral("no-such-dump"));
    panel.compareDumps(missing, dump("target"));
    test::settle(m_jobs);
    EXPECT_EQ(panel.current(), nullptr);
    EXPECT_TRUE(panel.errorText().contains(QStringLiteral("no-such-dump")))
        << panel.errorText().toStdString();

    // A corrupt dump.json: the message names that file.
    const fs::path corrupt = fs::path(dir.path().toStdString()) / "corrupt";
    fs::create_directories(corrupt);
    fs::copy_file(root() / "target" / "tensors.safetensors", corrupt / "tensors.safetensors");
    std::ofstream(corrupt / "dump.json") << "{ \"format_version\": 1, \"captures\": [ ";
    panel.compareDumps(dump("reference"), QString::fromStdString(corrupt.string()));
    test::settle(m_jobs);
    EXPECT_EQ(panel.current(), nullptr);
    EXPECT_TRUE(panel.errorText().contains(QStringLiteral("corrupt")))
        << panel.errorText().toStdString();
    EXPECT_TRUE(panel.errorText().contains(QStringLiteral("dump.json")))
        << panel.errorText().toStdString();
}

TEST_F(PrecisionPanelTest, DumpsOfAnotherModelAreRefusedNamingBothFolders)
{
    PrecisionPanel panel(m_session, m_jobs);
    panel.show();
    panel.compareDumps(dump("reference"), dump("other-model"));
    test::settle(m_jobs);
    EXPECT_EQ(panel.current(), nullptr);
    const QString error = panel.errorText();
    EXPECT_TRUE(error.contains(dump("other-model"))) << error.toStdString();
    EXPECT_TRUE(error.contains(dump("reference"))) << error.toStdString();
}

TEST_F(PrecisionPanelTest, TheSelectedCellIsFramed)
{
    PrecisionPanel panel(m_session, m_jobs);
    compareFixture(panel);
    panel.selectCell(3, 2);
    test::settle(m_jobs);
    EXPECT_EQ(panel.heatmapPlot()->heatmapSelection(), QPoint(3, 2));
    EXPECT_EQ(panel.detail()->anchor,
        panel.current()->comparison.rows[std::size_t(panel.rowAt(3, 2))].name);
}

TEST_F(PrecisionPanelTest, TheFirstDivergenceIsSelected)
{
    // The bf16 target with layer 2's attention output 10% off: that capture is the first whose
    // error breaks its tolerance, and the panel opens on it.
    auto target = checkpoint::readDump(root() / "target");
    ASSERT_TRUE(target.ok()) << target.error().message;
    const std::string damaged = "model.layers.2.self_attn";
    const auto* info = target->find(damaged);
    const auto* tensor = target->tensor(damaged);
    ASSERT_TRUE(info != nullptr && tensor != nullptr);
    auto values = tensor->toDoubles();
    for (auto& v : values) {
        v *= 1.1;
    }
    target->add(damaged, numerics::Tensor::fromDoubles(tensor->shape(), values), true, info->op,
        info->precision);
    ASSERT_TRUE(checkpoint::writeDump(*target, root() / "damaged").ok());

    PrecisionPanel panel(m_session, m_jobs);
    panel.resize(1400, 860);
    panel.show();
    panel.compareDumps(dump("reference"), dump("damaged"));
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    const auto& c = panel.current()->comparison;
    ASSERT_TRUE(c.firstDivergence.has_value());
    EXPECT_EQ(c.rows[*c.firstDivergence].name, damaged);
    ASSERT_TRUE(panel.detail().has_value());
    EXPECT_EQ(panel.detail()->row, *c.firstDivergence);
    const QPoint selected = panel.heatmapPlot()->heatmapSelection();
    EXPECT_EQ(std::size_t(panel.rowAt(selected.x(), selected.y())), *c.firstDivergence);
    EXPECT_TRUE(panel.heatmapPlot()
                    ->heatmapCellText(selected.x(), selected.y())
                    .contains(QStringLiteral("fail")));
}

TEST(PrecisionPanelScreenshot, TheDemoRendersARealHeatmap)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    PanelRegistry registry;
    registerBuiltinPanels(registry);
    const auto* descriptor = registry.find(QStringLiteral("precision"));
    ASSERT_NE(descriptor, nullptr);
    EXPECT_EQ(descriptor->title, QStringLiteral("Precision"));
    EXPECT_EQ(descriptor->shortcut, QKeySequence(QStringLiteral("Ctrl+5")));
    Session session;
    JobRunner jobs;
    test::configure(
        session, "h200:32x8", plan::Mode::Train, "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full");
    MainWindow window(registry, session, jobs, settings);
    window.openModel(QStringLiteral("kimi-k2"));
    QString error;
    const QStringList files = renderScreenshots(
        window, registry, jobs, QStringLiteral("precision"), dir.path(), &error);
    ASSERT_TRUE(error.isEmpty()) << error.toStdString();
    // The panel (its layer-by-layer tab) and its End to end tab.
    ASSERT_EQ(files.size(), 2);
    EXPECT_TRUE(files[1].endsWith(QStringLiteral("precision-end-to-end.png")));
    for (const auto& file : files) {
        EXPECT_GT(test::pixelSpread(QImage(file)), 12.0) << file.toStdString();
    }
    auto* panel = qobject_cast<PrecisionPanel*>(window.panel(QStringLiteral("precision")));
    ASSERT_NE(panel, nullptr);
    ASSERT_NE(panel->current(), nullptr) << panel->errorText().toStdString();
    EXPECT_EQ(panel->heatmapPlot()->heatmapSize().height(), 8) << "the demo's 8 layers";
    EXPECT_TRUE(panel->detail().has_value()) << "a cell is selected for the detail charts";
}

TEST(PlotWidgetHeatmapCells, HoverTextClicksAndExactZerosOnALogScale)
{
    PlotWidget plot;
    plot.resize(600, 400);
    plot.show();
    HeatmapData data;
    data.rows = 2;
    data.columns = 3;
    data.values = { 0.0, 1e-3, 1e-2, 1e-4, std::nan(""), 1e-1 };
    data.logScale = true;
    data.cellText
        = [](int row, int column) { return QStringLiteral("cell %1/%2").arg(row).arg(column); };
    plot.setHeatmap(data);
    plot.rescaleAndReplot();
    EXPECT_EQ(plot.heatmapCell(0, 0), 0.0) << "the value given, though drawn in the lowest colour";
    EXPECT_EQ(plot.heatmapCell(1, 2), 1e-1);
    EXPECT_EQ(plot.heatmapCellText(1, 2), QStringLiteral("cell 1/2"));
    QSignalSpy clicked(&plot, &PlotWidget::cellClicked);
    QSignalSpy menu(&plot, &PlotWidget::cellContextMenuRequested);
    const QPoint at = plot.heatmapCellPosition(1, 2);
    auto* canvas = plot.childAt(at);
    ASSERT_NE(canvas, nullptr);
    QTest::mouseClick(canvas, Qt::LeftButton, {}, canvas->mapFrom(&plot, at));
    QTest::mouseClick(canvas, Qt::RightButton, {}, canvas->mapFrom(&plot, at));
    ASSERT_EQ(clicked.count(), 1);
    EXPECT_EQ(clicked.front().at(0).toInt(), 1);
    EXPECT_EQ(clicked.front().at(1).toInt(), 2);
    ASSERT_EQ(menu.count(), 1);
    EXPECT_EQ(menu.front().at(0).toInt(), 1);
    EXPECT_EQ(menu.front().at(1).toInt(), 2);
    plot.setHeatmapSelection(1, 2);
    EXPECT_EQ(plot.heatmapSelection(), QPoint(1, 2));
    plot.setHeatmapSelection(-1, -1);
    EXPECT_EQ(plot.heatmapSelection(), QPoint(-1, -1));

    plot.clear();
    plot.setBands({ { QStringLiteral("band"), Qt::green, { 0, 1, 2 }, { 1, 1, 1 }, { 2, 3, 4 } } });
    EXPECT_EQ(plot.bandCount(), 1);
    EXPECT_EQ(plot.heatmapSize(), QSize());
    EXPECT_TRUE(test::pixelSpread(plot.toImage()) > 0.0);
}
