#pragma once
// PlotWidget's state, shared by its source files (plot_widget.cpp: axes, series, tooltips,
// export; plot_widget_heatmap.cpp: the heatmap and its colour scale). Not part of the UI API.

#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

// QCustomPlot's header uses `foreach`; keep it available for that header alone.
#undef QT_NO_FOREACH
#include <qcustomplot.h>

#include <cmath>

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
};

} // namespace day0::ui
