#include "widgets/elided_label.h"

#include <QFontMetrics>
#include <QResizeEvent>

#include <algorithm>

namespace day0::ui {

namespace {
constexpr int kMinimumWidth = 80; // pixels: room for "runs …/config.json"-like fragments
}

ElidedLabel::ElidedLabel(QWidget* parent, Qt::TextElideMode mode)
    : QLabel(parent)
    , m_mode(mode)
{
    setTextFormat(Qt::PlainText);
    setWordWrap(false);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

void ElidedLabel::setFullText(const QString& text)
{
    m_full = text;
    elide();
    updateGeometry();
}

QSize ElidedLabel::minimumSizeHint() const
{
    const QFontMetrics metrics(font());
    return { std::min(kMinimumWidth, metrics.horizontalAdvance(m_full)), metrics.height() };
}

QSize ElidedLabel::sizeHint() const
{
    const QFontMetrics metrics(font());
    return { metrics.horizontalAdvance(m_full) + 2, metrics.height() };
}

void ElidedLabel::resizeEvent(QResizeEvent* event)
{
    QLabel::resizeEvent(event);
    elide();
}

void ElidedLabel::elide()
{
    const QFontMetrics metrics(font());
    const int room = contentsRect().width();
    const QString shown = metrics.horizontalAdvance(m_full) <= room
        ? m_full
        : metrics.elidedText(m_full, m_mode, room);
    QLabel::setText(shown);
    setToolTip(shown == m_full ? QString() : m_full);
}

} // namespace day0::ui
