#include "widgets/plot_widget.h"

#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <gtest/gtest.h>

#include <cmath>

using namespace day0::ui;

namespace {

// Standard deviation of the grey level: 0 for a blank image.
double pixelSpread(const QImage& image)
{
    double sum = 0;
    double sum2 = 0;
    const int n = image.width() * image.height();
    for (int y = 0; y < image.height(); ++y) {
        for (int x = 0; x < image.width(); ++x) {
            const double g = qGray(image.pixel(x, y));
            sum += g;
            sum2 += g * g;
        }
    }
    const double mean = sum / n;
    return std::sqrt(std::max(0.0, sum2 / n - mean * mean));
}

} // namespace

TEST(PlotWidget, StackedBarsKeepValuesPerLayer)
{
    PlotWidget plot;
    plot.setStackedBars({ QStringLiteral("stage 0"), QStringLiteral("stage 1") },
        { { QStringLiteral("weights"), Qt::blue, { 10e9, 12e9 } },
            { QStringLiteral("activations"), Qt::red, { 3e9, 1e9 } } });
    plot.setByteAxis(PlotWidget::Axis::Y);
    plot.addHorizontalLine({ 141e9, QStringLiteral("device memory"), Qt::darkRed });
    plot.rescaleAndReplot();
    EXPECT_EQ(plot.barLayerCount(), 2);
    EXPECT_DOUBLE_EQ(plot.barValue(0, 1), 12e9);
    EXPECT_DOUBLE_EQ(plot.barValue(1, 0), 3e9);
    EXPECT_TRUE(std::isnan(plot.barValue(2, 0)));
    plot.clear();
    EXPECT_EQ(plot.barLayerCount(), 0);
}

TEST(PlotWidget, ExportsPngPdfAndSvg)
{
    QTemporaryDir dir;
    PlotWidget plot;
    plot.resize(640, 400);
    plot.setTitle(QStringLiteral("memory against context"));
    PlotSeries total;
    total.name = QStringLiteral("total");
    total.color = Qt::darkBlue;
    total.x = { 1024, 4096, 16384 };
    total.y = { 20e9, 40e9, 120e9 };
    plot.setLineSeries({ total });
    plot.setByteAxis(PlotWidget::Axis::Y);
    plot.rescaleAndReplot();
    for (const char* name : { "p.png", "p.pdf", "p.svg" }) {
        const QString path = dir.filePath(QString::fromLatin1(name));
        EXPECT_EQ(plot.exportTo(path, QSize(640, 400)), QString()) << name;
        EXPECT_GT(QFile(path).size(), 500) << name;
    }
    const QString bad = plot.exportTo(dir.filePath(QStringLiteral("p.bmpx")));
    EXPECT_TRUE(bad.contains(QStringLiteral("p.bmpx"))) << bad.toStdString();
    EXPECT_GT(pixelSpread(plot.toImage(QSize(640, 400))), 5.0);
}

TEST(PlotWidget, ScatterAndHeatmap)
{
    PlotWidget plot;
    plot.resize(500, 400);
    PlotSeries layouts;
    layouts.name = QStringLiteral("layouts");
    layouts.color = Qt::darkGreen;
    layouts.x = { 1, 2, 3 };
    layouts.y = { 3, 1, 2 };
    plot.setScatter({ layouts });
    EXPECT_EQ(plot.scatterSeriesCount(), 1);
    plot.setHighlightedPoint(0, 2);
    plot.clear();
    HeatmapData heat;
    heat.rows = 2;
    heat.columns = 3;
    heat.values = { 1, 2, 3, 4, 5, 6 };
    heat.rowLabels = { QStringLiteral("layer 0"), QStringLiteral("layer 1") };
    plot.setHeatmap(heat);
    plot.rescaleAndReplot();
    EXPECT_GT(pixelSpread(plot.toImage(QSize(500, 400))), 5.0);
}
