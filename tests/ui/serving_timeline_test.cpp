// The serving panel's per-request timeline (one bar per request, TTFT and decode apart, failures
// marked, the selected level shown) and its standing local server (started, benched against,
// stopped).
#include "actions/staged_bench.h"
#include "panels/serving/bench_level_model.h"
#include "panels/serving/local_server_box.h"
#include "panels/serving/request_timeline.h"
#include "panels/serving/serving_panel.h"
#include "panels/serving/stage_table.h"
#include "serve/serve_bench.h"
#include "serving_test_support.h"
#include "ui_test_support.h"
#include "widgets/colors.h"

#include <QCheckBox>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>

using namespace day0;
using namespace day0::ui;

namespace {

serve::RequestRecord completed(int index, double sentAt)
{
    serve::RequestRecord r;
    r.index = index;
    r.ok = true;
    r.sentAt = sentAt;
    r.ttft = 0.4;
    r.itl = { 0.1, 0.1, 0.1 };
    r.e2el = 0.7;
    r.ended = 0.71;
    r.outputTokens = 4;
    return r;
}

int pixelsOf(const QImage& image, const QColor& colour)
{
    int n = 0;
    for (int y = 0; y < image.height(); ++y) {
        for (int x = 0; x < image.width(); ++x) {
            n += image.pixelColor(x, y).rgb() == colour.rgb() ? 1 : 0;
        }
    }
    return n;
}

bool reachable(const std::string& url)
{
    serve::BenchOptions o;
    o.url = url;
    o.timeoutSeconds = 5;
    return serve::discoverEndpoint(o).ok();
}

} // namespace

TEST(RequestTimeline, OneBarPerRequestWithTtftDecodeAndFailuresMarked)
{
    RequestTimeline timeline;
    EXPECT_TRUE(timeline.showsEmptyState());
    serve::BenchResult result;
    result.requests = { completed(0, 0.0), completed(1, 0.2), completed(2, 0.5) };
    auto& refused = result.requests[1];
    refused.ok = false;
    refused.errorKind = "http_429";
    refused.errorMessage = "the queue is full";
    refused.ttft = 0.0;
    refused.itl.clear();
    refused.e2el = 0.0;
    refused.ended = 0.05;
    timeline.setLevel(QStringLiteral("level 2"), result);

    ASSERT_FALSE(timeline.showsEmptyState());
    const auto& bars = timeline.bars();
    ASSERT_EQ(bars.size(), result.requests.size()) << "one bar per request";
    EXPECT_FALSE(bars[0].failed);
    EXPECT_DOUBLE_EQ(bars[0].sent, 0.0);
    EXPECT_DOUBLE_EQ(bars[0].firstToken, 0.4) << "TTFT splits the bar";
    EXPECT_DOUBLE_EQ(bars[0].end, 0.71);
    ASSERT_EQ(bars[0].tokens.size(), 4u) << "the first token and one per gap";
    EXPECT_NEAR(bars[0].tokens.back(), 0.7, 1e-12);
    EXPECT_DOUBLE_EQ(bars[2].firstToken, 0.9) << "from the level's start";
    EXPECT_TRUE(bars[1].failed);
    EXPECT_LT(bars[1].firstToken, 0.0) << "no token arrived";
    EXPECT_DOUBLE_EQ(bars[1].end, 0.25) << "ends when it failed";
    EXPECT_EQ(bars[1].error, QStringLiteral("http_429: the queue is full"));
    EXPECT_TRUE(timeline.title().contains(QStringLiteral("level 2")));

    // Drawn: the failed request in the error colour, and pointed at by its row.
    timeline.resize(600, 240);
    const QImage image = timeline.grab().toImage();
    EXPECT_GT(pixelsOf(image, categoricalColor(0)), 100) << "decode segments";
    EXPECT_GT(pixelsOf(image, categoricalColor(1)), 100) << "TTFT segments";
    result.requests[1] = completed(1, 0.2);
    timeline.setLevel(QStringLiteral("level 2"), result);
    const int legendOnly = pixelsOf(timeline.grab().toImage(), errorColor());
    EXPECT_GT(pixelsOf(image, errorColor()), legendOnly + 10) << "the failed request marked";

    timeline.setEmptyText(QStringLiteral("nothing yet"));
    EXPECT_TRUE(timeline.showsEmptyState());
    EXPECT_EQ(timeline.emptyText(), QStringLiteral("nothing yet"));
}

TEST(RequestTimeline, ARefusedConnectionEndsWhenItFailed)
{
    serve::BenchOptions o;
    o.url = "http://127.0.0.1:1";
    o.timeoutSeconds = 5;
    serve::RequestRecord r;
    r.prompt = { 1, 2, 3 };
    r.maxTokens = 2;
    serve::sendCompletion(o, r);
    EXPECT_FALSE(r.ok);
    EXPECT_GT(r.ended, 0.0) << "the end is stamped on failure too";
    EXPECT_LT(r.ended, 5.0);
}

TEST(ServingPanel, SelectingALevelShowsItsRequestsOnTheTimeline)
{
    test::ScopedCache cache;
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ServingPanel panel(session, jobs);
    auto* timeline = panel.requestTimeline();
    EXPECT_TRUE(timeline->showsEmptyState()) << "no run yet";
    EXPECT_TRUE(timeline->emptyText().contains(QStringLiteral("press Run")));

    panel.stageTable()->setStages({ test::stage(1, 3), test::stage(2, 5) });
    panel.checkBox()->setChecked(false);
    QSignalSpy finished(&panel, &ServingPanel::finished);
    panel.run();
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 120000)) << "bench did not end";
    ASSERT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());
    ASSERT_EQ(panel.resultModel()->rowCount(), 2);
    EXPECT_EQ(timeline->bars().size(), 5u) << "the newest level until one is selected";

    panel.resultView()->setCurrentIndex(panel.resultModel()->index(0, 0));
    ASSERT_EQ(timeline->bars().size(), 3u);
    EXPECT_TRUE(timeline->title().contains(QStringLiteral("level 1")))
        << fromQString(timeline->title());
    for (const auto& bar : timeline->bars()) {
        EXPECT_FALSE(bar.failed) << bar.index;
        EXPECT_GE(bar.firstToken, bar.sent) << bar.index;
        EXPECT_GE(bar.end, bar.tokens.back()) << bar.index;
        EXPECT_EQ(bar.tokens.size(), 4u) << "4 tokens, one chunk each: " << bar.index;
    }
    panel.resultView()->setCurrentIndex(panel.resultModel()->index(1, 3));
    EXPECT_EQ(timeline->bars().size(), 5u);
}

TEST(ServingPanel, AStandingLocalServerServesTheBenchUntilStopped)
{
    test::ScopedCache cache;
    test::ScratchStore store;
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    ServingPanel panel(session, jobs);
    auto* box = panel.serverBox();
    EXPECT_TRUE(box->urlField()->text().isEmpty());
    EXPECT_FALSE(box->stopButton()->isEnabled());
    ASSERT_TRUE(box->startButton()->isEnabled());

    box->startButton()->click();
    EXPECT_FALSE(box->startButton()->isEnabled()) << "starting";
    ASSERT_TRUE(test::waitFor([&] { return !box->busy(); }, 120000)) << "server did not start";
    const QString url = box->urlField()->text();
    ASSERT_TRUE(url.startsWith(QStringLiteral("http://127.0.0.1:")))
        << fromQString(url) << " / " << fromQString(box->statusLabel()->text());
    EXPECT_TRUE(reachable(fromQString(url)));
    EXPECT_TRUE(box->stopButton()->isEnabled());
    EXPECT_FALSE(box->startButton()->isEnabled());

    // The bench of the session checkpoint runs against it, and Stop waits for the bench.
    panel.stageTable()->setStages({ test::stage(2, 4) });
    panel.checkBox()->setChecked(true);
    QSignalSpy finished(&panel, &ServingPanel::finished);
    panel.run();
    EXPECT_FALSE(box->stopButton()->isEnabled()) << "a bench holds the server";
    ASSERT_TRUE(test::waitFor([&] { return finished.count() > 0; }, 120000)) << "bench did not end";
    ASSERT_EQ(finished.front().front().toInt(), 0) << fromQString(panel.summaryLabel()->text());
    EXPECT_TRUE(panel.summaryLabel()->text().contains(url))
        << fromQString(panel.summaryLabel()->text());
    EXPECT_EQ(panel.resultModel()->levels().front().result.completed, 4);
    auto runs = store.open();
    auto record = runs.load(RunId(panel.recordedRun()));
    ASSERT_TRUE(record.ok()) << record.error().message;
    ASSERT_NE(record->findProperty("served"), nullptr);
    EXPECT_EQ(record->findProperty("served")->value, "local server");
    EXPECT_TRUE(reachable(fromQString(url))) << "still serving after the bench";

    // Stop drains and stops it; the next bench serves a server of its own.
    ASSERT_TRUE(box->stopButton()->isEnabled());
    box->stopButton()->click();
    EXPECT_TRUE(box->urlField()->text().isEmpty());
    ASSERT_TRUE(test::waitFor([&] { return !box->busy(); }, 60000)) << "server did not stop";
    EXPECT_TRUE(box->statusLabel()->text().startsWith(QStringLiteral("Stopped")));
    EXPECT_EQ(box->server(), nullptr);
    EXPECT_FALSE(reachable(fromQString(url)));
    EXPECT_TRUE(box->startButton()->isEnabled());
}
