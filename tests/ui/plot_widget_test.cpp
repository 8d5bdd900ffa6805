#include "widgets/plot_widget.h"

#include <QFile>
#include <QFontMetrics>
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

namespace {

// Neighbouring tick labels closer than their halves (horizontal axis, unrotated labels).
bool labelsCollide(const TickLabels& t)
{
    const QFontMetrics metrics(t.font);
    for (int i = 1; i < t.positions.size(); ++i) {
        const double need
            = (metrics.horizontalAdvance(t.labels[i - 1]) + metrics.horizontalAdvance(t.labels[i]))
            / 2.0;
        const double slant = std::sin(std::abs(t.rotation) * M_PI / 180.0);
        const double gap = std::abs(t.positions[i] - t.positions[i - 1]);
        if (t.rotation != 0.0 ? gap * slant < metrics.height() : gap < need) {
            return true;
        }
    }
    return false;
}

} // namespace

TEST(PlotWidget, ThinsCategoryTicksUntilTheyDoNotOverlap)
{
    PlotWidget plot;
    QStringList categories;
    QVector<double> values;
    for (int i = 0; i < 16; ++i) {
        categories << QStringLiteral("pipeline stage %1").arg(i);
        values << 1.0 + i;
    }
    plot.setStackedBars(categories, { { QStringLiteral("weights"), Qt::blue, values } });
    plot.resize(360, 260);
    plot.show();
    plot.rescaleAndReplot();
    const TickLabels t = plot.tickLabels(PlotWidget::Axis::X);
    ASSERT_GE(t.positions.size(), 2);
    EXPECT_LT(t.positions.size(), 16) << "16 long names cannot all fit in 360 px";
    EXPECT_FALSE(labelsCollide(t));
    // Wide again: more of the names come back.
    plot.resize(2400, 260);
    plot.rescaleAndReplot();
    EXPECT_GT(plot.tickLabels(PlotWidget::Axis::X).positions.size(), t.positions.size());
}

TEST(PlotWidget, NumberTicksOfANarrowPlotDoNotOverlap)
{
    PlotWidget plot;
    PlotSeries s;
    s.name = QStringLiteral("memory");
    s.color = Qt::darkBlue;
    s.x = { 80e9, 140e9 };
    s.y = { 1e5, 3e5 };
    plot.setScatter({ s });
    plot.setByteAxis(PlotWidget::Axis::X);
    plot.resize(200, 200);
    plot.show();
    plot.rescaleAndReplot();
    const TickLabels t = plot.tickLabels(PlotWidget::Axis::X);
    ASSERT_GE(t.positions.size(), 1);
    EXPECT_FALSE(labelsCollide(t));
}

TEST(PlotWidget, SparseDecadeLabelsOfALogHistogramDoNotOverlap)
{
    // The precision panel's error histogram: 48 log-spaced bins, only decades labelled.
    PlotWidget plot;
    QStringList categories;
    QVector<double> counts;
    for (int b = 0; b < 48; ++b) {
        categories << (b % 6 == 0 ? QStringLiteral("1e%1").arg(b / 6 - 8) : QString());
        counts << 1.0 + b % 5;
    }
    plot.setStackedBars(categories, { { QStringLiteral("elements"), Qt::blue, counts } });
    plot.resize(220, 200);
    plot.show();
    plot.rescaleAndReplot();
    TickLabels t = plot.tickLabels(PlotWidget::Axis::X);
    QStringList shown;
    for (const auto& label : t.labels) {
        if (!label.isEmpty()) {
            shown << label;
        }
    }
    EXPECT_GE(shown.size(), 1);
    EXPECT_LT(shown.size(), 8) << shown.join(QLatin1Char(' ')).toStdString();
}

TEST(PlotWidget, EmptyPlotShowsANoteInsteadOfAxesAndTitlesWrap)
{
    PlotWidget plot;
    plot.resize(300, 200);
    plot.show();
    plot.rescaleAndReplot();
    EXPECT_TRUE(plot.showsEmptyState());
    EXPECT_TRUE(plot.tickLabels(PlotWidget::Axis::X).positions.isEmpty()) << "no 0–5 axis";
    EXPECT_FALSE(plot.noteText().isEmpty());
    plot.setNote(QStringLiteral("Run the model to see its error by layer."));
    EXPECT_EQ(plot.noteText(), QStringLiteral("Run the model to see its error by layer."));
    plot.setLineSeries({ PlotSeries { QStringLiteral("a"), Qt::red, { 0, 1 }, { 0, 1 } } });
    plot.rescaleAndReplot();
    EXPECT_FALSE(plot.showsEmptyState());
    EXPECT_FALSE(plot.tickLabels(PlotWidget::Axis::X).positions.isEmpty());
    // A title longer than the plot is wide is wrapped, not cut.
    const QString title = QStringLiteral(
        "Memory against throughput of the two hundred fastest layouts of the sweep");
    plot.setTitle(title);
    const QStringList lines = plot.titleLines();
    EXPECT_GT(lines.size(), 1);
    EXPECT_EQ(lines.join(QLatin1Char(' ')), title);
    QFont bold = plot.font();
    bold.setBold(true);
    for (const auto& line : lines) {
        EXPECT_LE(QFontMetrics(bold).horizontalAdvance(line), plot.width()) << line.toStdString();
    }
    EXPECT_LE(plot.minimumSizeHint().width(), 200) << "a plot never widens the window";
}
