// The Training view with real training runs made here (stories260K through the LLM backward):
// two runs recorded with --grad-dump show run B's gradient heatmap against run A's without
// picking files, step by step; a run without dumps says how to get them; a tp=2 run shows its
// ranks' memory against the planner's.
#include "actions/train.h"
#include "base/resources.h"
#include "jobs/job_runner.h"
#include "panels/precision/precision_work.h"
#include "panels/training/gradient_view.h"
#include "panels/training/training_panel.h"
#include "session/session.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTreeWidget>

#include <filesystem>
#include <map>

using namespace day0;
using namespace day0::ui;

namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(DAY0_TEST_DATA_DIR) + "/exec/stories260K-hf";
constexpr int kStoriesLayers = 5;

/// Trains stories260K for two steps and records the run; with `dump`, both steps' gradients.
actions::TrainOutcome trainAndRecord(const test::ScratchStore& scratch,
    train::TrainPrecision precision, const std::string& plan, const fs::path& dump)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    actions::TrainRequest r;
    r.model = kStories;
    r.plan = plan;
    r.options.steps = 2;
    r.options.globalBatch = 2;
    r.options.sequenceLength = 8;
    r.options.precision = precision;
    r.gradDump = dump;
    r.gradSteps = *actions::GradDumpSteps::parse("0,1");
    Progress progress;
    auto out = actions::trainModel(r, progress);
    EXPECT_TRUE(out.ok()) << out.error().message;
    if (!out) {
        return {};
    }
    auto store = scratch.open();
    auto id = store.commit(out->record);
    EXPECT_TRUE(id.ok());
    out->record.info.id = *id;
    return std::move(*out);
}

bool listedAtLeast(const TrainingPanel& panel, std::size_t n)
{
    return test::waitFor([&] { return panel.runs().size() >= n; }, 20000);
}

} // namespace

TEST(TrainingRunGradients, TwoRunsWithGradientDumpsShowTheirHeatmapWithoutPickingFiles)
{
    test::ScratchStore scratch;
    QTemporaryDir tmp;
    ASSERT_TRUE(tmp.isValid());
    const fs::path dir = fromQString(tmp.path());
    // The f32 run first: the newer f64 run is still the reference.
    const auto f32 = trainAndRecord(scratch, train::TrainPrecision::F32, "", dir / "f32");
    const auto f64 = trainAndRecord(scratch, train::TrainPrecision::F64, "", dir / "f64");
    ASSERT_EQ(f32.gradDumps.size(), 2u);
    ASSERT_EQ(f64.gradDumps.size(), 2u);

    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    GradientView* view = panel.gradientView();
    QSignalSpy compared(view, &GradientView::compared);
    ASSERT_TRUE(listedAtLeast(panel, 2));
    // Both runs are of one model, so both are selected: their last common step is compared.
    ASSERT_TRUE(test::waitFor([&] { return compared.count() > 0; }, 60000));
    test::settle(jobs);
    ASSERT_EQ(panel.runs().size(), 2u);
    EXPECT_EQ(panel.runs()[0].gradDumps.size(), 2u);
    ASSERT_NE(view->comparison(), nullptr) << view->findingsText().toStdString();
    const QString pair = view->pairText();
    EXPECT_TRUE(pair.contains(QStringLiteral("#%1 (f32").arg(f32.record.info.id.value())))
        << pair.toStdString();
    EXPECT_TRUE(pair.contains(QStringLiteral("against #%1 (f64").arg(f64.record.info.id.value())))
        << pair.toStdString();
    EXPECT_TRUE(pair.contains(QStringLiteral("step 1"))) << pair.toStdString();
    ASSERT_EQ(view->stepChoice()->count(), 2);
    EXPECT_EQ(view->stepChoice()->currentText(), QStringLiteral("1"));
    EXPECT_FALSE(view->heatmapPlot()->showsEmptyState());
    EXPECT_EQ(view->comparison()->comparison.reference.precision, "fp64");
    EXPECT_EQ(view->comparison()->comparison.reference.extra["training"]["step"], 1);
    EXPECT_EQ(view->comparison()->comparison.target.precision, "fp32");

    // The heatmap's rows are the model's layers; each cell is that anchor's gradient.
    const auto check = [&] {
        const PrecisionHeatmap& h = view->heatmap();
        ASSERT_EQ(h.data.rows, kStoriesLayers);
        const int c = int(h.data.columnLabels.indexOf(QStringLiteral("self_attn#grad")));
        ASSERT_GE(c, 0);
        const auto& rows = view->comparison()->comparison.rows;
        for (int r = 0; r < h.data.rows; ++r) {
            const int row = h.rowAt(r, c);
            ASSERT_GE(row, 0);
            EXPECT_EQ(rows[std::size_t(row)].name,
                "model.layers." + std::to_string(h.rowLayers[std::size_t(r)]) + ".self_attn#grad");
            // fp32 against fp64: a small error, not none.
            EXPECT_GT(h.data.values[r * h.data.columns + c], 0.0) << r;
            EXPECT_LT(h.data.values[r * h.data.columns + c], 1e-3) << r;
        }
    };
    check();

    // Step 0 from the step box: the first step's dumps.
    const int before = int(compared.count());
    view->stepChoice()->setCurrentIndex(0);
    emit view->stepChoice()->activated(0);
    ASSERT_TRUE(test::waitFor([&] { return compared.count() > before; }, 60000));
    test::settle(jobs);
    EXPECT_TRUE(view->pairText().contains(QStringLiteral("step 0"))) << pair.toStdString();
    ASSERT_NE(view->comparison(), nullptr);
    EXPECT_EQ(view->comparison()->comparison.reference.extra["training"]["step"], 0);
    EXPECT_EQ(view->comparison()->comparison.target.extra["training"]["step"], 0);
    check();

    // A refresh of the same selection compares nothing again.
    const int settled = int(compared.count());
    panel.refresh();
    ASSERT_TRUE(listedAtLeast(panel, 2));
    test::settle(jobs);
    EXPECT_EQ(int(compared.count()), settled);
}

TEST(TrainingRunGradients, ARunWithoutDumpsSaysHowToGetThem)
{
    test::ScratchStore scratch;
    trainAndRecord(scratch, train::TrainPrecision::F64, "", {});
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    ASSERT_TRUE(listedAtLeast(panel, 1));
    test::settle(jobs);
    GradientView* view = panel.gradientView();
    EXPECT_TRUE(view->pairText().contains(QStringLiteral("--grad-dump")))
        << view->pairText().toStdString();
    EXPECT_TRUE(view->stepChoice()->isHidden());
    EXPECT_TRUE(view->heatmapPlot()->showsEmptyState());
    EXPECT_TRUE(view->heatmapPlot()->noteText().contains(QStringLiteral("--grad-dump")))
        << view->heatmapPlot()->noteText().toStdString();
    // One rank: no per-rank memory table.
    EXPECT_TRUE(panel.rankMemoryTable()->isHidden());
    EXPECT_TRUE(panel.rankMemoryCaption().isEmpty());
}

TEST(TrainingRunGradients, ATensorParallelRunShowsEachRanksMemoryAgainstThePlanners)
{
    test::ScratchStore scratch;
    const auto tp = trainAndRecord(scratch, train::TrainPrecision::F64, "tp=2", {});
    ASSERT_TRUE(tp.memory.has_value());
    std::map<int, std::pair<std::int64_t, std::int64_t>> expected; // rank: trainer, planner
    for (const auto& line : tp.memory->lines) {
        expected[line.rank].first += line.trainer;
        expected[line.rank].second += line.planner;
    }
    ASSERT_EQ(expected.size(), 2u);
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    ASSERT_TRUE(listedAtLeast(panel, 1));
    test::settle(jobs);
    QTreeWidget* table = panel.rankMemoryTable();
    ASSERT_FALSE(table->isHidden());
    EXPECT_TRUE(panel.rankMemoryCaption().contains(QStringLiteral("tp=2")))
        << panel.rankMemoryCaption().toStdString();
    ASSERT_EQ(table->topLevelItemCount(), 2);
    for (int r = 0; r < 2; ++r) {
        const QTreeWidgetItem* item = table->topLevelItem(r);
        EXPECT_EQ(item->text(0), QString::number(r));
        const auto trainer = item->data(1, Qt::UserRole).toLongLong();
        const auto planner = item->data(2, Qt::UserRole).toLongLong();
        EXPECT_EQ(trainer, expected[r].first) << r;
        EXPECT_EQ(planner, expected[r].second) << r;
        EXPECT_GT(trainer, 0);
        EXPECT_GT(planner, 0);
        EXPECT_EQ(
            item->text(3), QStringLiteral("%1×").arg(double(trainer) / double(planner), 0, 'f', 2));
    }
}
