// The serving panel's local server on a plan's sharded ranks or a backend plugin: the plan and
// backend fields checked as `day0 serve` checks --plan and --backend (the refusal shown, Start
// disabled), a model-dependent refusal shown when the server starts, and a served plan tp=2 of
// tiny-llama whose greedy tokens equal the single-rank reference's (the bench's --check).
#include "panels/serving/bench_level_model.h"
#include "panels/serving/local_server_box.h"
#include "panels/serving/serving_panel.h"
#include "panels/serving/stage_table.h"
#include "serving_test_support.h"
#include "ui_test_support.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>

#include <cstdlib>

using namespace day0;
using namespace day0::ui;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// Sets DAY0_PLUGIN_PATH to the host-simulated test backend while alive, where it is built.
class ScopedPluginPath {
public:
    ScopedPluginPath()
    {
#ifdef DAY0_HOSTSIM_PLUGIN_DIR
        ::setenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR, 1);
#endif
    }
    ~ScopedPluginPath() { ::unsetenv("DAY0_PLUGIN_PATH"); }
    ScopedPluginPath(const ScopedPluginPath&) = delete;
    ScopedPluginPath& operator=(const ScopedPluginPath&) = delete;
};

/// Starts `box`'s server and waits for it; the status line when it did not start.
void startAndWait(LocalServerBox& box)
{
    ASSERT_TRUE(box.startButton()->isEnabled()) << fromQString(box.refusal());
    box.startButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return !box.busy(); }, 120000)) << "server did not start";
}

} // namespace

TEST(ServingServer, PlanAndBackendFieldsAreCheckedAsTheCliChecksThem)
{
    ScopedPluginPath plugins;
    test::ScopedCache cache;
    Session session;
    JobRunner jobs;
    test::openModel(session, kTiny);
    ServingPanel panel(session, jobs);
    auto* box = panel.serverBox();
    EXPECT_TRUE(box->refusal().isEmpty());
    EXPECT_TRUE(box->startButton()->isEnabled());
    ASSERT_GE(box->backendBox()->count(), 1);
    EXPECT_EQ(box->backendBox()->itemData(0).toString(), QStringLiteral("cpu"));

    box->planField()->setText(QStringLiteral("tp=x"));
    EXPECT_TRUE(box->refusal().startsWith(QStringLiteral("--plan"))) << fromQString(box->refusal());
    EXPECT_FALSE(box->startButton()->isEnabled());
    EXPECT_TRUE(box->statusLabel()->text().contains(box->refusal().toHtmlEscaped()))
        << fromQString(box->statusLabel()->text());
    box->planField()->setText(QStringLiteral("tp=2,dp=2"));
    EXPECT_TRUE(box->refusal().contains(QStringLiteral("dp=2"))) << fromQString(box->refusal());
    box->planField()->setText(QStringLiteral("tp=2,cp=2"));
    EXPECT_TRUE(box->refusal().contains(QStringLiteral("cp"))) << fromQString(box->refusal());
    box->planField()->setText(QStringLiteral("tp=2"));
    EXPECT_TRUE(box->refusal().isEmpty()) << fromQString(box->refusal());
    EXPECT_TRUE(box->startButton()->isEnabled());
    EXPECT_TRUE(box->statusLabel()->text().isEmpty()) << "the refusal is cleared";

#ifdef DAY0_HOSTSIM_PLUGIN_DIR
    const int hostsim = box->backendBox()->findData(QStringLiteral("hostsim"));
    ASSERT_GT(hostsim, 0) << "the plugin the app found is offered";
    box->backendBox()->setCurrentIndex(hostsim);
    // A plan's ranks run on the plugin too, each on an instance of its own.
    EXPECT_TRUE(box->refusal().isEmpty()) << fromQString(box->refusal());
    EXPECT_TRUE(box->startButton()->isEnabled());
    box->planField()->clear();
    EXPECT_TRUE(box->refusal().isEmpty()) << fromQString(box->refusal());
    startAndWait(*box);
    ASSERT_NE(box->server(), nullptr) << fromQString(box->statusLabel()->text());
    EXPECT_EQ(box->server()->backend(), "hostsim");
    EXPECT_TRUE(box->statusLabel()->text().contains(QStringLiteral("backend hostsim")))
        << fromQString(box->statusLabel()->text());
    EXPECT_FALSE(box->backendBox()->isEnabled()) << "fixed while serving";
    box->stopButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return !box->busy(); }, 60000)) << "server did not stop";
    box->backendBox()->setCurrentIndex(0);
#endif

    // What needs the model is refused when the server starts: three ranks cannot split
    // tiny-llama's four heads.
    box->planField()->setText(QStringLiteral("tp=3"));
    EXPECT_TRUE(box->refusal().isEmpty()) << fromQString(box->refusal());
    startAndWait(*box);
    EXPECT_EQ(box->server(), nullptr);
    EXPECT_TRUE(box->statusLabel()->text().contains(QStringLiteral("tp=3 does not divide")))
        << fromQString(box->statusLabel()->text());
    EXPECT_TRUE(box->startButton()->isEnabled());
}

TEST(ServingServer, AServedPlanGivesTheSingleRankReferencesTokens)
{
    test::ScopedCache cache;
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, kTiny);
    ServingPanel panel(session, jobs);
    auto* box = panel.serverBox();
    box->planField()->setText(QStringLiteral("tp=2"));
    startAndWait(*box);
    ASSERT_NE(box->server(), nullptr) << fromQString(box->statusLabel()->text());
    EXPECT_EQ(box->server()->plan().rfind("tp=2,", 0), 0u) << box->server()->plan();
    EXPECT_TRUE(box->statusLabel()->text().contains(QStringLiteral("plan tp=2,")))
        << fromQString(box->statusLabel()->text());
    EXPECT_FALSE(box->planField()->isEnabled()) << "fixed while serving";

    // The bench of the session checkpoint runs against the sharded server and compares every
    // request's greedy tokens with the single-rank reference engine's.
    panel.stageTable()->setStages({ test::stage(1, 2), test::stage(3, 6) });
    panel.checkBox()->setChecked(true);
    QSignalSpy finished(&panel, &ServingPanel::finished);
    panel.run();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 180000)) << "bench did not end";
    ASSERT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());
    EXPECT_TRUE(panel.summaryLabel()->text().contains(toQString(box->server()->url())))
        << fromQString(panel.summaryLabel()->text());
    const auto& levels = panel.resultModel()->levels();
    ASSERT_EQ(levels.size(), 2u);
    EXPECT_EQ(panel.resultModel()->index(0, BenchLevelModel::Check).data().toString(),
        QStringLiteral("2 compared, none diverge"));
    EXPECT_EQ(panel.resultModel()->index(1, BenchLevelModel::Check).data().toString(),
        QStringLiteral("6 compared, none diverge"));
    box->stopButton()->click();
    ASSERT_TRUE(test::waitFor([&] { return !box->busy(); }, 60000)) << "server did not stop";
    EXPECT_TRUE(box->planField()->isEnabled());
}
