#pragma once

#include "hardware/cluster.h"
#include "parallel/run.h"
#include "plan/rank_layout.h"

#include <QFont>
#include <QGraphicsScene>

#include <optional>
#include <vector>

class QPainter;

namespace day0::ui {

class GpuItem;
class NodeItem;

/// What the topology shows: the cluster, and when the plan is valid, its rank layout and the
/// memory of every pipeline stage. Plain data, built off the GUI thread.
struct TopologyData {
    hardware::Cluster cluster;
    std::optional<plan::RankLayout> ranks; ///< empty when the plan cannot run
    int world = 0; ///< ranks the layout uses (devices beyond it are idle)
    std::vector<double> stageMemory; ///< bytes per pipeline stage (index = stage)
    double deviceMemory = 0;
};

/// How GPUs are coloured.
enum class TopologyColoring { TensorGroup, PipelineStage, ExpertGroup, DataReplica, ContextGroup };

/// The colour of group `index`: the Okabe–Ito palette (safe for colour-blind readers), its eight
/// colours then repeated lighter and darker, every 8 groups.
QColor groupColor(int index);

/// The smallest size, in points on screen, of the text drawn in the topology.
inline constexpr double kLabelPoints = 9.0;
/// `base` sized so that text painted with `painter`'s current scale reads at `points` on screen.
QFont readableFont(const QPainter& painter, QFont base, double points = kLabelPoints);

/// Members of one colour class (the groups a colouring shows): how many ranks, how many fast-link
/// domains and nodes they sit on.
struct ColorClassExtent {
    int ranks = 0;
    int domains = 0;
    int nodes = 0;
};

/// The cluster as a scene: nodes in a grid on a leaf/spine network, each node's fast-link
/// domain with its GPUs coloured by parallel group. Up to kDetailedLimit GPUs every GPU is its
/// own item; beyond, each node paints its GPUs itself (one item per node) so 2,048 GPUs stay
/// fluid. Zoomed out, nodes collapse to summaries (level of detail). Every text is drawn at
/// kLabelPoints or more on screen at any zoom; one that does not fit at that size is left out
/// (a node's title becomes its number on a badge) and its item's tooltip says it in full.
class TopologyScene : public QGraphicsScene {
    Q_OBJECT
public:
    static constexpr int kDetailedLimit = 512;

    explicit TopologyScene(QObject* parent = nullptr);

    void setTopology(TopologyData data);
    void setColoring(TopologyColoring coloring);
    /// Outlines the members of `rank`'s group under the current colouring (-1: none).
    void setSelectedRank(int rank);

    [[nodiscard]] const TopologyData& topology() const { return m_data; }
    [[nodiscard]] TopologyColoring coloring() const { return m_coloring; }
    [[nodiscard]] int selectedRank() const { return m_selected; }
    /// Items that draw exactly one GPU, and node items (tests).
    [[nodiscard]] int gpuItemCount() const { return int(m_gpuItems.size()); }
    [[nodiscard]] int nodeItemCount() const { return int(m_nodeItems.size()); }
    [[nodiscard]] bool detailed() const { return m_detailed; }

    /// Colour group index of a rank under the current colouring (-1: idle device).
    [[nodiscard]] int colorIndex(int rank) const;
    /// Fill colour of a device.
    [[nodiscard]] QColor deviceColor(int device) const;
    /// True if `device` is in the selected rank's group.
    [[nodiscard]] bool inSelectedGroup(int device) const;
    /// The cluster in one line: devices, nodes, inter- and intra-node links.
    [[nodiscard]] QString clusterSummary() const;
    /// Tooltip of a node (wherever no GPU is under the cursor): its number, GPUs and fast link.
    [[nodiscard]] QString nodeTooltip(int node) const;
    /// Tooltip of a device: rank, node, coordinates, memory.
    [[nodiscard]] QString deviceTooltip(int device) const;
    /// Number of colour groups under the current colouring.
    [[nodiscard]] int colorGroupCount() const;
    /// The extent of the colour class of `rank` (what clicking it outlines).
    [[nodiscard]] ColorClassExtent colorClassExtent(int rank) const;

    /// Progress of a parallel run per rank in [0, 1], drawn on the rank items; empty: none.
    void setRankProgress(std::vector<double> fractions);
    /// A rank's run progress, or -1 when no run is shown.
    [[nodiscard]] double rankProgress(int rank) const;
    /// Bytes a finished run moved per node (index = node), drawn on the node uplinks and under
    /// each node's fast-link domain; empty: none.
    void setLinkTraffic(std::vector<parallel::NodeTraffic> traffic);
    [[nodiscard]] const std::vector<parallel::NodeTraffic>& linkTraffic() const
    {
        return m_traffic;
    }
    /// Traffic labels in the scene (tests).
    [[nodiscard]] int trafficLabelCount() const { return m_trafficLabels; }

signals:
    void rankClicked(int rank);

private:
    void rebuild();
    void addTrafficLabels(int node, QGraphicsLineItem* uplink, QPointF origin, QSizeF size);

    TopologyData m_data;
    TopologyColoring m_coloring = TopologyColoring::PipelineStage;
    int m_selected = -1;
    std::vector<char> m_selectedMembers;
    bool m_detailed = true;
    std::vector<GpuItem*> m_gpuItems;
    std::vector<NodeItem*> m_nodeItems;
    std::vector<double> m_progress;
    std::vector<parallel::NodeTraffic> m_traffic;
    int m_trafficLabels = 0;
};

} // namespace day0::ui
