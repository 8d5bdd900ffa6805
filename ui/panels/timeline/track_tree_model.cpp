#include "panels/timeline/track_tree_model.h"

#include "profile/timeline_query.h"
#include "widgets/formatting.h"

#include <QHash>
#include <QLocale>

#include <algorithm>
#include <map>
#include <tuple>

namespace day0::ui {

namespace {

// Tracks deeper than this start collapsed (deep Python stacks would push everything else away);
// a collapsed track shows its top levels.
constexpr int kMaxExpandedDepths = 6;
constexpr int kCollapsedDepths = 3;

QString trackLabel(const profile::Track& t)
{
    if (!t.name.empty()) {
        return toQString(t.name);
    }
    switch (t.kind) {
    case profile::TrackKind::Stream:
        return t.tid < 0 ? QObject::tr("device") : QObject::tr("stream %1").arg(t.tid);
    case profile::TrackKind::Counter:
        return QObject::tr("counter");
    case profile::TrackKind::Thread:
        break;
    }
    return QObject::tr("thread %1").arg(t.tid);
}

bool isGpuTrack(const profile::Track& t)
{
    return t.kind == profile::TrackKind::Stream
        || (t.kind != profile::TrackKind::Thread && t.device >= 0);
}

} // namespace

TrackTreeModel::TrackTreeModel(QObject* parent)
    : QAbstractItemModel(parent)
{
}

TrackTreeModel::~TrackTreeModel() = default;

void TrackTreeModel::setTraces(const std::shared_ptr<const profile::Trace>& a,
    const std::shared_ptr<const profile::Trace>& b, const QString& nameA, const QString& nameB)
{
    QHash<QString, bool> expanded;
    for (const auto& n : m_nodes) {
        expanded.insert(n.key, n.expanded);
    }
    beginResetModel();
    m_nodes.clear();
    m_roots.clear();
    m_trackNodes[0].clear();
    m_trackNodes[1].clear();
    if (a) {
        addTrace(0, *a, nameA);
    }
    if (b) {
        addTrace(1, *b, nameB);
    }
    for (auto& n : m_nodes) {
        if (const auto it = expanded.constFind(n.key); it != expanded.constEnd()) {
            n.expanded = *it;
        }
    }
    endResetModel();
    invalidateRows();
}

int TrackTreeModel::addNode(Node node)
{
    const int id = int(m_nodes.size());
    if (node.parent < 0) {
        node.row = int(m_roots.size());
        m_roots.push_back(id);
    } else {
        node.row = int(m_nodes[std::size_t(node.parent)].children.size());
        m_nodes[std::size_t(node.parent)].children.push_back(id);
    }
    m_nodes.push_back(std::move(node));
    return id;
}

void TrackTreeModel::addTrace(int slot, const profile::Trace& trace, const QString& name)
{
    const auto& tracks = trace.tracks();
    m_trackNodes[std::size_t(slot)].assign(tracks.size(), -1);
    const QString slotKey = QString::number(slot);

    Node root;
    root.kind = NodeKind::Trace;
    root.slot = slot;
    root.label = (slot == 0 ? QStringLiteral("A  ") : QStringLiteral("B  ")) + name;
    root.detail = tr("%1 slices on %2 tracks")
                      .arg(QLocale().toString(qulonglong(trace.sliceCount())))
                      .arg(tracks.size());
    root.slices = trace.sliceCount();
    root.key = slotKey;
    const int rootId = addNode(std::move(root));

    // rank → (host before GPU, pid or device) → tracks
    using GroupKey = std::tuple<bool, std::int64_t>;
    std::map<std::int32_t, std::map<GroupKey, std::vector<profile::TrackId>>> tree;
    for (profile::TrackId t = 0; t < tracks.size(); ++t) {
        const auto& track = tracks[t];
        // Rows show slices, instant markers or counter values; an empty track is left out.
        const auto [s0, s1] = trace.trackSlices(t);
        const auto [i0, i1] = profile::trackInstants(trace, t);
        if (s0 == s1 && i0 == i1 && track.kind != profile::TrackKind::Counter) {
            continue;
        }
        const bool gpu = isGpuTrack(track);
        tree[track.rank][GroupKey { gpu, gpu ? std::int64_t(track.device) : track.pid }].push_back(
            t);
    }
    for (auto& [rank, groups] : tree) {
        Node rankNode;
        rankNode.kind = NodeKind::Rank;
        rankNode.parent = rootId;
        rankNode.slot = slot;
        rankNode.rank = rank;
        rankNode.label = tr("Rank %1").arg(rank);
        rankNode.key = slotKey + QStringLiteral("/r") + QString::number(rank);
        const int rankId = addNode(rankNode);
        for (auto& [key, ids] : groups) {
            const auto& [gpu, id] = key;
            std::sort(ids.begin(), ids.end(), [&](profile::TrackId x, profile::TrackId y) {
                const auto& p = tracks[x];
                const auto& q = tracks[y];
                return std::tie(p.kind, p.sortIndex, p.tid, p.lane, x)
                    < std::tie(q.kind, q.sortIndex, q.tid, q.lane, y);
            });
            Node group;
            group.kind = NodeKind::Group;
            group.parent = rankId;
            group.slot = slot;
            group.rank = rank;
            const auto& first = tracks[ids.front()];
            if (gpu) {
                group.label = tr("GPU %1").arg(id);
                for (const auto& d : trace.devices()) {
                    if (d.rank == rank && d.device == id && !d.name.empty()) {
                        group.label += QStringLiteral(" · ") + toQString(d.name);
                        break;
                    }
                }
                group.detail = tr("%n stream(s)", nullptr, int(ids.size()));
            } else {
                group.label
                    = first.processName.empty() ? tr("Host process") : toQString(first.processName);
                // Kineto's pseudo-processes ("Spans", "Traces") carry made-up negative pids.
                group.detail = id > 0 ? tr("pid %1 · %n track(s)", nullptr, int(ids.size())).arg(id)
                                      : tr("%n track(s)", nullptr, int(ids.size()));
            }
            group.key = rankNode.key + (gpu ? QStringLiteral("/g") : QStringLiteral("/p"))
                + QString::number(id);
            const int groupId = addNode(group);
            std::size_t groupSlices = 0;
            for (const profile::TrackId t : ids) {
                const auto& track = tracks[t];
                const auto [s0, s1] = trace.trackSlices(t);
                Node leaf;
                leaf.kind = NodeKind::Track;
                leaf.parent = groupId;
                leaf.slot = slot;
                leaf.rank = rank;
                leaf.track = t;
                leaf.label = trackLabel(track);
                leaf.slices = s1 - s0;
                leaf.depths = trace.trackDepths(t);
                leaf.detail = track.kind == profile::TrackKind::Counter
                    ? tr("counter")
                    : tr("%1 slices · %n level(s)", nullptr, leaf.depths)
                          .arg(QLocale().toString(qulonglong(leaf.slices)));
                leaf.expanded = leaf.depths <= kMaxExpandedDepths;
                leaf.key = group.key + QStringLiteral("/t") + QString::number(int(track.kind))
                    + QLatin1Char(':') + QString::number(track.tid) + QLatin1Char(':')
                    + QString::number(int(track.lane)) + QLatin1Char(':') + leaf.label;
                groupSlices += leaf.slices;
                m_trackNodes[std::size_t(slot)][t] = addNode(std::move(leaf));
            }
            m_nodes[std::size_t(groupId)].slices = groupSlices;
            m_nodes[std::size_t(rankId)].slices += groupSlices;
        }
        Node& r = m_nodes[std::size_t(rankId)];
        r.detail = tr("%1 slices · %n group(s)", nullptr, int(r.children.size()))
                       .arg(QLocale().toString(qulonglong(r.slices)));
    }
}

void TrackTreeModel::invalidateRows()
{
    m_rowsValid = false;
    emit rowsLayoutChanged();
}

const std::vector<TrackTreeModel::VisibleRow>& TrackTreeModel::visibleRows() const
{
    if (m_rowsValid) {
        return m_rows;
    }
    m_rows.clear();
    auto visit = [this](auto&& self, int id, int level) -> void {
        const Node& n = m_nodes[std::size_t(id)];
        VisibleRow row;
        row.node = id;
        row.kind = n.kind;
        row.slot = n.slot;
        row.track = n.track;
        row.level = level;
        row.expanded = n.expanded;
        row.hasChildren = !n.children.empty() || n.depths > kCollapsedDepths;
        row.depthsShown = n.kind != NodeKind::Track
            ? 0
            : (n.expanded ? n.depths : std::min(kCollapsedDepths, n.depths));
        m_rows.push_back(row);
        if (n.expanded) {
            for (const int child : n.children) {
                self(self, child, level + 1);
            }
        }
    };
    for (const int root : m_roots) {
        visit(visit, root, 0);
    }
    m_rowsValid = true;
    return m_rows;
}

QString TrackTreeModel::label(int node) const { return m_nodes[std::size_t(node)].label; }

QString TrackTreeModel::detail(int node) const { return m_nodes[std::size_t(node)].detail; }

bool TrackTreeModel::isExpanded(int node) const { return m_nodes[std::size_t(node)].expanded; }

void TrackTreeModel::setExpanded(int node, bool expanded)
{
    Node& n = m_nodes[std::size_t(node)];
    if (n.expanded == expanded) {
        return;
    }
    n.expanded = expanded;
    const QModelIndex i = indexOfNode(node);
    emit dataChanged(i, i.siblingAtColumn(SlicesColumn), { ExpandedRole });
    invalidateRows();
}

int TrackTreeModel::trackNode(int slot, profile::TrackId track) const
{
    if (slot < 0 || slot > 1 || track >= m_trackNodes[std::size_t(slot)].size()) {
        return -1;
    }
    return m_trackNodes[std::size_t(slot)][track];
}

bool TrackTreeModel::reveal(int slot, profile::TrackId track)
{
    const int node = trackNode(slot, track);
    if (node < 0) {
        return false;
    }
    for (int n = node; n >= 0; n = m_nodes[std::size_t(n)].parent) {
        setExpanded(n, true);
    }
    return true;
}

QModelIndex TrackTreeModel::indexOfNode(int node) const
{
    if (node < 0 || node >= int(m_nodes.size())) {
        return {};
    }
    return createIndex(m_nodes[std::size_t(node)].row, 0, quintptr(node));
}

QModelIndex TrackTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount) {
        return {};
    }
    const std::vector<int>& siblings
        = parent.isValid() ? m_nodes[std::size_t(parent.internalId())].children : m_roots;
    if (parent.isValid() && parent.column() != 0) {
        return {};
    }
    if (row >= int(siblings.size())) {
        return {};
    }
    return createIndex(row, column, quintptr(siblings[std::size_t(row)]));
}

QModelIndex TrackTreeModel::parent(const QModelIndex& child) const
{
    if (!child.isValid()) {
        return {};
    }
    const int p = m_nodes[std::size_t(child.internalId())].parent;
    return p < 0 ? QModelIndex() : createIndex(m_nodes[std::size_t(p)].row, 0, quintptr(p));
}

int TrackTreeModel::rowCount(const QModelIndex& parent) const
{
    if (!parent.isValid()) {
        return int(m_roots.size());
    }
    if (parent.column() != 0) {
        return 0;
    }
    return int(m_nodes[std::size_t(parent.internalId())].children.size());
}

int TrackTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant TrackTreeModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid()) {
        return {};
    }
    const Node& n = m_nodes[std::size_t(index.internalId())];
    switch (role) {
    case Qt::DisplayRole:
        return index.column() == NameColumn ? QVariant(n.label)
                                            : QVariant(QLocale().toString(qulonglong(n.slices)));
    case Qt::ToolTipRole:
        return n.detail;
    case Qt::TextAlignmentRole:
        return index.column() == SlicesColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                              : QVariant();
    case KindRole:
        return int(n.kind);
    case SlotRole:
        return n.slot;
    case TrackRole:
        return n.track == profile::kNoTrack ? -1 : qlonglong(n.track);
    case ExpandedRole:
        return n.expanded;
    case SliceCountRole:
        return qulonglong(n.slices);
    default:
        return {};
    }
}

bool TrackTreeModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (!index.isValid() || role != ExpandedRole) {
        return false;
    }
    setExpanded(int(index.internalId()), value.toBool());
    return true;
}

QVariant TrackTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    return section == NameColumn ? tr("Track") : tr("Slices");
}

Qt::ItemFlags TrackTreeModel::flags(const QModelIndex& index) const
{
    return index.isValid() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags;
}

} // namespace day0::ui
