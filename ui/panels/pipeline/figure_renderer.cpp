#include "panels/pipeline/figure_renderer.h"

#include "widgets/colors.h"
#include "widgets/plot_widget.h"

#include <QApplication>
#include <QBuffer>
#include <QImage>
#include <QThread>
#include <fmt/format.h>

#include <chrono>
#include <future>

namespace day0::ui {

namespace {

AxisFormat axisFormat(pipeline::FigureAxis format)
{
    switch (format) {
    case pipeline::FigureAxis::Bytes:
        return AxisFormat::Bytes;
    case pipeline::FigureAxis::Duration:
        return AxisFormat::Duration;
    case pipeline::FigureAxis::Number:
        break;
    }
    return AxisFormat::Number;
}

QVector<double> toVector(const std::vector<double>& values)
{
    return QVector<double>(values.begin(), values.end());
}

} // namespace

Result<pipeline::ReportFigure> renderFigure(const pipeline::FigureSpec& spec, QSize size)
{
    if (!QApplication::instance()) {
        return Error::internal("rendering a figure needs a QApplication");
    }
    PlotWidget plot;
    plot.resize(size);
    plot.setTitle(QString::fromStdString(spec.title));
    plot.setAxisLabel(PlotWidget::Axis::X, QString::fromStdString(spec.xLabel));
    plot.setAxisLabel(PlotWidget::Axis::Y, QString::fromStdString(spec.yLabel));
    plot.setAxisFormat(PlotWidget::Axis::Y, axisFormat(spec.yFormat));
    plot.setLogScale(PlotWidget::Axis::Y, spec.logY);
    plot.setLegendVisible(spec.series.size() > 1);
    if (spec.kind == pipeline::FigureSpec::Kind::Bars) {
        QStringList categories;
        for (const auto& c : spec.categories) {
            categories << QString::fromStdString(c);
        }
        QVector<BarLayer> layers;
        int i = 0;
        for (const auto& s : spec.series) {
            layers.push_back(
                { QString::fromStdString(s.name), categoricalColor(i++), toVector(s.y) });
        }
        plot.setStackedBars(categories, layers);
    } else {
        QVector<PlotSeries> lines;
        int i = 0;
        for (const auto& s : spec.series) {
            PlotSeries line;
            line.name = QString::fromStdString(s.name);
            line.color = categoricalColor(i++);
            line.x = toVector(s.x);
            line.y = toVector(s.y);
            line.dashed = s.dashed;
            line.markers = !s.dashed;
            lines.push_back(std::move(line));
        }
        plot.setLineSeries(lines);
    }
    plot.rescaleAndReplot();
    const QImage image = plot.toImage(size);
    if (image.isNull()) {
        return Error::internal(fmt::format("figure '{}': nothing was drawn", spec.title));
    }
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    if (!image.save(&buffer, "PNG")) {
        return Error::internal(fmt::format("figure '{}': PNG encoding failed", spec.title));
    }
    return pipeline::ReportFigure { spec.title, "image/png",
        std::string(bytes.constData(), std::size_t(bytes.size())) };
}

pipeline::FigureRenderer figureRenderer(std::stop_token stop)
{
    return [stop](const pipeline::FigureSpec& spec) -> Result<pipeline::ReportFigure> {
        auto* app = QApplication::instance();
        if (!app || QThread::currentThread() == app->thread()) {
            return renderFigure(spec);
        }
        using Outcome = Result<pipeline::ReportFigure>;
        auto promise = std::make_shared<std::promise<Outcome>>();
        auto future = promise->get_future();
        QMetaObject::invokeMethod(
            app, [promise, spec] { promise->set_value(renderFigure(spec)); }, Qt::QueuedConnection);
        while (future.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
            if (stop.stop_requested()) {
                return Error::cancelled();
            }
        }
        return future.get();
    };
}

} // namespace day0::ui
