#include "panels/timeline/timeline_sketch.h"

#include "panels/timeline/timeline_colors.h"

#include <QPainter>

namespace day0::ui {

TimelineSketch::TimelineSketch(QWidget* parent)
    : QWidget(parent)
{
    setFixedSize(460, 132);
}

void TimelineSketch::paintEvent(QPaintEvent*)
{
    using C = profile::Category;
    struct Bar {
        double x0;
        double x1;
        int row;
        C category;
    };
    static constexpr Bar kBars[] = {
        { 0.02, 0.46, 0, C::Annotation },
        { 0.50, 0.97, 0, C::Annotation },
        { 0.04, 0.20, 1, C::CpuOp },
        { 0.23, 0.44, 1, C::CpuOp },
        { 0.52, 0.70, 1, C::CpuOp },
        { 0.73, 0.95, 1, C::CpuOp },
        { 0.06, 0.09, 2, C::Runtime },
        { 0.25, 0.28, 2, C::Runtime },
        { 0.54, 0.57, 2, C::Runtime },
        { 0.75, 0.78, 2, C::Runtime },
        { 0.10, 0.31, 3, C::Kernel },
        { 0.33, 0.38, 3, C::Memcpy },
        { 0.40, 0.62, 3, C::Kernel },
        { 0.64, 0.69, 3, C::Memset },
        { 0.79, 0.93, 3, C::Kernel },
        { 0.30, 0.52, 4, C::Communication },
        { 0.70, 0.90, 4, C::Communication },
    };
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QColor base = palette().color(QPalette::Window);
    const double rowHeight = height() / 5.0;
    for (int r = 0; r < 5; ++r) {
        QColor lane = palette().color(QPalette::Text);
        lane.setAlpha(r % 2 == 0 ? 10 : 18);
        p.fillRect(QRectF(0, r * rowHeight, width(), rowHeight - 2), lane);
    }
    p.setPen(Qt::NoPen);
    for (const Bar& b : kBars) {
        QColor c = categoryColor(b.category);
        c = QColor::fromRgbF(float(c.redF() * 0.7 + base.redF() * 0.3),
            float(c.greenF() * 0.7 + base.greenF() * 0.3),
            float(c.blueF() * 0.7 + base.blueF() * 0.3));
        p.setBrush(c);
        p.drawRoundedRect(
            QRectF(b.x0 * width(), b.row * rowHeight + 3, (b.x1 - b.x0) * width(), rowHeight - 8),
            3, 3);
    }
}

} // namespace day0::ui
