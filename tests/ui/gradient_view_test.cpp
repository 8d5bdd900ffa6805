// The Training view's gradient heatmap (GradientView): gradient dumps of a shrunk Llama made
// here (the fp64 reference, a target whose layer 2 rounds its backward's gradients to bf16, and
// the target's inject-mode dump beside it), compared in the view: one heatmap row per layer,
// a column per output gradient, the own error on layer 2's backward only, the accumulated error
// in the layers it feeds, and the first divergence in backward order.
#include "actions/gradients.h"
#include "base/resources.h"
#include "checkpoint/shrink.h"
#include "jobs/job_runner.h"
#include "numerics/dump_compare.h"
#include "panels/precision/precision_work.h"
#include "panels/training/gradient_view.h"
#include "panels/training/training_panel.h"
#include "session/session.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QSignalSpy>
#include <QTemporaryDir>

#include <cmath>
#include <filesystem>

using namespace day0;
using namespace day0::ui;

namespace {

namespace fs = std::filesystem;

/// Makes the three gradient dumps under `dir`: fp64, rounded, rounded-inject.
void makeGradientDumps(const fs::path& dir)
{
    setResourceDir(DAY0_RESOURCE_DIR);
    Progress progress;
    const auto shrunk = checkpoint::shrinkModel("llama-3.1-8b", dir / "llama", {}, progress, {});
    ASSERT_TRUE(shrunk.ok()) << shrunk.error().message;
    const auto pass = [&](const char* name, bool rounded, const fs::path& inject) {
        actions::GradientRequest r;
        r.checkpoint = (dir / "llama").string();
        r.ids = { 5, 9, 13, 200, 31, 7 };
        r.dump = dir / name;
        r.inject = inject;
        if (rounded) {
            r.roundedLayers = { 2 };
        }
        Progress p;
        const auto done = actions::checkpointGradients(r, p, {});
        ASSERT_TRUE(done.ok()) << done.error().message;
    };
    pass("fp64", false, {});
    pass("rounded", true, {});
    pass("rounded-inject", true, dir / "fp64");
}

/// The heatmap value of `layer`'s cell in the column labelled `column`; NaN when absent.
double cell(const PrecisionHeatmap& h, int layer, const QString& column)
{
    const int c = int(h.data.columnLabels.indexOf(column));
    for (int r = 0; r < h.data.rows; ++r) {
        if (h.rowLayers[std::size_t(r)] == layer && c >= 0) {
            return h.data.values[r * h.data.columns + c];
        }
    }
    return std::nan("");
}

} // namespace

TEST(GradientView, SaysWhatWillAppearAndHowBeforeAComparison)
{
    JobRunner jobs;
    GradientView view(jobs);
    EXPECT_TRUE(view.heatmapPlot()->showsEmptyState());
    const QString note = view.heatmapPlot()->noteText();
    EXPECT_TRUE(note.contains(QStringLiteral("gradient heatmap appears here")))
        << note.toStdString();
    EXPECT_TRUE(note.contains(QStringLiteral("--grad"))) << note.toStdString();
    EXPECT_TRUE(note.contains(QStringLiteral("--inject-from"))) << note.toStdString();
}

TEST(GradientView, ShowsTheGradientHeatmapOfTwoDumpsWithOwnErrorOnThePerturbedLayer)
{
    test::ScratchStore scratch;
    QTemporaryDir tmp;
    ASSERT_TRUE(tmp.isValid());
    const fs::path dir = fromQString(tmp.path());
    makeGradientDumps(dir);
    if (HasFatalFailure()) {
        return;
    }
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    panel.showGradientTab();
    GradientView* view = panel.gradientView();
    QSignalSpy compared(view, &GradientView::compared);
    view->compareDumps(toQString((dir / "fp64").string()), toQString((dir / "rounded").string()));
    ASSERT_TRUE(test::waitFor([&] { return compared.count() > 0; }, 60000));
    test::settle(jobs);
    ASSERT_NE(view->comparison(), nullptr) << view->findingsText().toStdString();
    ASSERT_NE(view->comparison()->local, nullptr) << "rounded-inject is beside the target";
    EXPECT_FALSE(view->heatmapPlot()->showsEmptyState());

    // The anchors' rows: the 4 layers, a column per output gradient, each cell the comparison
    // row of that anchor's gradient.
    const PrecisionHeatmap& h = view->heatmap();
    ASSERT_EQ(h.data.rows, 4);
    EXPECT_EQ(view->heatmapPlot()->heatmapSize(), QSize(h.data.columns, 4));
    for (const char* column : { "#grad", "mlp#grad", "post_attention_layernorm#grad",
             "self_attn#grad", "input_layernorm#grad" }) {
        EXPECT_TRUE(h.data.columnLabels.contains(QString::fromLatin1(column))) << column;
    }
    const auto& rows = view->comparison()->comparison.rows;
    for (int r = 0; r < h.data.rows; ++r) {
        const int layer = h.rowLayers[std::size_t(r)];
        const int c = int(h.data.columnLabels.indexOf(QStringLiteral("self_attn#grad")));
        const int row = h.rowAt(r, c);
        ASSERT_GE(row, 0);
        EXPECT_EQ(rows[std::size_t(row)].name,
            "model.layers." + std::to_string(layer) + ".self_attn#grad");
    }

    // With the inject-mode dump the view shows own error: only what layer 2's backward
    // computed (its sub-modules, and model.layers.1#grad which it passes on) carries any.
    EXPECT_EQ(h.data.valueLabel, metricTitle(numerics::GridMetric::OwnRelL2));
    EXPECT_GT(cell(h, 2, QStringLiteral("self_attn#grad")), 1e-4);
    EXPECT_GT(cell(h, 1, QStringLiteral("#grad")), 1e-4);
    EXPECT_LT(cell(h, 0, QStringLiteral("#grad")), 1e-13);
    EXPECT_LT(cell(h, 1, QStringLiteral("self_attn#grad")), 1e-13);
    EXPECT_LT(cell(h, 3, QStringLiteral("self_attn#grad")), 1e-13);
    EXPECT_GT(view->heatmapPlot()->heatmapCell(
                  1, int(h.data.columnLabels.indexOf(QStringLiteral("#grad")))),
        1e-4);

    // Accumulated: the layers layer 2 feeds (1 and 0) inherit its error; layer 3 does not.
    view->setMetric(numerics::GridMetric::RelL2);
    const PrecisionHeatmap& a = view->heatmap();
    EXPECT_GT(cell(a, 1, QStringLiteral("self_attn#grad")), 1e-4);
    EXPECT_GT(cell(a, 0, QStringLiteral("#grad")), 1e-4);
    EXPECT_LT(cell(a, 3, QStringLiteral("self_attn#grad")), 1e-13);

    const QString findings = view->findingsText();
    EXPECT_TRUE(findings.contains(QStringLiteral("backward order"))) << findings.toStdString();
    EXPECT_TRUE(findings.contains(QStringLiteral("model.layers.2.post_attention_layernorm#grad")))
        << findings.toStdString();
    EXPECT_TRUE(findings.contains(QStringLiteral("layer 2's backward"))) << findings.toStdString();
}

TEST(GradientView, AFolderThatIsNoDumpIsSaidInRed)
{
    test::ScratchStore scratch;
    QTemporaryDir tmp;
    JobRunner jobs;
    GradientView view(jobs);
    QSignalSpy compared(&view, &GradientView::compared);
    view.compareDumps(tmp.path(), tmp.path() + QStringLiteral("/missing"));
    ASSERT_TRUE(test::waitFor([&] { return compared.count() > 0; }, 20000));
    test::settle(jobs);
    EXPECT_EQ(view.comparison(), nullptr);
    EXPECT_TRUE(view.heatmapPlot()->showsEmptyState());
    EXPECT_FALSE(view.findingsText().isEmpty());
}
