#pragma once

#include <QWidget>

#include <map>

class QFormLayout;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;
class QTreeView;

namespace day0::ui {

class CheckpointView;
class JobRunner;
class LayerPatternView;
class ModelTreeModel;
class ParameterTableModel;
class PlotWidget;
class Session;

/// The open model at a glance: architecture summary (family, layers, widths, attention kind,
/// experts, RoPE scaling, vision tower), the parameter breakdown as a table and a chart, and the
/// tree of blocks and weights with shapes, dtypes and parallel roles. Selecting a row selects
/// its anchor in the session. A second tab holds the open checkpoint (CheckpointView): its tensors
/// against the architecture and the verification of its files.
class ModelPanel : public QWidget {
    Q_OBJECT
public:
    ModelPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);

    [[nodiscard]] ModelTreeModel* treeModel() const { return m_treeModel; }
    [[nodiscard]] ParameterTableModel* parameterModel() const { return m_paramModel; }
    [[nodiscard]] PlotWidget* parameterChart() const { return m_chart; }
    [[nodiscard]] CheckpointView* checkpointView() const { return m_checkpoint; }
    [[nodiscard]] LayerPatternView* layerPattern() const { return m_pattern; }
    /// The partial-reading banner (hidden for an exact reading).
    [[nodiscard]] QLabel* partialBanner() const { return m_partialBanner; }
    /// Text of a summary field ("Attention", "Experts", ...), for tests.
    [[nodiscard]] QString summaryField(const QString& name) const;

private:
    void onModelChanged();
    void updateSummary();
    void updateChart();
    void setField(const QString& name, const QString& value);

    Session& m_session;
    QFormLayout* m_form = nullptr;
    std::map<QString, QLabel*> m_fields;
    QLabel* m_warnings = nullptr;
    QLabel* m_partialBanner = nullptr;
    LayerPatternView* m_pattern = nullptr;
    ParameterTableModel* m_paramModel = nullptr;
    QTableView* m_paramView = nullptr;
    PlotWidget* m_chart = nullptr;
    ModelTreeModel* m_treeModel = nullptr;
    QSortFilterProxyModel* m_treeProxy = nullptr;
    QTreeView* m_tree = nullptr;
    QLineEdit* m_filter = nullptr;
    QTabWidget* m_tabs = nullptr;
    CheckpointView* m_checkpoint = nullptr;
};

} // namespace day0::ui
