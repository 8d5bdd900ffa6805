// The Training view: recorded training runs listed, their loss curves and gradient norms
// overlaid point for point as recorded, one model unless asked, and its empty state.
#include "actions/train_record.h"
#include "jobs/job_runner.h"
#include "panels/training/training_panel.h"
#include "session/session.h"
#include "train/next_token_mlp.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QSignalSpy>
#include <QTreeWidget>

using namespace day0;
using namespace day0::ui;

namespace {

/// A short run of the built-in task, recorded under `model` in `precision`.
train::TrainResult recordRun(history::RunStore& store, const std::string& model,
    train::TrainPrecision precision, std::int64_t steps)
{
    const train::NextTokenMlp mlp({});
    const train::SyntheticCorpus corpus(32, 7);
    train::TrainOptions o;
    o.steps = steps;
    o.globalBatch = 2;
    o.sequenceLength = 8;
    o.precision = precision;
    auto result = train::runTraining(mlp, corpus, o);
    EXPECT_TRUE(result.ok()) << result.error().message;
    EXPECT_TRUE(store.commit(actions::trainRunRecord(model, o, *result, 0.1)).ok());
    return *result;
}

bool listedAtLeast(const TrainingPanel& panel, std::size_t n)
{
    return test::waitFor([&] { return panel.runs().size() >= n; }, 20000);
}

} // namespace

TEST(TrainingPanel, OverlaysTheRecordedLossesAndGradientNormsOfTwoRuns)
{
    test::ScratchStore scratch;
    train::TrainResult f64;
    train::TrainResult f32;
    {
        auto store = scratch.open();
        f64 = recordRun(store, "stories", train::TrainPrecision::F64, 9);
        f32 = recordRun(store, "stories", train::TrainPrecision::F32, 7);
    }
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    ASSERT_TRUE(listedAtLeast(panel, 2));
    test::settle(jobs);
    ASSERT_EQ(panel.runs().size(), 2u);
    EXPECT_EQ(panel.runList()->topLevelItemCount(), 2);
    // Both runs are of one model: both overlaid by default, the newest (f32) first.
    ASSERT_EQ(panel.overlaidRuns().size(), 2u);
    ASSERT_EQ(panel.lossPlot()->lineSeriesCount(), 2);
    ASSERT_EQ(panel.gradNormPlot()->lineSeriesCount(), 2);
    EXPECT_FALSE(panel.lossPlot()->showsEmptyState());
    const train::TrainResult* expected[] = { &f32, &f64 };
    for (int s = 0; s < 2; ++s) {
        const auto& history = expected[s]->history;
        const auto loss = panel.lossPlot()->linePoints(s);
        const auto norms = panel.gradNormPlot()->linePoints(s);
        ASSERT_EQ(loss.size(), qsizetype(history.size())) << s;
        ASSERT_EQ(norms.size(), qsizetype(history.size())) << s;
        for (std::size_t i = 0; i < history.size(); ++i) {
            EXPECT_EQ(loss[qsizetype(i)].x(), double(history[i].step));
            EXPECT_EQ(loss[qsizetype(i)].y(), history[i].loss) << s << " step " << i;
            EXPECT_EQ(norms[qsizetype(i)].y(), history[i].gradNorm) << s << " step " << i;
        }
    }
    EXPECT_TRUE(panel.modelWarning().isEmpty());
}

TEST(TrainingPanel, ARunOfAnotherModelIsNotOverlaidUnlessAskedAndSaidEitherWay)
{
    test::ScratchStore scratch;
    {
        auto store = scratch.open();
        recordRun(store, "stories", train::TrainPrecision::F64, 5);
        recordRun(store, "llama-shrunk", train::TrainPrecision::F64, 4);
    }
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    ASSERT_TRUE(listedAtLeast(panel, 2));
    test::settle(jobs);
    // By default only the newest run's model.
    ASSERT_EQ(panel.overlaidRuns().size(), 1u);
    EXPECT_EQ(panel.overlaidRuns()[0], panel.runs()[0].info.id);
    panel.selectRuns({ panel.runs()[0].info.id, panel.runs()[1].info.id });
    EXPECT_EQ(panel.overlaidRuns().size(), 1u);
    EXPECT_EQ(panel.lossPlot()->lineSeriesCount(), 1);
    EXPECT_TRUE(panel.modelWarning().contains(QStringLiteral("Not overlaid")))
        << panel.modelWarning().toStdString();
    EXPECT_TRUE(panel.modelWarning().contains(QStringLiteral("stories")));
    panel.setOtherModelsShown(true);
    EXPECT_EQ(panel.overlaidRuns().size(), 2u);
    EXPECT_EQ(panel.lossPlot()->lineSeriesCount(), 2);
    EXPECT_TRUE(panel.modelWarning().contains(QStringLiteral("not comparable")))
        << panel.modelWarning().toStdString();
}

TEST(TrainingPanel, AnEmptyStoreSaysHowToCreateATrainingRun)
{
    test::ScratchStore scratch;
    {
        auto store = scratch.open();
        history::RunRecord forward(history::RunKind::Run); // not a training run
        forward.info.modelName = "stories";
        ASSERT_TRUE(store.commit(forward).ok());
    }
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    QSignalSpy listed(&panel, &TrainingPanel::listed);
    ASSERT_TRUE(test::waitFor([&] { return listed.count() > 0; }, 20000));
    test::settle(jobs);
    EXPECT_TRUE(panel.runs().empty());
    EXPECT_EQ(panel.runList()->topLevelItemCount(), 0);
    EXPECT_TRUE(panel.lossPlot()->showsEmptyState());
    EXPECT_TRUE(panel.lossPlot()->noteText().contains(QStringLiteral("day0 train CHECKPOINT")))
        << panel.lossPlot()->noteText().toStdString();
    EXPECT_TRUE(panel.summaryText().contains(QStringLiteral("No training runs")));
}

TEST(TrainingPanel, FollowsTheStoreWhenAnotherProcessRecordsATrainingRun)
{
    test::ScratchStore scratch;
    Session session;
    JobRunner jobs;
    TrainingPanel panel(session, jobs);
    QSignalSpy listed(&panel, &TrainingPanel::listed);
    ASSERT_TRUE(test::waitFor([&] { return listed.count() > 0; }, 20000));
    test::settle(jobs);
    EXPECT_TRUE(panel.runs().empty());
    // `day0 train` in another process: the store follower's two-second check notices it.
    {
        auto store = scratch.open();
        recordRun(store, "stories", train::TrainPrecision::F64, 3);
    }
    ASSERT_TRUE(listedAtLeast(panel, 1));
    EXPECT_EQ(panel.runList()->topLevelItemCount(), 1);
}
