#include "panels/memory/memory_panel.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QSpinBox>
#include <QTreeWidget>

#include <algorithm>

using namespace day0;
using namespace day0::ui;

namespace {

// The bars must be the core's estimate, stage by stage and component by component.
void expectBarsEqualCore(const MemoryPanel& panel, const Session& session)
{
    auto core = plan::estimateMemory(
        *session.summary(), session.plan(), session.workload(), session.cluster());
    ASSERT_TRUE(core.ok()) << core.error().message;
    auto stages = core->perRank;
    std::sort(stages.begin(), stages.end(),
        [](const auto& a, const auto& b) { return a.ppStage < b.ppStage; });
    const auto* chart = panel.stageChart();
    // Layers are the non-zero components in the order weights, gradients, optimizer,
    // activations, KV cache, buffers.
    std::vector<Bytes plan::RankMemory::*> fields;
    for (auto f : { &plan::RankMemory::weights, &plan::RankMemory::gradients,
             &plan::RankMemory::optimizer, &plan::RankMemory::activations,
             &plan::RankMemory::kvCache, &plan::RankMemory::buffers }) {
        if (std::any_of(
                stages.begin(), stages.end(), [&](const auto& s) { return (s.*f).value != 0; })) {
            fields.push_back(f);
        }
    }
    ASSERT_EQ(chart->barLayerCount(), int(fields.size()));
    for (int layer = 0; layer < int(fields.size()); ++layer) {
        for (int s = 0; s < int(stages.size()); ++s) {
            EXPECT_EQ(chart->barValue(layer, s),
                double((stages[std::size_t(s)].*fields[std::size_t(layer)]).value))
                << "layer " << layer << " stage " << s;
        }
    }
}

} // namespace

TEST(MemoryPanel, ChangingTpChangesBarsToTheCoreEstimate)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-70b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=2,pp=4,zero=1,recompute=selective");
    MemoryPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_TRUE(panel.report().has_value()) << panel.verdict().toStdString();
    EXPECT_EQ(panel.report()->layout.tp, 2);
    expectBarsEqualCore(panel, session);
    const double weightsAtTp2 = panel.stageChart()->barValue(0, 0);

    auto* tp = panel.findChild<QSpinBox*>(QStringLiteral("tpSpin"));
    ASSERT_NE(tp, nullptr);
    tp->setValue(4);
    test::settle(jobs);
    EXPECT_EQ(session.plan().tp, 4);
    ASSERT_TRUE(panel.report().has_value()) << panel.verdict().toStdString();
    EXPECT_EQ(panel.report()->layout.tp, 4);
    expectBarsEqualCore(panel, session);
    EXPECT_LT(panel.stageChart()->barValue(0, 0), weightsAtTp2)
        << "TP 4 holds less weight per rank";
}

TEST(MemoryPanel, SaysByHowMuchAPlanDoesNotFit)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-405b");
    test::configure(session, "h200:1x8", plan::Mode::Train, "tp=8");
    MemoryPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_TRUE(panel.report().has_value());
    EXPECT_FALSE(panel.report()->fits);
    const auto& r = *panel.report();
    const QString expected = QStringLiteral("Does not fit by %1 GiB on rank %2")
                                 .arg(QString::number((r.maxTotal - r.deviceMemory).gib(), 'f', 1))
                                 .arg(r.perRank.front().rank);
    EXPECT_TRUE(panel.verdict().startsWith(expected)) << panel.verdict().toStdString();
}

TEST(MemoryPanel, InvalidPlanShowsTheCoreError)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-8b");
    test::configure(session, "h200:1x8", plan::Mode::Infer, "tp=3");
    MemoryPanel panel(session, jobs);
    test::settle(jobs);
    EXPECT_FALSE(panel.report().has_value());
    EXPECT_TRUE(panel.verdict().contains(QStringLiteral("tp=3"))) << panel.verdict().toStdString();
    EXPECT_EQ(panel.stageChart()->barLayerCount(), 0);
}

TEST(MemoryPanel, FiguresShowTheirFormulaAndInputs)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "llama-3.1-70b");
    test::configure(session, "h200:1x8", plan::Mode::Infer, "tp=8");
    MemoryPanel panel(session, jobs);
    test::settle(jobs);
    ASSERT_TRUE(panel.report().has_value()) << panel.verdict().toStdString();
    QTreeWidget* figures = panel.figures();
    ASSERT_EQ(figures->topLevelItemCount(), 1); // pp = 1: one stage
    const QTreeWidgetItem* stage = figures->topLevelItem(0);
    auto child = [&](const QString& name) -> QTreeWidgetItem* {
        for (int i = 0; i < stage->childCount(); ++i) {
            if (stage->child(i)->text(0) == name) {
                return stage->child(i);
            }
        }
        return nullptr;
    };
    QTreeWidgetItem* weights = child(QStringLiteral("weights"));
    QTreeWidgetItem* kv = child(QStringLiteral("kv_cache"));
    ASSERT_NE(weights, nullptr);
    ASSERT_NE(kv, nullptr);
    const auto& rank = panel.report()->perRank.front();
    EXPECT_EQ(weights->text(1), bytesText(rank.weights));
    // The weights name the layers on the stage, the checkpoint's bytes and tp.
    const QString w = weights->toolTip(1);
    for (const char* text :
        { "weights = ", "layers = 80 (plan: pp=1 puts decoder layers 0-79", "tp = 8 (plan: tp)",
            "params = 1,050,673,152 (model: parameters of one input embedding",
            "bytes_per_param = 2 B (checkpoint: stored as bf16)" }) {
        EXPECT_TRUE(w.contains(QString::fromUtf8(text))) << text << "\n" << w.toStdString();
    }
    // The KV cache: K+V of 8 KV heads × 128 per token, the session's batch and context.
    const QString k = kv->toolTip(0);
    for (const QString& text : { QStringLiteral("elements_per_token = 2,048 (model:"),
             QStringLiteral("(workload: context)"),
             QStringLiteral("sequences = %1 (workload: batch").arg(session.workload().batch),
             QStringLiteral("heads = 8 (model:"), QStringLiteral("bytes_per_element = 2 B") }) {
        EXPECT_TRUE(k.contains(text)) << text.toStdString() << "\n" << k.toStdString();
    }
    const QString contextLine
        = QStringLiteral("context = %1 tokens (workload: context)")
              .arg(QString::fromStdString(formatExact(session.workload().context)));
    EXPECT_TRUE(k.contains(contextLine)) << contextLine.toStdString() << "\n" << k.toStdString();
    // Selecting a row shows the same in the details pane.
    figures->setCurrentItem(kv);
    EXPECT_EQ(panel.figureDetails(), k);
    figures->setCurrentItem(weights);
    EXPECT_TRUE(panel.figureDetails().contains(QStringLiteral("tp = 8 (plan: tp)")));
}
