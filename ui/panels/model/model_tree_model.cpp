#include "panels/model/model_tree_model.h"

#include "widgets/formatting.h"

#include <QStringList>

namespace day0::ui {

ModelTreeModel::ModelTreeModel(QObject* parent)
    : QAbstractItemModel(parent)
{
    m_nodes.push_back(Node {});
}

ModelTreeModel::~ModelTreeModel() = default;

int ModelTreeModel::addNode(Node node)
{
    const int index = int(m_nodes.size());
    auto& parent = m_nodes[std::size_t(node.parent)];
    node.row = int(parent.children.size());
    parent.children.push_back(index);
    m_nodes.push_back(std::move(node));
    return index;
}

void ModelTreeModel::buildBlock(int blockIndex)
{
    const auto& block = m_graph->blocks[std::size_t(blockIndex)];
    const int blockNode = addNode({ NodeKind::Block, 0, 0, blockIndex, -1, -1, 0, 0, {} });
    int groupNode = -1;
    std::vector<int> expertNodes;
    for (int t = 0; t < int(block.tensors.size()); ++t) {
        const auto& tensor = block.tensors[std::size_t(t)];
        const std::int64_t params = tensor.params();
        int parent = blockNode;
        if (tensor.expert >= 0) {
            if (groupNode < 0) {
                groupNode = addNode(
                    { NodeKind::ExpertGroup, blockNode, 0, blockIndex, -1, -1, 0, 0, {} });
            }
            if (std::size_t(tensor.expert) >= expertNodes.size()) {
                expertNodes.resize(std::size_t(tensor.expert) + 1, -1);
            }
            int& expertNode = expertNodes[std::size_t(tensor.expert)];
            if (expertNode < 0) {
                expertNode = addNode(
                    { NodeKind::Expert, groupNode, 0, blockIndex, t, tensor.expert, 0, 0, {} });
            }
            parent = expertNode;
        }
        addNode({ NodeKind::Tensor, parent, 0, blockIndex, t, tensor.expert, params, tensor.bytes(),
            {} });
        for (int p = parent; p > 0; p = m_nodes[std::size_t(p)].parent) {
            m_nodes[std::size_t(p)].params += params;
            m_nodes[std::size_t(p)].bytes += tensor.bytes();
        }
    }
}

void ModelTreeModel::setGraph(std::shared_ptr<const model::LayerGraph> graph)
{
    beginResetModel();
    m_graph = std::move(graph);
    m_nodes.clear();
    m_nodes.push_back(Node {});
    if (m_graph) {
        for (int b = 0; b < int(m_graph->blocks.size()); ++b) {
            buildBlock(b);
        }
    }
    endResetModel();
}

QModelIndex ModelTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (column < 0 || column >= ColumnCount || row < 0) {
        return {};
    }
    const int parentNode = parent.isValid() ? int(parent.internalId()) : 0;
    if (parent.isValid() && parent.column() != 0) {
        return {};
    }
    const auto& children = m_nodes[std::size_t(parentNode)].children;
    if (row >= int(children.size())) {
        return {};
    }
    return createIndex(row, column, quintptr(children[std::size_t(row)]));
}

QModelIndex ModelTreeModel::parent(const QModelIndex& child) const
{
    if (!child.isValid()) {
        return {};
    }
    const int parentNode = m_nodes[std::size_t(child.internalId())].parent;
    if (parentNode <= 0) {
        return {};
    }
    return createIndex(m_nodes[std::size_t(parentNode)].row, 0, quintptr(parentNode));
}

int ModelTreeModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid() && parent.column() != 0) {
        return 0;
    }
    const int node = parent.isValid() ? int(parent.internalId()) : 0;
    return int(m_nodes[std::size_t(node)].children.size());
}

int ModelTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QString ModelTreeModel::nameOf(const Node& node) const
{
    const auto& block = m_graph->blocks[std::size_t(node.block)];
    switch (node.kind) {
    case NodeKind::Block:
        return toQString(block.anchor);
    case NodeKind::ExpertGroup:
        return tr("routed experts (%1)").arg(node.children.size());
    case NodeKind::Expert:
        return tr("expert %1").arg(node.expert);
    case NodeKind::Tensor: {
        // Show the name relative to the block: the full HF name is in the tooltip and anchor.
        const auto& name = block.tensors[std::size_t(node.tensor)].name;
        const auto prefix = block.anchor + ".";
        return toQString(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name);
    }
    case NodeKind::Root:
        break;
    }
    return {};
}

QString ModelTreeModel::anchorOf(const Node& node) const
{
    const auto& block = m_graph->blocks[std::size_t(node.block)];
    switch (node.kind) {
    case NodeKind::Block:
        return toQString(block.anchor);
    case NodeKind::ExpertGroup:
        return toQString(block.anchor) + QStringLiteral(".mlp.experts");
    case NodeKind::Expert:
        return toQString(block.anchor) + QStringLiteral(".mlp.experts.")
            + QString::number(node.expert);
    case NodeKind::Tensor:
        return toQString(block.tensors[std::size_t(node.tensor)].name);
    case NodeKind::Root:
        break;
    }
    return {};
}

QVariant ModelTreeModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !m_graph) {
        return {};
    }
    const Node& node = m_nodes[std::size_t(index.internalId())];
    const model::TensorSpec* tensor = node.kind == NodeKind::Tensor
        ? &m_graph->blocks[std::size_t(node.block)].tensors[std::size_t(node.tensor)]
        : nullptr;
    const int column = index.column();
    if (role == AnchorRole) {
        return anchorOf(node);
    }
    if (role == Qt::ToolTipRole) {
        return anchorOf(node);
    }
    if (role == Qt::TextAlignmentRole) {
        return column >= Parameters ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    }
    if (role != Qt::DisplayRole && role != SortRole) {
        return {};
    }
    const bool sort = role == SortRole;
    switch (Column(column)) {
    case Name:
        return nameOf(node);
    case Shape: {
        if (!tensor) {
            return QString();
        }
        QStringList dims;
        for (auto d : tensor->shape) {
            dims << QString::number(d);
        }
        return QString(QStringLiteral("[") + dims.join(QStringLiteral(", ")) + QStringLiteral("]"));
    }
    case DType:
        return tensor ? toQString(std::string(dtypeName(tensor->dtype))) : QString();
    case Role:
        if (!tensor) {
            return QString();
        }
        return QString(toQString(model::parallelRoleName(tensor->role))
            + (tensor->isExpert() ? tr(" · expert") : QString()));
    case Parameters:
        return sort ? QVariant(qlonglong(node.params)) : QVariant(countText(double(node.params)));
    case Bytes:
        return sort ? QVariant(qlonglong(node.bytes))
                    : QVariant(bytesText(day0::Bytes(node.bytes)));
    case ColumnCount:
        break;
    }
    return {};
}

QVariant ModelTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (Column(section)) {
    case Name:
        return tr("Block / tensor");
    case Shape:
        return tr("Shape");
    case DType:
        return tr("DType");
    case Role:
        return tr("Parallel role");
    case Parameters:
        return tr("Parameters");
    case Bytes:
        return tr("Bytes");
    case ColumnCount:
        break;
    }
    return {};
}

} // namespace day0::ui
