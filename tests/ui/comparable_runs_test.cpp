// Comparisons that can be trusted: the runs panel proposes only a pair of the same kind and
// model (an empty state otherwise); the precision panel's current run and its overlay never share
// a legend name, and an overlay of another model is dropped when the model changes.
#include "history/metric_labels.h"
#include "history/recording.h"
#include "panels/precision/precision_charts.h"
#include "panels/precision/precision_panel.h"
#include "panels/runs/delta_table_model.h"
#include "panels/runs/run_comparison_view.h"
#include "panels/runs/run_table_model.h"
#include "panels/runs/runs_panel.h"
#include "precision_panel_fixture.h"
#include "ui_test_support.h"

using namespace day0;
using namespace day0::ui;

namespace {

void recordRun(history::RunKind kind, const std::string& model, const std::string& label)
{
    history::RunRecord r(kind);
    r.info.modelName = model;
    r.info.label = label;
    r.addMetric("step_time_s", 1.0, "s");
    auto id = history::recordRun(r);
    ASSERT_TRUE(id.ok()) << id.error().message;
}

std::shared_ptr<PrecisionRun> runOf(const std::string& fingerprint, const std::string& label)
{
    auto run = std::make_shared<PrecisionRun>();
    auto dump = std::make_shared<numerics::Dump>();
    dump->info.fingerprint = fingerprint;
    run->target = dump;
    run->label = label;
    run->finishedAt = "10:00:00";
    return run;
}

class PrecisionOverlayTest : public test::PrecisionPanelFixture { };

} // namespace

TEST(ComparableRuns, APlanAndAPrecisionRunAreNotComparedOnAFreshStore)
{
    test::ScratchStore store;
    recordRun(history::RunKind::Plan, "kimi-k2", "plan");
    recordRun(history::RunKind::Run, "kimi-k2", "bf16 vs fp32");
    recordRun(history::RunKind::Run, "mixtral-8x7b", "bf16 vs fp32");
    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_EQ(panel.runModel()->rowCount(), 3);
    EXPECT_TRUE(panel.selectedRuns().empty()) << "no two runs of one kind and model";
    EXPECT_EQ(panel.comparisonView()->comparison(), nullptr);
    EXPECT_TRUE(
        panel.comparisonView()->headerText().contains(QStringLiteral("same kind and model")))
        << fromQString(panel.comparisonView()->headerText());
}

TEST(ComparableRuns, TheNewestRunIsComparedWithTheLastOfItsKindAndModel)
{
    test::ScratchStore store;
    recordRun(history::RunKind::Run, "kimi-k2", "first");
    recordRun(history::RunKind::Run, "mixtral-8x7b", "other model");
    recordRun(history::RunKind::Plan, "kimi-k2", "a plan");
    recordRun(history::RunKind::Run, "kimi-k2", "second");
    Session session;
    JobRunner jobs;
    RunsPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_EQ(panel.selectedRuns().size(), 2u);
    const auto* comparison = panel.comparisonView()->comparison();
    ASSERT_NE(comparison, nullptr) << fromQString(panel.comparisonView()->headerText());
    EXPECT_EQ(comparison->a.label, "first");
    EXPECT_EQ(comparison->b.label, "second");

    // Quantities read as names, never as stored keys (the key is in the tooltip).
    const auto* deltas = panel.comparisonView()->deltaModel();
    bool stepTime = false;
    for (int row = 0; row < deltas->rowCount(); ++row) {
        const QString shown = deltas->index(row, DeltaTableModel::Quantity).data().toString();
        EXPECT_FALSE(shown.contains(QLatin1Char('_'))) << fromQString(shown);
        stepTime = stepTime || shown == QStringLiteral("Step time");
    }
    EXPECT_TRUE(stepTime) << "step_time_s reads as Step time";
    EXPECT_EQ(history::metricLabel("bench_l2_p99_ttft_ms"), "Level 2: p99 TTFT");
    EXPECT_EQ(history::metricLabel("rank3.weight_bytes"), "Rank 3: weight memory");
    EXPECT_EQ(history::metricLabel("decode_s"), "Decode time");
    EXPECT_EQ(history::metricLabel("max_rel_l2"), "Max relative L2 error");
}

TEST(ComparableRuns, OverlaysAreOfOneModelAndNamedApart)
{
    const auto a = runOf("kimi-k2/4", "bf16 vs fp32");
    const auto b = runOf("kimi-k2/4", "bf16 vs fp32");
    const auto other = runOf("mixtral/4", "bf16 vs fp32");
    EXPECT_TRUE(sameModel(a.get(), b.get()));
    EXPECT_FALSE(sameModel(a.get(), other.get()));
    EXPECT_FALSE(sameModel(a.get(), nullptr));
    const auto [current, previous] = depthLegendNames(*a, *b);
    EXPECT_NE(current, previous) << "the same label and time are told apart";
    b->finishedAt = "09:58:10";
    const auto [c2, p2] = depthLegendNames(*a, *b);
    EXPECT_TRUE(c2.contains(QStringLiteral("10:00:00"))) << fromQString(c2);
    EXPECT_TRUE(p2.contains(QStringLiteral("09:58:10"))) << fromQString(p2);
    EXPECT_NE(c2, p2);
}

TEST_F(PrecisionOverlayTest, AnOverlayStaysForItsOwnModelAndIsDroppedForAnother)
{
    // Runs the panel started (they name their model): reopening that model keeps the previous
    // run as the overlay, opening another drops it.
    test::openModel(m_session, "kimi-k2");
    PrecisionPanel panel(m_session, m_jobs);
    PrecisionRunRequest request;
    request.modelSource = "kimi-k2";
    request.prompt = "5, 17, 300";
    request.tokens = 1;
    panel.run(request);
    test::settle(m_jobs);
    const auto first = panel.current();
    ASSERT_NE(first, nullptr) << panel.errorText().toStdString();
    panel.run(request);
    test::settle(m_jobs);
    ASSERT_EQ(panel.overlay(), first) << "the same model's previous run is overlaid";
    EXPECT_GE(panel.depthPlot()->lineSeriesCount(), 2);
    test::openModel(m_session, "kimi-k2");
    EXPECT_EQ(panel.overlay(), first) << "reopening the same model keeps its overlay";
    test::openModel(m_session, "deepseek-v3");
    EXPECT_EQ(panel.overlay(), nullptr) << "a run of the previous model is no overlay";
    test::settle(m_jobs);
}
