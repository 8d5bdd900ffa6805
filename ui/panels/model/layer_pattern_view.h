#pragma once

#include "model/model_summary.h"

#include <QWidget>

#include <vector>

namespace day0::ui {

/// The model's layers as one cell each, in order, wrapping over rows: the fill says the layer's
/// token mixer (attention, sliding window, DSA, compressed, Gated DeltaNet, Mamba-2, ...), a
/// bar at the bottom its feed-forward (dense, MoE, none), a dashed outline an MTP layer. A
/// legend names the kinds present; hovering a cell gives the layer's details. Paints only what
/// it was given (no model logic).
class LayerPatternView : public QWidget {
    Q_OBJECT
public:
    explicit LayerPatternView(QWidget* parent = nullptr);

    /// Shows `cells` (model::layerPattern); empty clears the view.
    void setPattern(std::vector<model::LayerCell> cells);
    [[nodiscard]] const std::vector<model::LayerCell>& pattern() const { return m_cells; }

    /// The cell under `pos`, -1 when none (for tooltips and tests).
    [[nodiscard]] int cellAt(QPoint pos) const;
    /// The tooltip text of cell `index`.
    [[nodiscard]] QString cellText(int index) const;
    /// The legend's entries, in the order drawn ("attention", "sliding 128", "MoE", ...).
    [[nodiscard]] QStringList legend() const;

    [[nodiscard]] QSize sizeHint() const override;
    [[nodiscard]] QSize minimumSizeHint() const override;
    [[nodiscard]] bool hasHeightForWidth() const override { return true; }
    [[nodiscard]] int heightForWidth(int width) const override;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    [[nodiscard]] int columnsFor(int width) const;
    [[nodiscard]] QRect cellRect(int index, int columns) const;
    [[nodiscard]] int legendTop(int columns) const;
    /// Where each legend entry goes at `width`, flowed left to right by its text's width.
    [[nodiscard]] std::vector<QPoint> legendPositions(int width) const;

    std::vector<model::LayerCell> m_cells;
};

/// The fill colour of a mixer kind, shared with the legend.
QColor mixerColor(model::MixerKind kind);
/// The fill colour of one cell (compressed layers by their ratio).
QColor cellColor(const model::LayerCell& cell);

} // namespace day0::ui
