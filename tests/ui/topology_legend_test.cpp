// The topology's legend says what the colours and the outline cover (a stage when colouring by
// stage, not a pipeline group), a key gives each colour, the colours are Okabe–Ito's and the
// labels read at 9 pt or more on screen at any zoom.
#include "panels/topology/topology_panel.h"
#include "panels/topology/topology_scene.h"
#include "ui_test_support.h"

#include <QComboBox>
#include <QImage>
#include <QPainter>

using namespace day0;
using namespace day0::ui;

TEST(TopologyLegend, DescribesWhatTheOutlineCoversAndKeysEveryColour)
{
    Session session;
    JobRunner jobs;
    test::openModel(session, "mixtral-8x7b");
    // tp=4, pp=2 on 2 × 8: each stage is 8 consecutive GPUs (one node); a pipeline group would
    // be 2 ranks 8 apart.
    test::configure(session, "h200:2x8", plan::Mode::Train, "tp=4,pp=2,ep=2");
    TopologyPanel panel(session, jobs);
    test::settle(jobs);
    auto* scene = panel.scene();
    ASSERT_EQ(scene->coloring(), TopologyColoring::PipelineStage);
    session.selectRank(9);
    int outlined = 0;
    for (int d = 0; d < 16; ++d) {
        outlined += scene->inSelectedGroup(d);
    }
    ASSERT_EQ(outlined, 8) << "clicking rank 9 outlines its stage";
    const QString legend = panel.legendText();
    EXPECT_TRUE(legend.contains(QStringLiteral("2 pipeline stages of 8 ranks")))
        << fromQString(legend);
    EXPECT_TRUE(legend.contains(QStringLiteral("each on 1 fast domain"))) << fromQString(legend);
    EXPECT_TRUE(legend.contains(QStringLiteral("outlined: the stage of rank 9")))
        << fromQString(legend);
    const auto extent = scene->colorClassExtent(9);
    EXPECT_EQ(extent.ranks, outlined);
    EXPECT_EQ(extent.nodes, 1);

    // The key: one swatch per stage, in the cells' colours.
    ASSERT_EQ(panel.keyColors().size(), 2);
    EXPECT_EQ(panel.keyColors()[0], scene->deviceColor(0));
    EXPECT_EQ(panel.keyColors()[1], scene->deviceColor(8));
    EXPECT_TRUE(panel.keyText().contains(QStringLiteral("stage&nbsp;1")))
        << fromQString(panel.keyText());

    // Colour by TP group: 4 groups of 4 ranks.
    auto* coloring = panel.findChild<QComboBox*>(QStringLiteral("coloringCombo"));
    coloring->setCurrentIndex(coloring->findData(int(TopologyColoring::TensorGroup)));
    EXPECT_TRUE(panel.legendText().contains(QStringLiteral("4 TP groups of 4 ranks")))
        << fromQString(panel.legendText());
    EXPECT_EQ(panel.keyColors().size(), 4);
}

TEST(TopologyLegend, ColoursAreOkabeItoAndDistinct)
{
    EXPECT_EQ(groupColor(0), QColor(0xE6, 0x9F, 0x00));
    EXPECT_EQ(groupColor(2), QColor(0x00, 0x9E, 0x73));
    // The first eight differ clearly (no near-identical greens): every pair at least 60 apart in
    // RGB distance.
    for (int a = 0; a < 8; ++a) {
        for (int b = a + 1; b < 8; ++b) {
            const QColor x = groupColor(a);
            const QColor y = groupColor(b);
            const double d = std::hypot(
                x.red() - y.red(), std::hypot(x.green() - y.green(), x.blue() - y.blue()));
            EXPECT_GT(d, 60.0) << a << " and " << b;
        }
    }
    EXPECT_NE(groupColor(8), groupColor(0)) << "the second round is lighter";
}

TEST(TopologyLegend, LabelsReadAtNinePointsAtAnyZoom)
{
    QImage image(100, 100, QImage::Format_ARGB32);
    QPainter painter(&image);
    for (const double zoom : { 0.25, 0.5, 1.0, 2.0 }) {
        painter.resetTransform();
        painter.scale(zoom, zoom);
        const QFont f = readableFont(painter, QFont());
        EXPECT_GE(f.pointSizeF() * zoom, kLabelPoints - 1e-9) << "zoom " << zoom;
    }
    EXPECT_GE(kLabelPoints, 9.0);
}
