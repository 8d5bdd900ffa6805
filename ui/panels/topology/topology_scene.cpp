#include "panels/topology/topology_scene.h"

#include "widgets/colors.h"
#include "widgets/formatting.h"

#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsSceneHoverEvent>
#include <QGraphicsSceneMouseEvent>
#include <QGuiApplication>
#include <QPainter>
#include <QPalette>
#include <QStyleOptionGraphicsItem>

#include <algorithm>
#include <cmath>

namespace day0::ui {

namespace {

// Geometry of the drawing, in scene units.
constexpr double kCellW = 44;
constexpr double kCellH = 30;
constexpr double kGap = 4;
constexpr double kPad = 8;
constexpr double kTitleH = 20;
constexpr double kNodeGapX = 26;
constexpr double kNodeGapY = 46; // room for the leaf switch bar above each row
constexpr int kCellsPerRow = 8;
// Below this zoom nodes collapse to summaries; above kTextLod ranks are written in the cells.
constexpr double kSummaryLod = 0.35;
constexpr double kTextLod = 0.7;

QPalette appPalette() { return QGuiApplication::palette(); }

QString gbps(double bytesPerSecond)
{
    return QString::number(bytesPerSecond / 1e9, 'f', 0) + QStringLiteral(" GB/s");
}

QRectF cellRect(int gpu)
{
    const int row = gpu / kCellsPerRow;
    const int col = gpu % kCellsPerRow;
    return { kPad + col * (kCellW + kGap), kTitleH + kPad + row * (kCellH + kGap), kCellW, kCellH };
}

/// A cell; `progress` in [0, 1] draws a run's progress bar along its bottom (negative: none).
void paintCell(QPainter* painter, const QRectF& rect, const QColor& color, int rank, bool selected,
    double lod, double progress)
{
    painter->setPen(
        selected ? QPen(appPalette().color(QPalette::Highlight), 3) : QPen(color.darker(125), 1));
    painter->setBrush(color);
    painter->drawRoundedRect(rect, 3, 3);
    if (lod >= kTextLod && rank >= 0) {
        painter->setPen(color.lightness() > 150 ? QColor(20, 20, 20) : QColor(250, 250, 250));
        painter->setFont(readableFont(*painter, painter->font()));
        painter->drawText(rect, Qt::AlignCenter, QString::number(rank));
    }
    if (progress >= 0.0) {
        const QRectF track(rect.left() + 3, rect.bottom() - 6, rect.width() - 6, 4);
        painter->setPen(Qt::NoPen);
        painter->setBrush(QColor(0, 0, 0, 110));
        painter->drawRect(track);
        painter->setBrush(appPalette().color(QPalette::Highlight));
        painter->drawRect(QRectF(track.topLeft(),
            QSizeF(track.width() * std::clamp(progress, 0.0, 1.0), track.height())));
    }
}

QString nodeTitle(int node) { return QStringLiteral("node %1").arg(node); }

} // namespace

QFont readableFont(const QPainter& painter, QFont base, double points)
{
    // The view's zoom scales what is painted: ask for more in scene units when zoomed out.
    const double scale = std::max(1e-3, std::abs(painter.worldTransform().m11()));
    base.setPointSizeF(points / std::min(scale, 1.0));
    return base;
}

namespace {

// Whether a node's title bar holds "node N" at 9 pt on screen with `painter`'s zoom.
bool titleFits(const QPainter& painter, int node, double nodeWidth)
{
    const QFontMetricsF metrics(readableFont(painter, painter.font()));
    return metrics.height() <= kTitleH + 2
        && metrics.horizontalAdvance(nodeTitle(node)) <= nodeWidth - 2 * kPad;
}

} // namespace

QColor groupColor(int index)
{
    // Okabe & Ito, "Color Universal Design" (2008): orange, sky blue, bluish green, yellow, blue,
    // vermillion, reddish purple, grey (for their black, so rank numbers stay readable).
    static const QColor kColors[] = { QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9),
        QColor(0x00, 0x9E, 0x73), QColor(0xF0, 0xE4, 0x42), QColor(0x00, 0x72, 0xB2),
        QColor(0xD5, 0x5E, 0x00), QColor(0xCC, 0x79, 0xA7), QColor(0x99, 0x99, 0x99) };
    constexpr int kCount = int(std::size(kColors));
    const int round = std::max(0, index) / kCount;
    const QColor base = kColors[std::max(0, index) % kCount];
    if (round == 0) {
        return base;
    }
    return round % 2 == 1 ? base.lighter(100 + 25 * ((round + 1) / 2))
                          : base.darker(100 + 25 * (round / 2));
}

/// One GPU (detailed mode).
class GpuItem : public QGraphicsItem {
public:
    GpuItem(int device, int gpuInNode, QGraphicsItem* parent)
        : QGraphicsItem(parent)
        , m_device(device)
        , m_rect(cellRect(gpuInNode))
    {
        setAcceptHoverEvents(true);
    }
    [[nodiscard]] QRectF boundingRect() const override { return m_rect.adjusted(-2, -2, 2, 2); }
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        const double lod = option->levelOfDetailFromTransform(painter->worldTransform());
        if (lod < kSummaryLod) {
            return; // the node paints its summary
        }
        auto* s = static_cast<TopologyScene*>(scene());
        const int rank = s->topology().ranks && m_device < s->topology().world ? m_device : -1;
        paintCell(painter, m_rect, s->deviceColor(m_device), rank, s->inSelectedGroup(m_device),
            lod, s->rankProgress(rank));
    }
    void mousePressEvent(QGraphicsSceneMouseEvent* event) override
    {
        emit static_cast<TopologyScene*>(scene())->rankClicked(m_device);
        event->accept();
    }

private:
    int m_device;
    QRectF m_rect;
};

/// One node: its frame, title and fast-link domain; in aggregate mode also its GPUs.
class NodeItem : public QGraphicsItem {
public:
    NodeItem(int node, int gpus, bool paintsGpus)
        : m_node(node)
        , m_gpus(gpus)
        , m_paintsGpus(paintsGpus)
    {
        const int rows = (gpus + kCellsPerRow - 1) / kCellsPerRow;
        const int cols = std::min(gpus, kCellsPerRow);
        m_rect = QRectF(0, 0, 2 * kPad + cols * kCellW + (cols - 1) * kGap,
            kTitleH + 2 * kPad + rows * kCellH + (rows - 1) * kGap);
        // The node's tooltip names it and its fast link wherever its title is not drawn whole.
        setAcceptHoverEvents(true);
    }
    static QSizeF size(int gpus) { return NodeItem(0, gpus, false).m_rect.size(); }
    [[nodiscard]] QRectF frame() const { return m_rect; }
    [[nodiscard]] QRectF boundingRect() const override { return m_rect.adjusted(-2, -2, 2, 2); }

    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        auto* s = static_cast<TopologyScene*>(scene());
        const double lod = option->levelOfDetailFromTransform(painter->worldTransform());
        const QPalette pal = appPalette();
        const int first = m_node * m_gpus;
        if (lod < kSummaryLod) {
            // Summary: one stripe per GPU colour, the node number on top.
            const double w = m_rect.width() / m_gpus;
            painter->setPen(Qt::NoPen);
            bool selected = false;
            for (int g = 0; g < m_gpus; ++g) {
                painter->setBrush(s->deviceColor(first + g));
                painter->drawRect(
                    QRectF(m_rect.left() + g * w, m_rect.top(), w + 0.5, m_rect.height()));
                selected = selected || s->inSelectedGroup(first + g);
            }
            painter->setBrush(Qt::NoBrush);
            painter->setPen(selected ? QPen(pal.color(QPalette::Highlight), 6)
                                     : QPen(pal.color(QPalette::Dark), 2));
            painter->drawRect(m_rect);
            return; // the badge names the node
        }
        painter->setPen(QPen(pal.color(QPalette::Mid), 1));
        painter->setBrush(pal.color(QPalette::Base));
        painter->drawRoundedRect(m_rect, 6, 6);
        paintTitle(painter);
        if (m_paintsGpus) {
            for (int g = 0; g < m_gpus; ++g) {
                const int device = first + g;
                const int rank = s->topology().ranks && device < s->topology().world ? device : -1;
                paintCell(painter, cellRect(g), s->deviceColor(device), rank,
                    s->inSelectedGroup(device), lod, s->rankProgress(rank));
            }
        }
    }
    void hoverMoveEvent(QGraphicsSceneHoverEvent* event) override
    {
        auto* s = static_cast<TopologyScene*>(scene());
        const int device = m_paintsGpus ? deviceAt(event->pos()) : -1;
        setToolTip(device >= 0 ? s->deviceTooltip(device) : s->nodeTooltip(m_node));
    }
    void mousePressEvent(QGraphicsSceneMouseEvent* event) override
    {
        if (const int device = deviceAt(event->pos()); device >= 0 && m_paintsGpus) {
            emit static_cast<TopologyScene*>(scene())->rankClicked(device);
        }
        event->accept();
    }

private:
    // The title bar at 9 pt on screen: "node N" and, where there is room, its fast link; when
    // the bar is too small for 9 pt text (zoomed out), the badge names the node instead.
    void paintTitle(QPainter* painter) const
    {
        if (!titleFits(*painter, m_node, m_rect.width())) {
            return;
        }
        const QFont font = readableFont(*painter, painter->font());
        const QFontMetricsF metrics(font);
        const QRectF bar(kPad, 2, m_rect.width() - 2 * kPad, kTitleH);
        const QString name = nodeTitle(m_node);
        const QPalette pal = appPalette();
        painter->setFont(font);
        painter->setPen(pal.color(QPalette::WindowText));
        painter->drawText(bar, Qt::AlignVCenter | Qt::AlignLeft, name);
        const auto& cluster = static_cast<TopologyScene*>(scene())->topology().cluster;
        const QString link = QStringLiteral("%1 · %2").arg(
            toQString(cluster.intraNode.kind), gbps(cluster.intraNode.bandwidth));
        if (metrics.horizontalAdvance(name + QStringLiteral("   ") + link) <= bar.width()) {
            painter->setPen(pal.color(QPalette::PlaceholderText));
            painter->drawText(bar, Qt::AlignVCenter | Qt::AlignRight, link);
        }
    }
    [[nodiscard]] int deviceAt(QPointF pos) const
    {
        for (int g = 0; g < m_gpus; ++g) {
            if (cellRect(g).adjusted(-kGap / 2, -kGap / 2, kGap / 2, kGap / 2).contains(pos)) {
                return m_node * m_gpus + g;
            }
        }
        return -1;
    }

    int m_node;
    int m_gpus;
    bool m_paintsGpus;
    QRectF m_rect;
};

/// A label in the scene (the traffic figures): drawn at 9 pt on screen when it fits the room it
/// is given, left out when zoomed out so far that it does not; its tooltip always has the text.
class FittedTextItem : public QGraphicsItem {
public:
    FittedTextItem(QString text, QRectF room)
        : m_text(std::move(text))
        , m_room(room)
    {
        setToolTip(m_text);
    }
    [[nodiscard]] QRectF boundingRect() const override { return m_room; }
    void paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        const QFont font = readableFont(*painter, painter->font());
        const QFontMetricsF metrics(font);
        if (metrics.height() > m_room.height()
            || metrics.horizontalAdvance(m_text) > m_room.width()) {
            return;
        }
        painter->setFont(font);
        painter->setPen(appPalette().color(QPalette::WindowText));
        painter->drawText(m_room, Qt::AlignLeft | Qt::AlignVCenter, m_text);
    }

private:
    QString m_text;
    QRectF m_room;
};

/// The number of a node on a plate over its middle, at 9 pt on screen, where the node's title
/// does not fit (zoomed out); above the GPUs, transparent to the mouse and to tooltips.
class BadgeItem : public QGraphicsItem {
public:
    BadgeItem(int node, QRectF rect, QGraphicsItem* parent)
        : QGraphicsItem(parent)
        , m_node(node)
        , m_rect(rect)
    {
        setAcceptedMouseButtons(Qt::NoButton);
        setZValue(1);
    }
    [[nodiscard]] QRectF boundingRect() const override { return m_rect; }
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) override
    {
        const double lod = option->levelOfDetailFromTransform(painter->worldTransform());
        if (lod >= kSummaryLod && titleFits(*painter, m_node, m_rect.width())) {
            return; // the title names the node
        }
        QFont font = readableFont(*painter, painter->font());
        font.setBold(true);
        const QFontMetricsF metrics(font);
        const QString text = QString::number(m_node);
        const QSizeF size(
            metrics.horizontalAdvance(text) + metrics.height() * 0.6, metrics.height() * 1.1);
        if (size.width() > m_rect.width() || size.height() > m_rect.height()) {
            return; // smaller on screen than 9 pt text: the node's tooltip names it
        }
        const QRectF plate(m_rect.center() - QPointF(size.width() / 2, size.height() / 2), size);
        const QPalette pal = appPalette();
        QColor backing = pal.color(QPalette::Base);
        backing.setAlpha(225);
        painter->setPen(QPen(pal.color(QPalette::Mid), 0));
        painter->setBrush(backing);
        painter->drawRoundedRect(plate, size.height() / 4, size.height() / 4);
        painter->setFont(font);
        painter->setPen(pal.color(QPalette::WindowText));
        painter->drawText(plate, Qt::AlignCenter, text);
    }

private:
    int m_node;
    QRectF m_rect;
};

TopologyScene::TopologyScene(QObject* parent)
    : QGraphicsScene(parent)
{
    setItemIndexMethod(QGraphicsScene::BspTreeIndex);
}

void TopologyScene::setTopology(TopologyData data)
{
    m_data = std::move(data);
    if (m_selected >= m_data.world) {
        m_selected = -1;
    }
    rebuild();
    setSelectedRank(m_selected);
}

void TopologyScene::setColoring(TopologyColoring coloring)
{
    m_coloring = coloring;
    setSelectedRank(m_selected); // the group to outline depends on the colouring
}

void TopologyScene::setSelectedRank(int rank)
{
    m_selected = rank;
    m_selectedMembers.assign(std::size_t(m_data.cluster.worldSize()), 0);
    if (rank >= 0 && m_data.ranks && rank < m_data.world) {
        const int index = colorIndex(rank);
        for (int r = 0; r < m_data.world; ++r) {
            m_selectedMembers[std::size_t(r)] = colorIndex(r) == index;
        }
    }
    update();
}

void TopologyScene::setRankProgress(std::vector<double> fractions)
{
    m_progress = std::move(fractions);
    update();
}

double TopologyScene::rankProgress(int rank) const
{
    return rank >= 0 && std::size_t(rank) < m_progress.size() ? m_progress[std::size_t(rank)]
                                                              : -1.0;
}

void TopologyScene::setLinkTraffic(std::vector<parallel::NodeTraffic> traffic)
{
    m_traffic = std::move(traffic);
    rebuild();
    setSelectedRank(m_selected);
}

int TopologyScene::colorIndex(int rank) const
{
    if (!m_data.ranks || rank < 0 || rank >= m_data.world) {
        return -1;
    }
    const auto& ranks = *m_data.ranks;
    switch (m_coloring) {
    case TopologyColoring::TensorGroup:
        return ranks.groupIndex(plan::GroupKind::Tensor, rank);
    case TopologyColoring::PipelineStage:
        return ranks.coordinates(rank).pp;
    case TopologyColoring::ExpertGroup:
        return ranks.groupIndex(plan::GroupKind::Expert, rank);
    case TopologyColoring::DataReplica:
        return ranks.coordinates(rank).dp;
    case TopologyColoring::ContextGroup:
        return ranks.groupIndex(plan::GroupKind::Context, rank);
    }
    return -1;
}

int TopologyScene::colorGroupCount() const
{
    if (!m_data.ranks) {
        return 0;
    }
    const auto& ranks = *m_data.ranks;
    switch (m_coloring) {
    case TopologyColoring::TensorGroup:
        return ranks.numGroups(plan::GroupKind::Tensor);
    case TopologyColoring::PipelineStage:
        return ranks.groupSize(plan::GroupKind::Pipeline);
    case TopologyColoring::ExpertGroup:
        return ranks.numGroups(plan::GroupKind::Expert);
    case TopologyColoring::DataReplica:
        return ranks.groupSize(plan::GroupKind::Data);
    case TopologyColoring::ContextGroup:
        return ranks.numGroups(plan::GroupKind::Context);
    }
    return 0;
}

QColor TopologyScene::deviceColor(int device) const
{
    const int index = colorIndex(device);
    if (index < 0) {
        return appPalette().color(QPalette::Button);
    }
    return groupColor(index);
}

ColorClassExtent TopologyScene::colorClassExtent(int rank) const
{
    ColorClassExtent e;
    const int index = colorIndex(rank);
    if (index < 0) {
        return e;
    }
    const int domainSize = std::max(1, m_data.cluster.domainSize);
    std::vector<char> domains(std::size_t(m_data.cluster.worldSize() / domainSize + 1), 0);
    std::vector<char> nodes(std::size_t(std::max(1, m_data.cluster.numNodes)), 0);
    for (int r = 0; r < m_data.world; ++r) {
        if (colorIndex(r) != index) {
            continue;
        }
        ++e.ranks;
        auto& d = domains[std::size_t(r / domainSize)];
        e.domains += d == 0;
        d = 1;
        const int node = m_data.cluster.nodeOf(r);
        if (node >= 0 && std::size_t(node) < nodes.size()) {
            e.nodes += nodes[std::size_t(node)] == 0;
            nodes[std::size_t(node)] = 1;
        }
    }
    return e;
}

bool TopologyScene::inSelectedGroup(int device) const
{
    return device >= 0 && std::size_t(device) < m_selectedMembers.size()
        && m_selectedMembers[std::size_t(device)];
}

QString TopologyScene::clusterSummary() const
{
    const auto& c = m_data.cluster;
    if (c.worldSize() <= 0) {
        return {};
    }
    return QStringLiteral(
        "%1 × %2 (%3 nodes × %4)   ·   inter-node: %5, %6 per GPU   ·   intra-node: %7, %8")
        .arg(c.worldSize())
        .arg(toQString(c.device.name))
        .arg(c.numNodes)
        .arg(c.gpusPerNode)
        .arg(toQString(c.interNodeLink().kind), gbps(c.interNodeLink().bandwidth),
            toQString(c.intraNode.kind), gbps(c.intraNode.bandwidth));
}

QString TopologyScene::nodeTooltip(int node) const
{
    const auto& c = m_data.cluster;
    return QStringLiteral("<b>node %1</b>: %2 × %3<br>intra-node: %4, %5")
        .arg(node)
        .arg(c.gpusPerNode)
        .arg(toQString(c.device.name))
        .arg(toQString(c.intraNode.kind), gbps(c.intraNode.bandwidth));
}

QString TopologyScene::deviceTooltip(int device) const
{
    const auto& c = m_data.cluster;
    QString text = QStringLiteral("<b>GPU %1</b> · node %2, slot %3<br>%4")
                       .arg(device)
                       .arg(c.nodeOf(device))
                       .arg(device % c.gpusPerNode)
                       .arg(toQString(c.device.name));
    if (!m_data.ranks || device >= m_data.world) {
        return text + QStringLiteral("<br><i>idle: the plan does not use this device</i>");
    }
    const auto co = m_data.ranks->coordinates(device);
    text += QStringLiteral(
        "<br><b>rank %1</b>: tp %2 · cp %3 · dp %4 · pp %5<br>experts: ep %6 · etp %7 · edp %8")
                .arg(device)
                .arg(co.tp)
                .arg(co.cp)
                .arg(co.dp)
                .arg(co.pp)
                .arg(co.ep)
                .arg(co.etp)
                .arg(co.edp);
    if (std::size_t(co.pp) < m_data.stageMemory.size()) {
        const double used = m_data.stageMemory[std::size_t(co.pp)];
        text += QStringLiteral("<br>memory: <b>%1</b> of %2")
                    .arg(bytesText(Bytes(std::int64_t(used))),
                        bytesText(Bytes(std::int64_t(m_data.deviceMemory))));
    }
    return text;
}

void TopologyScene::addTrafficLabels(
    int node, QGraphicsLineItem* uplink, QPointF origin, QSizeF size)
{
    const auto& t = m_traffic[std::size_t(node)];
    std::int64_t most = 1;
    for (const auto& other : m_traffic) {
        most = std::max({ most, other.interBytes, other.intraBytes });
    }
    const QColor traffic = appPalette().color(QPalette::Highlight);
    if (t.interBytes > 0) {
        // Width grows with the share of the busiest link, so hot uplinks stand out.
        uplink->setPen(QPen(traffic, 1.5 + 5.0 * double(t.interBytes) / double(most)));
    }
    uplink->setToolTip(QStringLiteral("node %1 uplink: %2 in and out during the run")
                           .arg(node)
                           .arg(bytesText(Bytes(t.interBytes))));
    // The uplink's figure beside it, up to the leaf switch; the node's own below it, down to
    // the next row's switch.
    const double half = kNodeGapY / 2;
    addItem(new FittedTextItem(QStringLiteral("⇅ %1").arg(bytesText(Bytes(t.interBytes))),
        QRectF(origin.x() + size.width() / 2 + 6, origin.y() - half + 4, size.width() / 2 - 6,
            half - 5)));
    addItem(new FittedTextItem(QStringLiteral("intra-node %1").arg(bytesText(Bytes(t.intraBytes))),
        QRectF(origin.x() + kPad, origin.y() + size.height() + 1, size.width() - kPad, half - 5)));
    m_trafficLabels += 2;
}

void TopologyScene::rebuild()
{
    clear();
    m_trafficLabels = 0;
    m_gpuItems.clear();
    m_nodeItems.clear();
    const auto& c = m_data.cluster;
    if (c.worldSize() <= 0) {
        return;
    }
    m_detailed = c.worldSize() <= kDetailedLimit;
    const QSizeF node = NodeItem::size(c.gpusPerNode);
    // A grid about twice as wide as tall on screen.
    const int cols = std::max(1,
        std::min(c.numNodes,
            int(std::ceil(std::sqrt(c.numNodes * 2.0 * node.height() / node.width())))));
    const int rows = (c.numNodes + cols - 1) / cols;
    const QPalette pal = appPalette();
    const QPen wire(pal.color(QPalette::Mid), 1.5);
    const QColor switchColor = pal.color(QPalette::Dark);
    const double spineX = -40;
    const double top = 30;
    for (int row = 0; row < rows; ++row) {
        const double y = top + row * (node.height() + kNodeGapY) + kNodeGapY;
        const int inRow = std::min(cols, c.numNodes - row * cols);
        const double leafY = y - kNodeGapY / 2;
        auto* leaf
            = addRect(QRectF(0, leafY - 3, inRow * (node.width() + kNodeGapX) - kNodeGapX, 6),
                Qt::NoPen, switchColor);
        leaf->setToolTip(QStringLiteral("leaf switch: %1").arg(toQString(c.interNodeLink().kind)));
        addLine(spineX, leafY, 0, leafY, wire);
        for (int i = 0; i < inRow; ++i) {
            const int n = row * cols + i;
            const double x = i * (node.width() + kNodeGapX);
            auto* uplink = addLine(x + node.width() / 2, leafY + 3, x + node.width() / 2, y, wire);
            if (std::size_t(n) < m_traffic.size()) {
                addTrafficLabels(n, uplink, QPointF(x, y), node);
            }
            auto* item = new NodeItem(n, c.gpusPerNode, !m_detailed);
            item->setPos(x, y);
            addItem(item);
            m_nodeItems.push_back(item);
            if (m_detailed) {
                for (int g = 0; g < c.gpusPerNode; ++g) {
                    const int device = n * c.gpusPerNode + g;
                    auto* gpu = new GpuItem(device, g, item);
                    gpu->setToolTip(deviceTooltip(device));
                    m_gpuItems.push_back(gpu);
                }
            }
            new BadgeItem(n, item->frame(), item); // after the GPUs: drawn above them
        }
    }
    const double bottom = top + rows * (node.height() + kNodeGapY);
    addRect(QRectF(spineX - 6, top, 6, bottom - top), Qt::NoPen, switchColor)
        ->setToolTip(QStringLiteral("spine"));
    setSceneRect(itemsBoundingRect().adjusted(-20, -20, 20, 20));
}

} // namespace day0::ui
