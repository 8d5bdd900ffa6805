#pragma once

#include "model/layer_graph.h"

#include <QObject>
#include <QString>

#include <memory>

namespace day0::ui {

/// The state every panel observes: the open model, the cluster, the workload, the current plan,
/// and the selection. Panels read it and change it through its setters; they learn about each
/// other's changes only through its signals and never talk to each other. GUI-thread object.
class Session : public QObject {
    Q_OBJECT
public:
    explicit Session(QObject* parent = nullptr);
    ~Session() override;

    // --- model -----------------------------------------------------------------------------
    [[nodiscard]] bool hasModel() const { return m_graph != nullptr; }
    /// The open model's graph (spec included), or nullptr.
    [[nodiscard]] std::shared_ptr<const model::LayerGraph> graph() const { return m_graph; }
    /// How the model was opened: a bundled name, a folder or a config.json path.
    [[nodiscard]] QString modelSource() const { return m_modelSource; }
    /// Replaces the model; emits modelChanged.
    void setModel(std::shared_ptr<const model::LayerGraph> graph, const QString& source);

    // --- selection ---------------------------------------------------------------------------
    /// Anchor of the selected block or tensor name ("model.layers.7.mlp"), empty for none.
    [[nodiscard]] QString selectedAnchor() const { return m_selectedAnchor; }
    void selectAnchor(const QString& anchor);
    /// Selected global rank, -1 for none.
    [[nodiscard]] int selectedRank() const { return m_selectedRank; }
    void selectRank(int rank);

signals:
    void modelChanged();
    void anchorSelected(const QString& anchor);
    void rankSelected(int rank);
    /// A short message for the status bar (errors are shown by whoever caused them).
    void statusMessage(const QString& message);

private:
    std::shared_ptr<const model::LayerGraph> m_graph;
    QString m_modelSource;
    QString m_selectedAnchor;
    int m_selectedRank = -1;
};

} // namespace day0::ui
