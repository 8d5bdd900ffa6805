// The comparison views of the precision panel (precision_panel.h): the heatmap by layer or by
// token position, error against depth, the clicked cell's detail and its menu.
#include "exec/precision_run.h"
#include "history/layer_metrics.h"
#include "jobs/job_runner.h"
#include "panels/precision/precision_panel.h"
#include "panels/precision/precision_work.h"
#include "panels/precision/target_precision_box.h"
#include "session/session.h"
#include "widgets/backend_choice.h"
#include "widgets/colors.h"
#include "widgets/elided_label.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

namespace day0::ui {

using numerics::GridMetric;

namespace {

/// A token-position grid computed off the GUI thread.
struct Grid {
    Result<numerics::PositionGrid> grid;
};

} // namespace

int PrecisionPanel::heatmapRowOfLayer(int layer) const
{
    for (std::size_t r = 0; r < m_heatmap.rowLayers.size(); ++r) {
        if (m_heatmap.rowLayers[r] == layer) {
            return int(r);
        }
    }
    return -1;
}

void PrecisionPanel::setPositionsView(bool positions)
{
    m_view->setCurrentIndex(positions ? 1 : 0);
}

void PrecisionPanel::setMetric(GridMetric metric)
{
    m_metric->setCurrentIndex(std::max(0, m_metric->findData(int(metric))));
}

void PrecisionPanel::refreshViews()
{
    if (!m_primary) {
        return;
    }
    const auto metric = GridMetric(m_metric->currentData().toInt());
    updateDepth();
    if (m_view->currentIndex() == 0) {
        m_gridTicket->cancel();
        showHeatmap(layerHeatmap(m_primary, metric));
        return;
    }
    // Per-position metrics read every stored tensor again: off the GUI thread.
    m_jobs.start<Grid>(
        *m_gridTicket, tr("Error per token position"), this,
        [run = m_primary, metric](Progress&, std::stop_token) {
            return Grid { numerics::positionGrid(
                run->comparison, *run->reference, *run->target, run->local.get(), metric) };
        },
        [this, run = m_primary, metric](Grid&& grid) {
            if (run != m_primary) {
                return;
            }
            if (!grid.grid) {
                showError(toQString(grid.grid.error().message));
                showHeatmap({});
                return;
            }
            showHeatmap(positionHeatmap(run, *grid.grid, metric));
        });
}

void PrecisionPanel::updateDepth()
{
    if (m_primary) {
        showDepth(*m_depthPlot, *m_primary, m_overlay.get(),
            GridMetric(m_metric->currentData().toInt()), m_depthSubModule);
    }
}

void PrecisionPanel::showHeatmap(PrecisionHeatmap&& heatmap)
{
    m_heatmap = std::move(heatmap);
    m_heatmapPlot->clear();
    if (m_primary) {
        m_heatmapPlot->setTitle(tr("%1 — %2").arg(toQString(m_primary->label),
            m_heatmap.positions ? tr("anchors × token positions") : tr("layers × sub-modules")));
    }
    m_heatmapPlot->setHeatmap(m_heatmap.data);
    m_heatmapPlot->setAxisLabel(
        PlotWidget::Axis::X, m_heatmap.positions ? tr("token position (g: generated)") : QString());
    m_heatmapPlot->rescaleAndReplot();
    selectDefaultCell();
}

void PrecisionPanel::selectDefaultCell()
{
    // The first divergence if it is on the map, else the cell with the largest value.
    int best = -1;
    double bestValue = -std::numeric_limits<double>::infinity();
    const auto& c = m_primary->comparison;
    for (int i = 0; i < int(m_heatmap.cellRows.size()); ++i) {
        const int row = m_heatmap.cellRows[std::size_t(i)];
        if (row < 0) {
            continue;
        }
        if (c.firstDivergence && std::size_t(row) == *c.firstDivergence) {
            best = i;
            break;
        }
        const double v = m_heatmap.data.values[i];
        if (std::isfinite(v) && v > bestValue) {
            bestValue = v;
            best = i;
        }
    }
    if (best < 0) {
        m_detail.reset();
        showDetail(*m_histogramPlot, *m_scatterPlot, *m_ownPlot, nullptr);
        return;
    }
    selectCell(best / m_heatmap.data.columns, best % m_heatmap.data.columns);
}

void PrecisionPanel::selectCell(int row, int column)
{
    const int index = m_heatmap.rowAt(row, column);
    if (index < 0 || !m_primary) {
        return;
    }
    const std::int64_t position = m_heatmap.positions ? column : -1;
    m_heatmapPlot->setHeatmapSelection(row, column);
    // The depth chart follows the selected sub-module through the layers.
    const auto& name = m_primary->comparison.rows[std::size_t(index)].name;
    const auto at = history::parseAnchor(name);
    const std::string subModule = at.layer >= 0 ? at.subModule : std::string();
    if (subModule != m_depthSubModule) {
        m_depthSubModule = subModule;
        updateDepth();
    }
    m_session.selectAnchor(toQString(m_primary->comparison.rows[std::size_t(index)].name));
    m_jobs.start<Result<CellDetail>>(
        *m_detailTicket, tr("Error detail"), this,
        [run = m_primary, index, position](
            Progress&, std::stop_token) { return cellDetail(*run, std::size_t(index), position); },
        [this](Result<CellDetail>&& detail) {
            if (!detail) {
                showError(toQString(detail.error().message));
                return;
            }
            m_detail = std::move(*detail);
            showDetail(*m_histogramPlot, *m_scatterPlot, *m_ownPlot, &*m_detail);
        });
}

void PrecisionPanel::showCellMenu(int row, int column, const QPoint& globalPos)
{
    if (!m_primary || row < 0 || row >= int(m_heatmap.rowLayers.size())) {
        return;
    }
    const int layer = m_heatmap.rowLayers[std::size_t(row)];
    QMenu menu(this);
    menu.addAction(tr("Show detail"), this, [this, row, column] { selectCell(row, column); });
    if (layer >= 0) {
        const QString reference = m_primary->request
            ? toQString(std::string(exec::precisionName(upcastMode(m_primary->request->reference))))
            : tr("the reference precision");
        QAction* upcast
            = menu.addAction(tr("Upcast layer %1 to %2 and rerun").arg(layer).arg(reference), this,
                [this, layer] { upcastLayer(layer); });
        upcast->setEnabled(m_primary->request.has_value() && !m_runTicket->busy());
        if (!m_primary->request) {
            upcast->setToolTip(tr("Only runs started from this panel can be rerun."));
        }
    }
    menu.exec(globalPos);
}

} // namespace day0::ui
