#pragma once

#include <QColor>
#include <QFont>
#include <QPointF>
#include <QSize>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include <functional>
#include <memory>

namespace day0::ui {

/// How an axis prints its tick labels; the same formatting as the tables (core's formatBytes...).
enum class AxisFormat {
    Number,
    Bytes, ///< values are bytes: binary-unit ticks ("80.0 GiB")
    Duration, ///< values are seconds ("12.3 ms")
    Count, ///< large counts ("1.2M")
    Percent, ///< values are fractions in [0, 1] ("35 %")
};

/// A named series of points, drawn as a line or as markers.
struct PlotSeries {
    QString name;
    QColor color;
    QVector<double> x;
    QVector<double> y;
    bool dashed = false;
    bool markers = false; ///< line series: also mark every point
    double markerSize = 6.0;
    bool inLegend = true;
    QStringList pointLabels; ///< optional tooltip text per point
};

/// One layer of a stacked bar chart: one value per category.
struct BarLayer {
    QString name;
    QColor color;
    QVector<double> values;
};

/// A filled band between a lower and an upper curve over the same x (a tolerance band).
struct PlotBand {
    QString name;
    QColor color; ///< drawn translucent
    QVector<double> x;
    QVector<double> lower;
    QVector<double> upper;
};

/// A horizontal or vertical reference line with a label (device memory, a bound).
struct LimitLine {
    double value = 0.0;
    QString label;
    QColor color;
};

/// A matrix of values drawn as a colour map; row 0 is drawn at the top.
struct HeatmapData {
    int rows = 0;
    int columns = 0;
    QVector<double> values; ///< rows × columns, row-major
    QStringList rowLabels;
    QStringList columnLabels;
    /// Optional hover text of a cell (row, column), asked for on hover only, so big maps need
    /// no text per cell up front; replaces the default "row · column value".
    std::function<QString(int row, int column)> cellText;
    AxisFormat valueFormat = AxisFormat::Number;
    QString valueLabel;
    bool logScale = false;
    bool diverging = false; ///< a change: colour scale centred on 0, blue below, red above
};

/// An axis' tick labels as laid out at the last replot: where each sits along the axis and what
/// it says, so that a check can size them with QFontMetrics and look for overlaps.
struct TickLabels {
    QVector<double> positions; ///< pixel of each tick along the axis, in widget coordinates
    QStringList labels; ///< the text of each tick (may hold line breaks)
    QFont font;
    double rotation = 0.0; ///< degrees the labels are turned by
    Qt::Orientation orientation = Qt::Horizontal; ///< of the axis: X is horizontal
};

/// The workbench's one wrapper around QCustomPlot (the only file that includes qcustomplot.h):
/// domain-level calls, ticks formatted like the tables, themed from the palette, hover tooltips,
/// export to PNG, PDF and SVG. GUI-thread object.
class PlotWidget : public QWidget {
    Q_OBJECT
public:
    enum class Axis { X, Y };

    explicit PlotWidget(QWidget* parent = nullptr);
    ~PlotWidget() override;

    /// Removes every series, line and label and resets the axes to plain numbers.
    void clear();
    void setTitle(const QString& title);
    void setAxisLabel(Axis axis, const QString& label);
    void setAxisFormat(Axis axis, AxisFormat format);
    void setByteAxis(Axis axis) { setAxisFormat(axis, AxisFormat::Bytes); }
    void setDurationAxis(Axis axis) { setAxisFormat(axis, AxisFormat::Duration); }
    void setLogScale(Axis axis, bool log);
    void setLegendVisible(bool visible);

    /// Bars stacked per category. Vertical: categories along X, values on Y. Horizontal:
    /// categories down the Y axis (first on top), values on X.
    void setStackedBars(const QStringList& categories, const QVector<BarLayer>& layers,
        Qt::Orientation orientation = Qt::Vertical);
    /// Adds line series (replacing previous lines, keeping bars and scatters).
    void setLineSeries(const QVector<PlotSeries>& series);
    /// Adds marker-only series (replacing previous scatters); pointClicked reports clicks.
    void setScatter(const QVector<PlotSeries>& series);
    /// Adds filled bands (replacing previous bands), drawn below the lines.
    void setBands(const QVector<PlotBand>& bands);
    /// Marks one point of a scatter series with a ring (index -1 clears the mark).
    void setHighlightedPoint(int series, int index);
    /// A matrix as a colour map with a colour scale.
    void setHeatmap(const HeatmapData& data);
    /// Frames one heatmap cell (row 0 at the top) as selected; (-1, -1) clears the frame.
    void setHeatmapSelection(int row, int column);
    /// The framed cell as (row, column); (-1, -1) when none.
    [[nodiscard]] QPoint heatmapSelection() const;
    void addHorizontalLine(const LimitLine& line);
    void addVerticalLine(const LimitLine& line);
    /// A note drawn in the middle of the plot area (e.g. "nothing fits"). Without data it is the
    /// empty state: the axes are hidden and the note says what will appear and how to start it.
    void setNote(const QString& text);

    /// Fits the axes to the data and the limit lines, then repaints.
    void rescaleAndReplot();

    /// Writes the plot to `path`; the suffix picks PNG, PDF or SVG. Empty string on success,
    /// else a message naming the file.
    QString exportTo(const QString& path, QSize size = QSize());
    /// Renders to an image at the widget's size (or `size`), for tests and screenshots.
    [[nodiscard]] QImage toImage(QSize size = QSize());

    /// True while the plot has no data: no axes are drawn, only the note (tests).
    [[nodiscard]] bool showsEmptyState() const;
    /// The note shown, or the generic empty-state text when the plot has no data and no note.
    [[nodiscard]] QString noteText() const;
    /// The title as drawn: wrapped to the plot's width, never cut (tests).
    [[nodiscard]] QStringList titleLines() const;
    /// The axis title as drawn: wrapped to the axis' length, never cut (lays the plot out first;
    /// tests), and that length in pixels.
    [[nodiscard]] QStringList axisLabelLines(Axis axis);
    [[nodiscard]] int axisLength(Axis axis);
    /// The tick labels of `axis` as laid out now (lays the plot out first; tests).
    [[nodiscard]] TickLabels tickLabels(Axis axis);

    /// Number of series of each kind (tests).
    [[nodiscard]] int barLayerCount() const;
    [[nodiscard]] int lineSeriesCount() const;
    [[nodiscard]] int scatterSeriesCount() const;
    [[nodiscard]] int bandCount() const;
    /// Value of bar layer `layer` in category `category` (tests); NaN when absent.
    [[nodiscard]] double barValue(int layer, int category) const;
    /// The points of line series `series` as drawn, in x order (tests); empty when absent.
    [[nodiscard]] QVector<QPointF> linePoints(int series) const;
    /// Heatmap size as columns × rows, empty without a heatmap (tests).
    [[nodiscard]] QSize heatmapSize() const;
    /// The value drawn in a heatmap cell (row 0 at the top); NaN when absent.
    [[nodiscard]] double heatmapCell(int row, int column) const;
    /// The hover text of a heatmap cell (row 0 at the top); empty when absent.
    [[nodiscard]] QString heatmapCellText(int row, int column) const;
    /// Where a heatmap cell's centre is drawn, in this widget's coordinates (lays the plot out
    /// first); (-1, -1) when absent. For tests that click cells.
    [[nodiscard]] QPoint heatmapCellPosition(int row, int column);

signals:
    /// A scatter point was clicked.
    void pointClicked(int series, int index);
    /// A bar category was clicked.
    void categoryClicked(int category);
    /// A heatmap cell was clicked with the left button (row 0 at the top).
    void cellClicked(int row, int column);
    /// A heatmap cell was clicked with the right button, at `globalPos` on the screen.
    void cellContextMenuRequested(int row, int column, const QPoint& globalPos);

protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace day0::ui
