#pragma once

#include "profile/trace.h"

#include <QAbstractItemModel>

#include <array>
#include <memory>
#include <vector>

namespace day0::ui {

/// The rows of the timeline as a tree: trace (A, and B when comparing) → rank → device or host
/// process → track (stream, thread, NVTX lane, counter). Groups collapse; a collapsed track shows
/// its top three levels. The timeline view lays out and paints the visible rows; the model is the
/// one place that knows the order and the collapse state. GUI-thread object.
class TrackTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum class NodeKind { Trace, Rank, Group, Track };
    enum Role {
        KindRole = Qt::UserRole, ///< NodeKind as int
        SlotRole, ///< 0 for trace A, 1 for trace B
        TrackRole, ///< profile::TrackId of a track row (-1 otherwise)
        ExpandedRole, ///< bool; settable
        SliceCountRole, ///< slices under the node
    };
    enum Column { NameColumn, SlicesColumn, ColumnCount };

    explicit TrackTreeModel(QObject* parent = nullptr);
    ~TrackTreeModel() override;

    /// Rebuilds the tree for the traces (either may be null). Collapse state is kept for nodes
    /// that still exist.
    void setTraces(const std::shared_ptr<const profile::Trace>& a,
        const std::shared_ptr<const profile::Trace>& b, const QString& nameA, const QString& nameB);

    /// A row as the view lays it out: visible (its ancestors expanded), in display order.
    struct VisibleRow {
        int node = 0;
        NodeKind kind = NodeKind::Trace;
        int slot = 0;
        profile::TrackId track = profile::kNoTrack;
        int level = 0; ///< indentation: 0 for traces, 3 for tracks
        int depthsShown = 0; ///< nesting levels painted (tracks)
        bool expanded = true;
        bool hasChildren = false;
    };
    /// The visible rows, top to bottom (cached; recomputed after a change).
    [[nodiscard]] const std::vector<VisibleRow>& visibleRows() const;
    /// Label of a node ("Rank 0", "GPU 0 · NVIDIA H100", "stream 7").
    [[nodiscard]] QString label(int node) const;
    /// Second line or tooltip detail of a node.
    [[nodiscard]] QString detail(int node) const;
    [[nodiscard]] bool isExpanded(int node) const;
    void setExpanded(int node, bool expanded);
    /// Expands every ancestor of the track's row, and the track itself (so a slice at any depth
    /// shows). Returns false if the track has no row.
    bool reveal(int slot, profile::TrackId track);
    /// The node of a track row, -1 if none.
    [[nodiscard]] int trackNode(int slot, profile::TrackId track) const;
    /// Index of a node (column 0).
    [[nodiscard]] QModelIndex indexOfNode(int node) const;
    [[nodiscard]] int nodeCount() const { return int(m_nodes.size()); }

    // QAbstractItemModel
    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role) override;
    QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

signals:
    /// Rows appeared or disappeared (collapse, expand, new traces): the view lays out again.
    void rowsLayoutChanged();

private:
    struct Node {
        NodeKind kind = NodeKind::Trace;
        int parent = -1;
        int row = 0; ///< position among its siblings
        std::vector<int> children;
        int slot = 0;
        std::int32_t rank = 0;
        profile::TrackId track = profile::kNoTrack;
        QString label;
        QString detail;
        std::size_t slices = 0;
        int depths = 0; ///< tracks: nesting levels
        bool expanded = true;
        QString key; ///< stable identity across rebuilds (for the collapse state)
    };
    void addTrace(int slot, const profile::Trace& trace, const QString& name);
    int addNode(Node node);
    void invalidateRows();

    std::vector<Node> m_nodes;
    std::vector<int> m_roots;
    std::array<std::vector<int>, 2> m_trackNodes; // per slot: TrackId → node (-1 when none)
    mutable std::vector<VisibleRow> m_rows;
    mutable bool m_rowsValid = false;
};

} // namespace day0::ui
