#pragma once
// PlotWidget's state, shared by its source files (plot_widget.cpp: axes, series, tooltips,
// export; plot_widget_heatmap.cpp: the heatmap and its colour scale). Not part of the UI API.

#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

// QCustomPlot's header uses `foreach`; keep it available for that header alone.
#undef QT_NO_FOREACH
#include <qcustomplot.h>

#include <cmath>
#include <optional>

namespace day0::ui {

/// A value as the axes, tooltips and heatmap hover texts show it.
QString formatValue(AxisFormat format, double value);

// Linear ticks labelled like the tables. Byte axes step in binary units and label every tick in
// the same unit (the largest the axis reaches), so "750 GiB" is not followed by "1.22 TiB".
class FormatTicker : public QCPAxisTicker {
public:
    explicit FormatTicker(AxisFormat format)
        : m_format(format)
    {
    }

protected:
    double getTickStep(const QCPRange& range) override
    {
        if (m_format != AxisFormat::Bytes || range.size() <= 0) {
            return QCPAxisTicker::getTickStep(range);
        }
        const double reach = std::max(std::abs(range.lower), std::abs(range.upper));
        m_unit = 0;
        while (m_unit < 5 && std::pow(1024.0, m_unit + 1) <= reach) {
            ++m_unit;
        }
        const double unit = std::pow(1024.0, m_unit);
        return cleanMantissa(range.size() / unit / (tickCount() + 1e-10)) * unit;
    }
    QString getTickLabel(
        double tick, const QLocale& locale, QChar formatChar, int precision) override
    {
        if (m_format == AxisFormat::Number) {
            return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
        }
        if (m_format == AxisFormat::Bytes) {
            static const char* const kUnits[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
            if (tick == 0) {
                return QStringLiteral("0");
            }
            return QString::number(tick / std::pow(1024.0, m_unit), 'g', 4) + QLatin1Char(' ')
                + QString::fromLatin1(kUnits[m_unit]);
        }
        return formatValue(m_format, tick);
    }

private:
    AxisFormat m_format;
    int m_unit = 0;
};

class FormatLogTicker : public QCPAxisTickerLog {
public:
    explicit FormatLogTicker(AxisFormat format)
        : m_format(format)
    {
        setLogBase(m_format == AxisFormat::Bytes ? 1024.0 : 10.0);
    }

protected:
    QString getTickLabel(
        double tick, const QLocale& locale, QChar formatChar, int precision) override
    {
        if (m_format == AxisFormat::Number) {
            return QCPAxisTickerLog::getTickLabel(tick, locale, formatChar, precision);
        }
        return formatValue(m_format, tick);
    }

private:
    AxisFormat m_format;
};

/// Category or heatmap labels of one axis: all of them, and how many are shown (every n-th).
struct TextTicks {
    QVector<double> keys;
    QStringList labels;
    int baseEvery = 1; ///< the densest spacing allowed (a cap on the number of labels)
    int every = 1; ///< the spacing in use, widened by fitTicks when labels collide
    double baseRotation = 0.0; ///< degrees; X axis only
};

struct PlotWidget::Private {
    QCustomPlot* plot = nullptr;
    QCPTextElement* title = nullptr;
    QCPLayoutGrid* center = nullptr;
    QCPColorScale* colorScale = nullptr;
    QCPColorMap* colorMap = nullptr;
    QCPItemText* note = nullptr;
    QCPItemRect* cellMark = nullptr; ///< frame around the selected heatmap cell
    QVector<QCPBars*> bars;
    QVector<QCPGraph*> lines;
    QVector<QCPCurve*> scatters;
    QVector<QCPGraph*> bands; ///< lower and upper graph of every band
    QVector<QStringList> scatterLabels;
    QVector<QStringList> lineLabels;
    QCPCurve* highlight = nullptr;
    QVector<QCPAbstractItem*> limitItems;
    QVector<double> hLimits;
    QVector<double> vLimits;
    QVector<QCPItemText*> vLabels; ///< labels of vertical lines, placed by rescaleAndReplot
    QStringList categories;
    bool horizontalBars = false;
    AxisFormat xFormat = AxisFormat::Number;
    AxisFormat yFormat = AxisFormat::Number;
    bool xLog = false;
    bool yLog = false;
    HeatmapData heatmap;
    std::optional<TextTicks> text[2]; ///< text labels of the X and Y axis, when they are text
    QString fullTitle; ///< the title as set; drawn wrapped to the plot's width
    QString fullLabel[2]; ///< the axis titles as set (X, Y); drawn wrapped to the axis' length
    QCPItemText* emptyNote = nullptr; ///< "nothing to show yet", when no data and no note
    bool legendWanted = true;

    [[nodiscard]] QCPAxis* axis(Axis a) const { return a == Axis::X ? plot->xAxis : plot->yAxis; }
    /// The axis bars are placed along, and the one their values grow on.
    [[nodiscard]] QCPAxis* keyAxis() const { return horizontalBars ? plot->yAxis : plot->xAxis; }
    [[nodiscard]] QCPAxis* valueAxis() const { return horizontalBars ? plot->xAxis : plot->yAxis; }
    [[nodiscard]] AxisFormat valueFormat() const { return horizontalBars ? xFormat : yFormat; }
    void applyTicker(Axis a);
    void applyTheme(const QPalette& palette);
    [[nodiscard]] QString tooltipAt(const QPointF& pos) const;
    /// The heatmap cell under a pixel as (row, column); (-1, -1) when none.
    [[nodiscard]] QPoint cellAt(const QPointF& pos) const;
    [[nodiscard]] QString cellText(int row, int column) const;
    void removeHeatmap();

    // plot_widget_ticks.cpp: tick labels that do not collide, the empty state, the title.
    /// Installs a text ticker for axis `a` from text[a] (every n-th label).
    void installText(Axis a);
    /// Back to the densest labels (after a resize or new data); fitTicks thins them again.
    void resetTicks();
    /// Thins (or slants) the labels of every axis whose labels collide, re-laying the plot out;
    /// run after each layout pass, before drawing.
    void fitTicks();
    /// Without data the axes, grid and legend are hidden and a note says what will appear.
    void updateEmptyState();
    [[nodiscard]] bool hasData() const;
    /// The title broken into lines no wider than `width` pixels.
    void wrapTitle(int width);
    /// The axis titles broken into lines no longer than their axes; true when one changed.
    bool wrapAxisLabels();
    [[nodiscard]] TickLabels labelsOf(QCPAxis* ax) const;
};

/// True when two neighbouring labels of `labels` come closer than `gap` pixels.
bool tickLabelsCollide(const TickLabels& labels, double gap);

} // namespace day0::ui
