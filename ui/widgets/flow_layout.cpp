#include "widgets/flow_layout.h"

#include <QWidget>

#include <algorithm>

namespace day0::ui {

FlowLayout::FlowLayout(QWidget* parent, int spacing)
    : QLayout(parent)
{
    setSpacing(spacing);
    setContentsMargins(0, 0, 0, 0);
}

FlowLayout::~FlowLayout()
{
    while (QLayoutItem* item = takeAt(0)) {
        delete item;
    }
}

void FlowLayout::addWidget(QWidget* widget, bool stretch)
{
    addChildWidget(widget);
    m_items.append(new QWidgetItem(widget));
    m_stretch.append(stretch);
    invalidate();
}

void FlowLayout::addItem(QLayoutItem* item)
{
    m_items.append(item);
    m_stretch.append(false);
}

int FlowLayout::count() const { return int(m_items.size()); }

QLayoutItem* FlowLayout::itemAt(int index) const { return m_items.value(index); }

QLayoutItem* FlowLayout::takeAt(int index)
{
    if (index < 0 || index >= m_items.size()) {
        return nullptr;
    }
    m_stretch.removeAt(index);
    return m_items.takeAt(index);
}

Qt::Orientations FlowLayout::expandingDirections() const { return Qt::Horizontal; }

int FlowLayout::heightForWidth(int width) const { return arrange(QRect(0, 0, width, 0), false); }

void FlowLayout::setGeometry(const QRect& rect)
{
    QLayout::setGeometry(rect);
    arrange(rect, true);
}

QSize FlowLayout::sizeHint() const
{
    // One line when there is room for it.
    int width = 0;
    int height = 0;
    for (const auto* item : m_items) {
        if (item->isEmpty()) {
            continue;
        }
        width += item->sizeHint().width() + (width > 0 ? spacing() : 0);
        height = std::max(height, item->sizeHint().height());
    }
    const QMargins m = contentsMargins();
    return { width + m.left() + m.right(), height + m.top() + m.bottom() };
}

QSize FlowLayout::minimumSize() const
{
    // The widest control, one per line.
    QSize size;
    for (const auto* item : m_items) {
        if (!item->isEmpty()) {
            size = size.expandedTo(item->minimumSize());
        }
    }
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

int FlowLayout::arrange(const QRect& rect, bool apply) const
{
    const QMargins m = contentsMargins();
    const QRect area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom());
    // Break the items into lines first, so that a stretching item can take its line's rest.
    struct Line {
        int first = 0;
        int last = 0; ///< one past
        int width = 0;
        int height = 0;
    };
    QList<Line> lines;
    Line line;
    for (int i = 0; i < m_items.size(); ++i) {
        const QLayoutItem* item = m_items[i];
        if (item->isEmpty()) {
            continue;
        }
        const QSize hint = item->sizeHint();
        const int add = hint.width() + (line.width > 0 ? spacing() : 0);
        if (line.width > 0 && line.width + add > area.width()) {
            line.last = i;
            lines.append(line);
            line = Line { i, i, 0, 0 };
        }
        line.width += line.width > 0 ? hint.width() + spacing() : hint.width();
        line.height = std::max(line.height, hint.height());
    }
    line.last = int(m_items.size());
    lines.append(line);
    int y = area.top();
    for (const Line& l : lines) {
        const int spare = std::max(0, area.width() - l.width);
        int stretching = 0;
        for (int i = l.first; i < l.last; ++i) {
            stretching += m_stretch[i] && !m_items[i]->isEmpty() ? 1 : 0;
        }
        // Widths first (a stretching item takes the rest of its line), then the line's height:
        // a word-wrapped label is as tall as its width makes it.
        QList<QSize> sizes;
        int height = 0;
        for (int i = l.first; i < l.last; ++i) {
            const QLayoutItem* item = m_items[i];
            QSize size = item->isEmpty() ? QSize() : item->sizeHint();
            if (!item->isEmpty()) {
                if (m_stretch[i] && stretching > 0) {
                    size.setWidth(size.width() + spare / stretching);
                }
                size.setWidth(std::min(size.width(), area.width()));
                if (item->hasHeightForWidth()) {
                    size.setHeight(item->heightForWidth(size.width()));
                }
                height = std::max(height, size.height());
            }
            sizes.append(size);
        }
        int x = area.left();
        for (int i = l.first; apply && i < l.last; ++i) {
            QLayoutItem* item = m_items[i];
            if (item->isEmpty()) {
                continue;
            }
            const QSize size = sizes[i - l.first];
            const int top = y + (height - size.height()) / 2;
            item->setGeometry(QRect(QPoint(x, top), size));
            x += size.width() + spacing();
        }
        y += height + spacing();
    }
    return y - spacing() - area.top() + m.top() + m.bottom();
}

} // namespace day0::ui
