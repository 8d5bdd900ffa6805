#include "panels/model/layer_pattern_view.h"

#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QLocale>
#include <QPainter>
#include <QToolTip>

#include <algorithm>

namespace day0::ui {

namespace {

constexpr int kCell = 14; // cell side in pixels
constexpr int kGap = 2;
constexpr int kBar = 4; // feed-forward bar height
constexpr int kLegendRow = 18;

QString mixerLabel(const model::LayerCell& c)
{
    using model::MixerKind;
    switch (c.mixer) {
    case MixerKind::Attention:
        return QObject::tr("full attention");
    case MixerKind::Sliding:
        return QObject::tr("sliding window %1").arg(c.window);
    case MixerKind::Chunked:
        return QObject::tr("chunked attention %1").arg(c.window);
    case MixerKind::SparseMla:
        return QObject::tr("MLA + DSA indexer");
    case MixerKind::Compressed:
        return c.compressRatio > 0
            ? QObject::tr("compressed 1:%1 + window %2").arg(c.compressRatio).arg(c.window)
            : QObject::tr("sliding window %1").arg(c.window);
    case MixerKind::BlockSparse:
        return QObject::tr("block-sparse attention");
    case MixerKind::GatedDeltaNet:
        return QObject::tr("Gated DeltaNet");
    case MixerKind::KimiDelta:
        return QObject::tr("Kimi Delta Attention");
    case MixerKind::Mamba2:
        return QObject::tr("Mamba-2");
    case MixerKind::Linear:
        return QObject::tr("linear (replaced attention)");
    case MixerKind::None:
        return QObject::tr("no mixer");
    }
    return {};
}

QString ffnLabel(model::FfnKind kind)
{
    switch (kind) {
    case model::FfnKind::Dense:
        return QObject::tr("dense MLP");
    case model::FfnKind::Moe:
        return QObject::tr("MoE");
    case model::FfnKind::Linear:
        return QObject::tr("linear (replaced MLP)");
    case model::FfnKind::None:
        return QObject::tr("no feed-forward");
    }
    return {};
}

QColor ffnColor(model::FfnKind kind)
{
    switch (kind) {
    case model::FfnKind::Dense:
        return QColor(0x55, 0x55, 0x55);
    case model::FfnKind::Moe:
        return QColor(0xe1, 0x57, 0x59);
    case model::FfnKind::Linear:
        return QColor(0x9c, 0x75, 0x5f);
    case model::FfnKind::None:
        return QColor(Qt::transparent);
    }
    return {};
}

} // namespace

QColor cellColor(const model::LayerCell& c)
{
    // DeepSeek-V4's three kinds of compressed layer by their ratio.
    if (c.mixer == model::MixerKind::Compressed) {
        if (c.compressRatio == 0) {
            return mixerColor(model::MixerKind::Sliding);
        }
        return c.compressRatio <= 4 ? categoricalColor(6) : categoricalColor(7);
    }
    return mixerColor(c.mixer);
}

QColor mixerColor(model::MixerKind kind)
{
    // Softmax-attention kinds in blues and greens, recurrent mixers in warm colours.
    using model::MixerKind;
    switch (kind) {
    case MixerKind::Attention:
        return categoricalColor(0);
    case MixerKind::Sliding:
        return QColor(0x9e, 0xc9, 0xe8);
    case MixerKind::Chunked:
        return QColor(0x76, 0xb7, 0xb2);
    case MixerKind::SparseMla:
        return categoricalColor(4);
    case MixerKind::Compressed:
        return categoricalColor(6);
    case MixerKind::BlockSparse:
        return categoricalColor(9);
    case MixerKind::GatedDeltaNet:
        return categoricalColor(1);
    case MixerKind::KimiDelta:
        return categoricalColor(5);
    case MixerKind::Mamba2:
        return categoricalColor(2);
    case MixerKind::Linear:
        return QColor(0xba, 0xb0, 0xac);
    case MixerKind::None:
        return QColor(0xee, 0xee, 0xee);
    }
    return {};
}

LayerPatternView::LayerPatternView(QWidget* parent)
    : QWidget(parent)
{
    setObjectName(QStringLiteral("layerPatternView"));
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
}

void LayerPatternView::setPattern(std::vector<model::LayerCell> cells)
{
    m_cells = std::move(cells);
    updateGeometry();
    update();
}

int LayerPatternView::columnsFor(int width) const
{
    return std::max(1, (width - kGap) / (kCell + kGap));
}

QRect LayerPatternView::cellRect(int index, int columns) const
{
    const int row = index / columns;
    const int column = index % columns;
    return { kGap + column * (kCell + kGap), kGap + row * (kCell + kGap), kCell, kCell };
}

int LayerPatternView::legendTop(int columns) const
{
    const int rows = m_cells.empty() ? 0 : (int(m_cells.size()) + columns - 1) / columns;
    return kGap + rows * (kCell + kGap) + 4;
}

QStringList LayerPatternView::legend() const
{
    QStringList out;
    for (const auto& c : m_cells) {
        const QString label = mixerLabel(c);
        if (!out.contains(label)) {
            out << label;
        }
    }
    for (const auto& c : m_cells) {
        const QString label = ffnLabel(c.ffn);
        if (c.ffn != model::FfnKind::None && !out.contains(label)) {
            out << label;
        }
    }
    if (std::any_of(m_cells.begin(), m_cells.end(), [](const auto& c) { return c.mtp; })) {
        out << tr("MTP");
    }
    return out;
}

std::vector<QPoint> LayerPatternView::legendPositions(int width) const
{
    std::vector<QPoint> out;
    const QFontMetrics metrics(font());
    int x = kGap;
    int y = legendTop(columnsFor(width));
    for (const auto& label : legend()) {
        const int w = kCell + 4 + metrics.horizontalAdvance(label) + 12;
        if (x > kGap && x + w > width) {
            x = kGap;
            y += kLegendRow;
        }
        out.emplace_back(x, y);
        x += w;
    }
    return out;
}

int LayerPatternView::heightForWidth(int width) const
{
    const auto positions = legendPositions(width);
    const int bottom
        = positions.empty() ? legendTop(columnsFor(width)) : positions.back().y() + kLegendRow;
    return bottom + kGap;
}

QSize LayerPatternView::sizeHint() const
{
    const int width = 32 * (kCell + kGap) + kGap;
    return { width, heightForWidth(width) };
}

QSize LayerPatternView::minimumSizeHint() const { return { 8 * (kCell + kGap), kCell + 2 * kGap }; }

int LayerPatternView::cellAt(QPoint pos) const
{
    const int columns = columnsFor(width());
    for (int i = 0; i < int(m_cells.size()); ++i) {
        if (cellRect(i, columns).contains(pos)) {
            return i;
        }
    }
    return -1;
}

QString LayerPatternView::cellText(int index) const
{
    if (index < 0 || index >= int(m_cells.size())) {
        return {};
    }
    const auto& c = m_cells[std::size_t(index)];
    QString text = c.mtp ? tr("MTP layer %1").arg(c.index) : tr("layer %1").arg(c.index);
    text += QStringLiteral(": ") + mixerLabel(c);
    if (c.mixer != model::MixerKind::None && c.mixer != model::MixerKind::Linear) {
        text += tr(" (%1 heads, %2 KV heads)").arg(c.heads).arg(c.kvHeads);
    }
    text += QStringLiteral(", ") + ffnLabel(c.ffn);
    if (c.ffn == model::FfnKind::Moe) {
        text += tr(" top-%1%2").arg(c.topK).arg(c.hashRouted ? tr(", hash-routed") : QString());
    } else if (c.ffn == model::FfnKind::Dense) {
        text += tr(" width %1").arg(QLocale().toString(qlonglong(c.ffnWidth)));
    }
    return text;
}

bool LayerPatternView::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int cell = cellAt(help->pos());
        if (cell >= 0) {
            QToolTip::showText(help->globalPos(), cellText(cell), this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(e);
}

void LayerPatternView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const int columns = columnsFor(width());
    for (int i = 0; i < int(m_cells.size()); ++i) {
        const auto& c = m_cells[std::size_t(i)];
        const QRect r = cellRect(i, columns);
        p.fillRect(r, cellColor(c));
        if (c.ffn != model::FfnKind::None) {
            p.fillRect(QRect(r.left(), r.bottom() - kBar + 1, r.width(), kBar), ffnColor(c.ffn));
        }
        if (c.mtp) {
            p.setPen(QPen(palette().color(QPalette::WindowText), 1, Qt::DashLine));
            p.drawRect(r.adjusted(0, 0, -1, -1));
        }
    }
    // Legend: a swatch and a label per kind present.
    const auto positions = legendPositions(width());
    std::size_t entry = 0;
    auto swatch = [&](const QString& label, const QColor& fill, bool bar, bool dashed) {
        if (entry >= positions.size()) {
            return;
        }
        const int x = positions[entry].x();
        const int y = positions[entry].y();
        const QRect box(x, y + 2, kCell - 2, kCell - 2);
        if (bar) {
            p.fillRect(QRect(box.left(), box.bottom() - kBar + 1, box.width(), kBar), fill);
        } else if (dashed) {
            p.setPen(QPen(palette().color(QPalette::WindowText), 1, Qt::DashLine));
            p.drawRect(box.adjusted(0, 0, -1, -1));
        } else {
            p.fillRect(box, fill);
        }
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x + kCell + 4, y, width() - x - kCell - 4, kLegendRow),
            Qt::AlignVCenter | Qt::AlignLeft, label);
        ++entry;
    };
    QStringList drawn;
    for (const auto& c : m_cells) {
        const QString label = mixerLabel(c);
        if (!drawn.contains(label)) {
            drawn << label;
            swatch(label, cellColor(c), false, false);
        }
    }
    for (const auto& c : m_cells) {
        const QString label = ffnLabel(c.ffn);
        if (c.ffn != model::FfnKind::None && !drawn.contains(label)) {
            drawn << label;
            swatch(label, ffnColor(c.ffn), true, false);
        }
    }
    if (std::any_of(m_cells.begin(), m_cells.end(), [](const auto& c) { return c.mtp; })) {
        swatch(tr("MTP"), {}, false, true);
    }
}

} // namespace day0::ui
