// Runs started from the precision panel (the comparisons and views of their results are in
// precision_panel_test.cpp): upcasting a layer, a backend plugin as the target and its fp32
// leg, cancelling, every target recipe of the controls, fp8's routing near-ties.
#include "exec/shrunk_cache.h"
#include "history/recording.h"
#include "precision_panel_fixture.h"
#include "ui_test_support.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>

using namespace day0;
using namespace day0::ui;

namespace {

class PrecisionPanelRunTest : public test::PrecisionPanelFixture { };

} // namespace

TEST_F(PrecisionPanelRunTest, UpcastingALayerAndRerunningLowersItsOwnError)
{
    PrecisionPanel panel(m_session, m_jobs);
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    panel.resize(1400, 860);
    panel.show();
    PrecisionRunRequest request;
    request.modelSource = s_checkpoint;
    request.prompt = "5, 17, 300, 42, 7";
    request.tokens = 3;
    panel.run(request);
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    const auto before = panel.current();
    const auto* own = find(before->comparison, "model.layers.2");
    ASSERT_TRUE(own && own->own);
    ASSERT_GT(own->own->relL2, 1e-4) << "bf16 has an own error";

    panel.upcastLayer(2);
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), before) << panel.errorText().toStdString();
    const auto after = panel.current();
    EXPECT_EQ(after->request->target.perLayer.at(2), exec::PrecisionMode::F32);
    const auto* upcast = find(after->comparison, "model.layers.2");
    ASSERT_TRUE(upcast && upcast->own);
    EXPECT_LT(upcast->own->relL2, 0.1 * own->own->relL2);
    // Its neighbours still run in bf16.
    EXPECT_GT(find(after->comparison, "model.layers.1")->own->relL2, 1e-4);
    // Both runs overlaid on the depth chart.
    EXPECT_EQ(panel.overlay(), before);
    EXPECT_GE(panel.depthPlot()->lineSeriesCount(), 3);
    EXPECT_EQ(recorded.count(), 2);
}

#ifdef DAY0_HOSTSIM_PLUGIN_DIR
TEST_F(PrecisionPanelRunTest, TheTargetRunsOnABackendPluginAgainstTheFp64Reference)
{
    // The host-simulated test backend (tests/plugins/hostsim_plugin.cpp) stands in for a GPU.
    qputenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR);
    PrecisionPanel panel(m_session, m_jobs);
    qunsetenv("DAY0_PLUGIN_PATH");
    auto* backends = panel.findChild<QComboBox*>(QStringLiteral("targetBackend"));
    ASSERT_NE(backends, nullptr);
    EXPECT_EQ(backends->itemData(0).toString(), QStringLiteral("cpu"));
    const int hostsim = backends->findData(QStringLiteral("hostsim"));
    ASSERT_GE(hostsim, 0);
    EXPECT_TRUE(backends->itemData(hostsim, Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("Native: embedding, rms_norm")));
    QSignalSpy recorded(&m_session, &Session::runRecorded);
    panel.resize(1400, 860);
    panel.show();
    PrecisionRunRequest request;
    request.modelSource = s_checkpoint;
    request.prompt = "5, 17, 300, 42, 7";
    request.tokens = 3;
    request.target.base = exec::PrecisionMode::F32;
    request.reference = exec::PrecisionMode::F64;
    request.backend = "hostsim";
    panel.run(request);
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    const auto run = panel.current();
    EXPECT_EQ(run->label, "fp32 on hostsim vs fp64");
    EXPECT_EQ(run->target->info.backend, "hostsim");
    EXPECT_EQ(run->reference->info.backend, "day0-cpu");
    EXPECT_EQ(run->comparison.failCount, 0);
    EXPECT_GT(run->dispatch.nativeCalls(), 0);
    EXPECT_GT(run->dispatch.fallbackCalls(), 0)
        << "Kimi-K2's MLA, rope and router are not in the test backend";
    bool shown = false;
    for (auto* label : panel.findChildren<QLabel*>()) {
        if (label->text().contains(QStringLiteral("Target on <b>hostsim</b>"))) {
            shown = true;
            EXPECT_TRUE(label->toolTip().contains(QStringLiteral("not implemented by hostsim")))
                << label->toolTip().toStdString();
        }
    }
    EXPECT_TRUE(shown);
    EXPECT_EQ(recorded.count(), 1);
}

TEST_F(PrecisionPanelRunTest, TheFp32LegRunsTheBackendInFp32AndTheSummarySaysHowItWent)
{
    // The box is offered for a backend only (on the CPU the target's fp32 is the reference);
    // checked, the backend also runs in fp32 and the summary gives that leg's verdict.
    qputenv("DAY0_PLUGIN_PATH", DAY0_HOSTSIM_PLUGIN_DIR);
    test::openModel(m_session, s_checkpoint);
    PrecisionPanel panel(m_session, m_jobs);
    qunsetenv("DAY0_PLUGIN_PATH");
    panel.resize(1400, 860);
    panel.show();
    auto* backends = panel.findChild<QComboBox*>(QStringLiteral("targetBackend"));
    auto* leg = panel.findChild<QCheckBox*>(QStringLiteral("fp32Leg"));
    auto* tokens = panel.findChild<QSpinBox*>(QStringLiteral("tokens"));
    auto* runButton = panel.findChild<QPushButton*>(QStringLiteral("runButton"));
    ASSERT_TRUE(backends && leg && tokens && runButton);
    EXPECT_FALSE(leg->isEnabled()) << "the CPU target";
    backends->setCurrentIndex(backends->findData(QStringLiteral("hostsim")));
    ASSERT_TRUE(leg->isEnabled());
    leg->setChecked(true);
    tokens->setValue(1);
    QTest::mouseClick(runButton, Qt::LeftButton);
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    ASSERT_TRUE(panel.current()->fp32Leg.has_value());
    EXPECT_EQ(panel.current()->fp32Leg->failCount, 0);
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("precisionSummary"));
    ASSERT_NE(summary, nullptr);
    EXPECT_TRUE(summary->text().contains(QStringLiteral("fp32 leg")))
        << summary->text().toStdString();
    backends->setCurrentIndex(0);
    EXPECT_FALSE(leg->isChecked());
}

TEST_F(PrecisionPanelRunTest, AMissingBackendShowsWhyAndRunsNothing)
{
    PrecisionPanel panel(m_session, m_jobs);
    panel.show();
    PrecisionRunRequest request;
    request.modelSource = s_checkpoint;
    request.prompt = "5, 17";
    request.tokens = 1;
    request.backend = "no-such-backend";
    panel.run(request);
    test::settle(m_jobs);
    EXPECT_EQ(panel.current(), nullptr);
    EXPECT_TRUE(panel.errorText().contains(QStringLiteral("no-such-backend")))
        << panel.errorText().toStdString();
}
#endif

TEST_F(PrecisionPanelRunTest, ACancelledRunDeliversNothingAndFreesTheControls)
{
    PrecisionPanel panel(m_session, m_jobs);
    panel.show();
    PrecisionRunRequest request;
    request.modelSource = s_checkpoint;
    request.prompt = "5, 17, 300";
    request.tokens = 2;
    panel.run(request);
    auto* cancel = panel.findChild<QPushButton*>(QStringLiteral("cancelButton"));
    auto* runButton = panel.findChild<QPushButton*>(QStringLiteral("runButton"));
    ASSERT_TRUE(cancel && runButton);
    EXPECT_TRUE(cancel->isEnabled());
    EXPECT_FALSE(runButton->isEnabled());
    QTest::mouseClick(cancel, Qt::LeftButton);
    test::settle(m_jobs);
    EXPECT_EQ(panel.current(), nullptr);
    EXPECT_TRUE(panel.errorText().isEmpty()) << panel.errorText().toStdString();
    EXPECT_TRUE(runButton->isEnabled());
    EXPECT_FALSE(cancel->isEnabled());
}

TEST_F(PrecisionPanelRunTest, TheTargetComboRunsEachServingRecipe)
{
    // The fp8 scalings and the FP4 recipes are targets of their own; the run made from the
    // controls carries the chosen one and its dump says what it rounded where.
    test::openModel(m_session, s_checkpoint);
    PrecisionPanel panel(m_session, m_jobs);
    panel.show();
    auto* target = panel.findChild<QComboBox*>(QStringLiteral("targetPrecision"));
    auto* tokens = panel.findChild<QSpinBox*>(QStringLiteral("tokens"));
    auto* runButton = panel.findChild<QPushButton*>(QStringLiteral("runButton"));
    ASSERT_TRUE(target && tokens && runButton);
    tokens->setValue(1);
    const std::pair<const char*, const char*> recipes[] = {
        { "fp8-e4m3 per channel", "FP8_DYNAMIC" },
        { "fp8-e4m3 block", "DeepSeek-V3's recipe" },
        { "nvfp4", "E4M3 scale per 16" },
        { "mxfp4", "W4A16" },
    };
    for (const auto& [label, phrase] : recipes) {
        const int index = target->findText(QString::fromLatin1(label));
        ASSERT_GE(index, 0) << label;
        target->setCurrentIndex(index);
        QTest::mouseClick(runButton, Qt::LeftButton);
        test::settle(m_jobs);
        ASSERT_NE(panel.current(), nullptr) << label << ": " << panel.errorText().toStdString();
        const std::string recipe
            = panel.current()->target->info.extra.value("precision_recipe", "");
        EXPECT_NE(recipe.find(phrase), std::string::npos) << label << ": " << recipe;
    }
}

TEST_F(PrecisionPanelRunTest, Fp8RunFromThePanelWarnsAtRoutingNearTies)
{
    // On the demo's 8-layer checkpoint, fp8 flips expert choices where the router's scores are
    // closer than fp8 can tell apart: those MoE rows warn (judged on the other tokens), nothing
    // fails, and the hover says why.
    Progress progress;
    auto checkpoint
        = exec::cachedShrunkCheckpoint("kimi-k2", exec::demoShrinkOptions(), progress, {});
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message;
    PrecisionPanel panel(m_session, m_jobs);
    panel.resize(1400, 860);
    panel.show();
    PrecisionRunRequest request;
    request.modelSource = checkpoint->string();
    request.target.base = exec::PrecisionMode::F8E4M3;
    request.prompt = demoPrompt();
    panel.run(request);
    test::settle(m_jobs);
    ASSERT_NE(panel.current(), nullptr) << panel.errorText().toStdString();
    const auto& c = panel.current()->comparison;
    EXPECT_FALSE(c.firstDivergence.has_value());
    bool nearTie = false;
    for (const auto& row : c.rows) {
        EXPECT_NE(row.verdict.status, numerics::VerdictStatus::Fail) << row.name;
        nearTie = nearTie || row.verdict.reason.find("near-tie") != std::string::npos;
    }
    EXPECT_TRUE(nearTie) << "fp8 flips at least one expert choice on this prompt";
}

TEST_F(PrecisionPanelRunTest, StreamingTheWeightsGivesTheSameComparisonAndSaysSo)
{
    // "stream weights" runs the reference, the emulated target and its inject-mode run layer by
    // layer from the checkpoint: the comparison is the one of a normal run.
    test::openModel(m_session, s_checkpoint);
    PrecisionPanel panel(m_session, m_jobs);
    panel.resize(1400, 860);
    panel.show();
    auto* stream = panel.findChild<QCheckBox*>(QStringLiteral("streamWeights"));
    auto* tokens = panel.findChild<QSpinBox*>(QStringLiteral("tokens"));
    auto* runButton = panel.findChild<QPushButton*>(QStringLiteral("runButton"));
    ASSERT_TRUE(stream && tokens && runButton);
    tokens->setValue(2);
    QTest::mouseClick(runButton, Qt::LeftButton);
    test::settle(m_jobs);
    const auto normal = panel.current();
    ASSERT_NE(normal, nullptr) << panel.errorText().toStdString();
    EXPECT_FALSE(normal->stream.has_value());
    stream->setChecked(true);
    QTest::mouseClick(runButton, Qt::LeftButton);
    test::settle(m_jobs);
    const auto streamed = panel.current();
    ASSERT_NE(streamed, nullptr) << panel.errorText().toStdString();
    ASSERT_NE(streamed, normal);
    ASSERT_TRUE(streamed->stream.has_value());
    EXPECT_TRUE(streamed->referenceStreamed);
    EXPECT_TRUE(streamed->targetStreamed) << "an emulated target streams too";
    EXPECT_GT(streamed->stream->bytesRead, 0u);
    EXPECT_EQ(numerics::comparisonToJson(streamed->comparison),
        numerics::comparisonToJson(normal->comparison));
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("precisionSummary"));
    ASSERT_NE(summary, nullptr);
    EXPECT_TRUE(summary->text().contains(QStringLiteral("streamed layer by layer")))
        << summary->text().toStdString();
}
