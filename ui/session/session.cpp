#include "session/session.h"

namespace day0::ui {

Session::Session(QObject* parent)
    : QObject(parent)
{
}

Session::~Session() = default;

void Session::setModel(std::shared_ptr<const model::LayerGraph> graph, const QString& source)
{
    m_graph = std::move(graph);
    m_modelSource = source;
    m_selectedAnchor.clear();
    emit modelChanged();
}

void Session::selectAnchor(const QString& anchor)
{
    if (anchor == m_selectedAnchor) {
        return;
    }
    m_selectedAnchor = anchor;
    emit anchorSelected(anchor);
}

void Session::selectRank(int rank)
{
    if (rank == m_selectedRank) {
        return;
    }
    m_selectedRank = rank;
    emit rankSelected(rank);
}

} // namespace day0::ui
