// Every text the topology draws reads at 9 pt or more on screen, fitted to the window at
// 1280×720 and 1920×1080 and at any zoom, for the demo's cluster and for a 256-rank plan on a
// cluster four times larger: what is painted is recorded by a paint engine that keeps each
// text item with its font and the transform it is drawn under, so the size measured is the
// size on screen, whichever way the scene chose it.
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "ui_test_support.h"

#include <QGraphicsItem>
#include <QPaintDevice>
#include <QPaintEngine>
#include <QPainter>
#include <QTextItem>

#include <cmath>
#include <vector>

using namespace day0;
using namespace day0::ui;

namespace {

struct DrawnText {
    QString text;
    double points = 0; ///< on screen
};

// Records the text items painted on it; draws nothing.
class TextRecorder : public QPaintEngine {
public:
    explicit TextRecorder(double dpi)
        : QPaintEngine(QPaintEngine::AllFeatures)
        , m_dpi(dpi)
    {
    }
    bool begin(QPaintDevice*) override { return true; }
    bool end() override { return true; }
    void updateState(const QPaintEngineState& state) override
    {
        if (state.state() & QPaintEngine::DirtyTransform) {
            m_transform = state.transform();
        }
    }
    void drawPixmap(const QRectF&, const QPixmap&, const QRectF&) override { }
    void drawPath(const QPainterPath&) override { }
    void drawPolygon(const QPointF*, int, PolygonDrawMode) override { }
    void drawTextItem(const QPointF&, const QTextItem& item) override
    {
        const QFont f = item.font();
        const double pixels = f.pixelSize() > 0 ? f.pixelSize() : f.pointSizeF() * m_dpi / 72.0;
        const double scale = std::sqrt(std::abs(m_transform.determinant()));
        texts.push_back({ item.text(), pixels * scale * 72.0 / m_dpi });
    }
    [[nodiscard]] Type type() const override { return QPaintEngine::User; }

    std::vector<DrawnText> texts;

private:
    double m_dpi;
    QTransform m_transform;
};

class RecordingDevice : public QPaintDevice {
public:
    RecordingDevice(QSize size, int dpi)
        : m_size(size)
        , m_dpi(dpi)
        , m_engine(dpi)
    {
    }
    [[nodiscard]] QPaintEngine* paintEngine() const override { return &m_engine; }
    [[nodiscard]] const std::vector<DrawnText>& texts() const { return m_engine.texts; }

protected:
    [[nodiscard]] int metric(PaintDeviceMetric m) const override
    {
        switch (m) {
        case PdmWidth:
            return m_size.width();
        case PdmHeight:
            return m_size.height();
        case PdmWidthMM:
            return int(m_size.width() * 25.4 / m_dpi);
        case PdmHeightMM:
            return int(m_size.height() * 25.4 / m_dpi);
        case PdmDpiX:
        case PdmDpiY:
        case PdmPhysicalDpiX:
        case PdmPhysicalDpiY:
            return m_dpi;
        case PdmDepth:
            return 32;
        case PdmNumColors:
            return INT_MAX;
        case PdmDevicePixelRatio:
            return 1;
        case PdmDevicePixelRatioScaled:
            return int(devicePixelRatioFScale());
        }
        return 0;
    }

private:
    QSize m_size;
    int m_dpi;
    mutable TextRecorder m_engine;
};

// What the view shows now, as the texts it paints.
std::vector<DrawnText> drawnTexts(TopologyView& view)
{
    RecordingDevice device(view.viewport()->size(), view.logicalDpiY());
    QPainter painter(&device);
    view.render(
        &painter, QRectF(QPointF(0, 0), QSizeF(view.viewport()->size())), view.viewport()->rect());
    painter.end();
    return device.texts();
}

QString tooSmall(const std::vector<DrawnText>& texts)
{
    QStringList small;
    for (const auto& t : texts) {
        if (t.points < kLabelPoints - 0.05) {
            small << QStringLiteral("'%1' at %2 pt").arg(t.text).arg(t.points, 0, 'f', 1);
        }
    }
    return small.join(QStringLiteral(", "));
}

struct ReadableCase {
    const char* cluster;
    int world; ///< ranks the plan uses
    int nodes;
};

class TopologyReadable : public ::testing::TestWithParam<ReadableCase> { };

} // namespace

TEST_P(TopologyReadable, EveryLabelReadsAtNinePointsFittedAndAtAnyZoom)
{
    const ReadableCase c = GetParam();
    Session session;
    JobRunner jobs;
    test::openModel(session, "kimi-k2");
    // The demo's plan: 256 ranks (tp 8 × pp 8 × dp 4).
    test::configure(session, c.cluster, plan::Mode::Train, "tp=8,pp=8,dp=4,ep=32,etp=1,zero=1");
    // The panel filling each screen, and docked beside others (half of it each way).
    for (const QSize screen :
        { QSize(1280, 720), QSize(1920, 1080), QSize(640, 360), QSize(960, 540) }) {
        TopologyPanel panel(session, jobs);
        panel.resize(screen);
        panel.show();
        test::settle(jobs);
        ASSERT_EQ(panel.scene()->topology().world, c.world);
        ASSERT_EQ(panel.scene()->nodeItemCount(), c.nodes);
        // Traffic figures under and beside every node, as after "Run with this plan".
        panel.scene()->setLinkTraffic(std::vector<parallel::NodeTraffic>(
            std::size_t(c.nodes), parallel::NodeTraffic { 3'000'000'000, 1'200'000'000 }));
        auto& view = *panel.view();
        view.fitAll();
        const double fitted = view.transform().m11();
        for (const double zoom : { fitted, 0.05, 0.15, 0.3, 0.5, 0.8, 1.0, 2.0 }) {
            view.setTransform(QTransform::fromScale(zoom, zoom));
            const auto texts = drawnTexts(view);
            EXPECT_EQ(tooSmall(texts), QString())
                << screen.width() << "x" << screen.height() << " " << c.cluster << " zoom " << zoom;
            if (zoom == fitted && fitted >= 0.35) {
                // Fitted with nodes at least 23 px high, every node is still named on screen
                // (its title or its badge).
                int named = 0;
                for (const auto& t : texts) {
                    bool number = false;
                    t.text.toInt(&number);
                    named += number || t.text.startsWith(QStringLiteral("node "));
                }
                EXPECT_GE(named, c.nodes) << screen.width() << "x" << screen.height();
            }
            if (zoom == 1.0) {
                // At full size the titles, rank numbers and traffic figures are all drawn.
                bool title = false;
                bool traffic = false;
                for (const auto& t : texts) {
                    title = title || t.text.startsWith(QStringLiteral("node "));
                    traffic = traffic || t.text.startsWith(QStringLiteral("intra-node"));
                }
                EXPECT_TRUE(title);
                EXPECT_TRUE(traffic);
            }
        }
        // The cluster's headline is a label of the panel's font above the drawing.
        EXPECT_TRUE(panel.clusterText().contains(QStringLiteral("nodes × 8")))
            << fromQString(panel.clusterText());
    }
}

INSTANTIATE_TEST_SUITE_P(Clusters, TopologyReadable,
    ::testing::Values(
        ReadableCase { "h200:32x8", 256, 32 }, ReadableCase { "h200:128x8", 256, 128 }),
    [](const ::testing::TestParamInfo<ReadableCase>& param) {
        return param.param.nodes == 32 ? std::string("Demo256Gpus")
                                       : std::string("Plan256RanksOn1024Gpus");
    });

TEST(TopologyReadable, ANodeTooSmallForItsTitleSaysItInItsTooltip)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "mixtral-8x7b");
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=4,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    const QString tip = panel.scene()->nodeTooltip(1);
    EXPECT_TRUE(tip.contains(QStringLiteral("node 1"))) << fromQString(tip);
    EXPECT_TRUE(tip.contains(QStringLiteral("intra-node"))) << fromQString(tip);
}
