#pragma once

#include "numerics/comparison_grid.h"
#include "panels/precision/precision_charts.h"

#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace day0::ui {

class JobRunner;
class JobTicket;
class PlotWidget;
struct PrecisionRun;

/// Two training runs' gradient dumps to compare (`day0 train --grad-dump`): the reference's and
/// the target's dump of every step both dumped.
struct TrainingGradientPair {
    QString reference; ///< how the reference run is named ("#11 f64 dp=1,zero=0")
    QString target;
    struct Step {
        std::int64_t step = 0;
        QString referenceDump;
        QString targetDump;
    };
    std::vector<Step> steps; ///< ascending
};

/// The Training view's gradient heatmap: two gradient dumps (`day0 run CKPT --grad --dump`)
/// compared as `day0 compare` does (the target's inject-mode dump `<target>-inject`, written by
/// `day0 run --grad --inject-from REFERENCE`, used when present), drawn as the precision panel
/// draws a comparison (layerHeatmap: layers × sub-modules, one `<sub-module>#grad` column per
/// output gradient), with the first divergence in backward order and each layer's backward's own
/// error. Two training runs that carry gradient dumps (`day0 train --grad-dump`) are compared
/// without picking files (showTrainingPair, a step box for the steps both dumped). The
/// comparison runs off the GUI thread; before one, the plot says what will appear and how to
/// make the dumps.
class GradientView : public QWidget {
    Q_OBJECT
public:
    GradientView(JobRunner& jobs, QWidget* parent = nullptr);
    ~GradientView() override;

    /// Compares the dumps in these folders (reference first) and shows the result.
    void compareDumps(const QString& reference, const QString& target);
    /// Compares two training runs' dumps of a step (the last one both dumped, or the one picked
    /// in the step box), without file picking; the same pair again changes nothing.
    void showTrainingPair(const TrainingGradientPair& pair);
    /// No training pair: `why` says what to select or run; a comparison of a former pair is
    /// taken down (one of picked folders stays).
    void clearTrainingPair(const QString& why);
    /// The step box of a training pair (hidden without one).
    [[nodiscard]] QComboBox* stepChoice() const { return m_step; }
    /// What the training-run row says: the pair and step, or why there is none.
    [[nodiscard]] QString pairText() const;
    /// Recolours the heatmap by `metric`.
    void setMetric(numerics::GridMetric metric);

    [[nodiscard]] PlotWidget* heatmapPlot() const { return m_plot; }
    /// The heatmap drawn, with the comparison row behind each cell.
    [[nodiscard]] const PrecisionHeatmap& heatmap() const { return m_heatmap; }
    /// The comparison shown; null before one.
    [[nodiscard]] std::shared_ptr<const PrecisionRun> comparison() const { return m_run; }
    /// The first divergence and the layers' own errors, as the view says them.
    [[nodiscard]] QString findingsText() const;

signals:
    /// A comparison was shown, or its error.
    void compared();

private:
    void browse(QLineEdit* field, const QString& title);
    void show(std::shared_ptr<const PrecisionRun> run);
    void showError(const QString& message);
    void redraw();
    void showEmptyState();
    void compareStep(int index);

    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    QLineEdit* m_reference = nullptr;
    QLineEdit* m_target = nullptr;
    QPushButton* m_compare = nullptr;
    QComboBox* m_metric = nullptr;
    std::optional<TrainingGradientPair> m_pair;
    bool m_shownFromPair = false; ///< the comparison shown is the training pair's
    QLabel* m_findings = nullptr;
    PlotWidget* m_plot = nullptr;
    QLabel* m_pairLabel = nullptr;
    QComboBox* m_step = nullptr;
    PrecisionHeatmap m_heatmap;
    std::shared_ptr<const PrecisionRun> m_run;
};

} // namespace day0::ui
