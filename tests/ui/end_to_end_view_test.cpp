// The precision panel's "End to end" view (issue #21): `day0 eval` of the session's model against
// fp64 over a sampled corpus, its charts, generation diff, verdict and record.
#include "history/recording.h"
#include "history/run_store.h"
#include "panels/precision/end_to_end_view.h"
#include "precision_panel_fixture.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QSignalSpy>
#include <QTabWidget>

#include <numeric>

using namespace day0;
using namespace day0::ui;

namespace {

class EndToEndViewTest : public test::PrecisionPanelFixture { };

} // namespace

TEST_F(EndToEndViewTest, EvaluatingFillsTheChartsTheDiffAndTheVerdictAndIsRecorded)
{
    PrecisionPanel panel(m_session, m_jobs);
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    panel.resize(1400, 860);
    panel.show();
    panel.showEndToEnd();
    EndToEndView* view = panel.endToEndView();
    ASSERT_NE(view, nullptr);
    EXPECT_TRUE(view->isVisible());
    EndToEndRequest request;
    request.modelSource = s_checkpoint;
    request.sequences = 4;
    request.sequenceLength = 32;
    request.seed = 3;
    request.generate = 16;
    view->run(request);
    test::settle(m_jobs);
    const auto result = view->current();
    ASSERT_NE(result, nullptr) << view->errorText().toStdString();
    const auto& o = result->outcome;
    const auto& s = o.summary;
    ASSERT_GT(s.positions, 0);

    // KL histogram: a bar per occupied log10 bin (one empty bin either side), the bars counting
    // every position.
    const auto& counts = s.histogram.counts;
    ASSERT_FALSE(counts.empty());
    const std::size_t first = histogramFirstBin(s.histogram);
    const std::size_t last = histogramLastBin(s.histogram);
    ASSERT_LE(first, last);
    ASSERT_LT(last, counts.size());
    EXPECT_TRUE(first == 0 || counts[first] == 0);
    EXPECT_TRUE(last + 1 == counts.size() || counts[last] == 0);
    EXPECT_EQ(view->histogramPlot()->barLayerCount(), 1);
    double total = 0;
    for (std::size_t b = first; b <= last; ++b) {
        EXPECT_EQ(view->histogramPlot()->barValue(0, int(b - first)), double(counts[b])) << b;
        total += view->histogramPlot()->barValue(0, int(b - first));
    }
    EXPECT_TRUE(std::isnan(view->histogramPlot()->barValue(0, int(last - first + 1))));
    EXPECT_EQ(total, double(s.positions));
    EXPECT_GE(last - first, 2U) << "at least one occupied bin";

    // KL against position: a point per position of the 32-token window.
    ASSERT_EQ(view->positionPlot()->lineSeriesCount(), 1);
    const auto points = view->positionPlot()->linePoints(0);
    ASSERT_EQ(points.size(), qsizetype(s.klByPosition.size()));
    EXPECT_GE(points.size(), 31);
    EXPECT_LE(points.size(), 32);
    for (int p = 0; p < points.size(); ++p) {
        EXPECT_DOUBLE_EQ(points[p].y(), s.klByPosition[std::size_t(p)]);
    }

    // Same-top strip: one cell per scored position, a row per window, 1 where the argmaxes
    // agree.
    ASSERT_EQ(o.windows, 4);
    ASSERT_EQ(o.sameTopStrip.size(), std::size_t(s.positions));
    const int perWindow = int(s.positions / 4);
    ASSERT_EQ(view->stripPlot()->heatmapSize(), QSize(perWindow, 4));
    for (int w = 0; w < 4; ++w) {
        for (int p = 0; p < perWindow; ++p) {
            EXPECT_EQ(view->stripPlot()->heatmapCell(w, p),
                double(o.sameTopStrip[std::size_t(w * perWindow + p)]))
                << w << " " << p;
        }
    }
    const double agreeing = std::accumulate(o.sameTopStrip.begin(), o.sameTopStrip.end(), 0.0);
    EXPECT_NEAR(agreeing / double(s.positions), s.sameTop.value, 1e-12);

    // Summary: the figures and the verdict with the rule's limits.
    const QString summary = view->summaryText();
    EXPECT_TRUE(summary.contains(QStringLiteral("mean KL"))) << summary.toStdString();
    EXPECT_TRUE(summary.contains(QStringLiteral("PPL ratio"))) << summary.toStdString();
    ASSERT_TRUE(result->rule.has_value());
    EXPECT_EQ(result->rule->id, "bf16.end_to_end");
    EXPECT_TRUE(summary.contains(QStringLiteral("Verdict: ")));
    EXPECT_TRUE(summary.contains(
        QString::fromStdString(std::string(numerics::verdictStatusName(o.verdict.status)))));
    EXPECT_NE(o.verdict.status, numerics::VerdictStatus::NotJudged);
    EXPECT_TRUE(summary.contains(QStringLiteral("bf16.end_to_end"))) << summary.toStdString();

    // Generation diff: each prompt's divergence position and verdict, or "identical".
    ASSERT_EQ(o.generations.size(), 4U);
    const QString gen = view->generationText();
    for (std::size_t g = 0; g < o.generations.size(); ++g) {
        const auto& d = o.generations[g];
        EXPECT_EQ(d.reference.size(), 16U);
        const auto at = gen.indexOf(QStringLiteral("<b>Prompt %1</b>").arg(g));
        ASSERT_GE(at, 0) << g;
        const QString part = gen.mid(at, gen.indexOf(QStringLiteral("</p>"), at) - at);
        if (d.firstDivergence) {
            EXPECT_TRUE(part.contains(
                QStringLiteral("diverge at generated token <b>%1</b>").arg(*d.firstDivergence)))
                << part.toStdString();
            EXPECT_TRUE(part.contains(
                d.nearTie ? QStringLiteral("near-tie") : QStringLiteral("real divergence")));
            EXPECT_TRUE(part.contains(
                QStringLiteral("[%1]").arg(d.reference[std::size_t(*d.firstDivergence)])));
        } else {
            EXPECT_TRUE(part.contains(QStringLiteral("identical"))) << part.toStdString();
            EXPECT_EQ(d.reference, d.target);
        }
    }

    // Recorded as `day0 eval` records it: kind compare, tool=eval, the curves as layer metrics.
    ASSERT_TRUE(result->recordedRun.has_value()) << result->recordError;
    EXPECT_EQ(recorded.count(), 1);
    EXPECT_EQ(recorded.front().front().toLongLong(), *result->recordedRun);
    auto store = history::RunStore::open(history::storePath());
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto run = store->load(day0::RunId(*result->recordedRun));
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(run->info.kind, history::RunKind::Compare);
    const auto* tool = run->findProperty("tool");
    ASSERT_NE(tool, nullptr);
    EXPECT_EQ(tool->value, "eval");
    const auto lastPosition
        = run->layers.find("eval.position." + std::to_string(s.klByPosition.size() - 1), "kl_mean");
    ASSERT_TRUE(lastPosition.has_value());
    EXPECT_DOUBLE_EQ(run->layers.row(*lastPosition).value, s.klByPosition.back());
}

TEST_F(EndToEndViewTest, CancellingLeavesNothingShownAndNothingRecorded)
{
    PrecisionPanel panel(m_session, m_jobs);
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    panel.resize(1400, 860);
    panel.show();
    panel.showEndToEnd();
    EndToEndView* view = panel.endToEndView();
    EndToEndRequest request;
    request.modelSource = s_checkpoint;
    request.sequences = 64;
    request.sequenceLength = 128;
    view->run(request);
    view->cancel();
    test::settle(m_jobs);
    EXPECT_EQ(view->current(), nullptr);
    EXPECT_TRUE(view->summaryText().contains(QStringLiteral("Cancelled")));
    EXPECT_EQ(view->histogramPlot()->barLayerCount(), 0);
    EXPECT_EQ(recorded.count(), 0);
}

TEST_F(EndToEndViewTest, OnTheEmbeddedDemoTheViewEvaluatesWhenFirstShown)
{
    test::openModel(m_session, "kimi-k2");
    PrecisionPanel panel(m_session, m_jobs);
    panel.resize(1400, 860);
    panel.show();
    test::settle(m_jobs);
    // The layer-by-layer tab is shown first: its demo ran, the end-to-end one waits.
    EndToEndView* view = panel.endToEndView();
    EXPECT_FALSE(view->isVisible());
    EXPECT_EQ(view->current(), nullptr);
    EXPECT_EQ(view->histogramPlot()->barLayerCount(), 0);
    panel.showEndToEnd();
    test::settle(m_jobs);
    ASSERT_NE(view->current(), nullptr) << view->errorText().toStdString();
    const auto& o = view->current()->outcome;
    EXPECT_EQ(o.windows, 4);
    EXPECT_EQ(o.generations.size(), 4U);
    EXPECT_EQ(view->histogramPlot()->barLayerCount(), 1);
    EXPECT_EQ(view->positionPlot()->linePoints(0).size(), qsizetype(o.summary.klByPosition.size()));
    EXPECT_EQ(view->stripPlot()->heatmapSize(), QSize(int(o.summary.positions / 4), 4));
    EXPECT_TRUE(view->summaryText().contains(QStringLiteral("Verdict: ")));
    // Shown again: no second evaluation.
    const auto first = view->current();
    panel.findChild<QTabWidget*>(QStringLiteral("precisionViews"))->setCurrentIndex(0);
    panel.showEndToEnd();
    test::settle(m_jobs);
    EXPECT_EQ(view->current(), first);
    // Another model while the view is shown: the demo follows it.
    test::openModel(m_session, "llama-3.1-8b");
    test::settle(m_jobs);
    ASSERT_NE(view->current(), nullptr) << view->errorText().toStdString();
    EXPECT_NE(view->current(), first);
    EXPECT_NE(view->current()->outcome.spec.name, first->outcome.spec.name);
}
