#pragma once

#include "model/layer_graph.h"

#include <QAbstractItemModel>

#include <memory>
#include <vector>

namespace day0::ui {

/// The layer graph as a tree: blocks → (expert groups → experts →) tensors, with shapes, dtypes,
/// parallel roles, parameter counts and bytes. Routed experts are grouped so a 384-expert layer
/// stays navigable. Read-only; rebuilt by setGraph.
class ModelTreeModel final : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Name, Shape, DType, Role, Parameters, Bytes, ColumnCount };
    enum Roles {
        SortRole = Qt::UserRole, ///< numbers for numeric columns, text otherwise
        AnchorRole, ///< HF module path or tensor name of the row
    };

    explicit ModelTreeModel(QObject* parent = nullptr);
    ~ModelTreeModel() override;

    void setGraph(std::shared_ptr<const model::LayerGraph> graph);

    [[nodiscard]] QModelIndex index(
        int row, int column, const QModelIndex& parent = {}) const final;
    [[nodiscard]] QModelIndex parent(const QModelIndex& child) const final;
    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const final;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    enum class NodeKind { Root, Block, ExpertGroup, Expert, Tensor };
    struct Node {
        NodeKind kind = NodeKind::Root;
        int parent = -1;
        int row = 0;
        int block = -1;
        int tensor = -1;
        int expert = -1;
        std::int64_t params = 0;
        std::int64_t bytes = 0;
        std::vector<int> children;
    };
    int addNode(Node node);
    void buildBlock(int blockIndex);
    [[nodiscard]] QString nameOf(const Node& node) const;
    [[nodiscard]] QString anchorOf(const Node& node) const;

    std::shared_ptr<const model::LayerGraph> m_graph;
    std::vector<Node> m_nodes; ///< m_nodes[0] is the invisible root
};

} // namespace day0::ui
