#pragma once

#include "actions/train_record.h"
#include "panels/runs/run_store_access.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <string>
#include <vector>

class QCheckBox;
class QLabel;
class QTabWidget;
class QTreeWidget;

namespace day0::ui {

class JobRunner;
class GradientView;
class JobTicket;
class PlotWidget;
class Session;
class StoreFollower;

/// The training runs of the store in effect (`day0 train` records them: actions/train_record.h)
/// and their loss curves and gradient norms overlaid, one colour per selected run from the
/// Okabe–Ito palette (told apart with colour blindness), the legend naming run, model,
/// precision, plan and finish time. Only runs of one model are overlaid unless the user asks
/// for others too, and either way a run of another model is said in red. Follows the store as
/// the Runs panel does (a run recorded, or a cheap check every two seconds); all store access
/// runs off the GUI thread. Under the curves, the newest selected run with several ranks shows
/// each rank's memory against the planner's. A second tab compares two gradient dumps and shows
/// their gradient error heatmap (GradientView): those of two selected runs recorded with
/// `day0 train --grad-dump` (B, the newer or the non-fp64 one, against A), or picked folders.
class TrainingPanel : public QWidget {
    Q_OBJECT
public:
    TrainingPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~TrainingPanel() override;

    /// Re-reads the training runs now.
    void refresh();
    /// Selects these runs (those listed) and overlays them.
    void selectRuns(const std::vector<RunId>& ids);
    /// Overlays runs of other models than the first selected run's too.
    void setOtherModelsShown(bool shown);

    /// The runs listed, newest first.
    [[nodiscard]] const std::vector<actions::StoredTrainingRun>& runs() const { return m_listed; }
    /// The runs whose curves are drawn, in series order.
    [[nodiscard]] std::vector<RunId> overlaidRuns() const { return m_overlaid; }
    [[nodiscard]] PlotWidget* lossPlot() const { return m_loss; }
    [[nodiscard]] PlotWidget* gradNormPlot() const { return m_gradNorm; }
    [[nodiscard]] QTreeWidget* runList() const { return m_list; }
    /// The gradient heatmap tab.
    [[nodiscard]] GradientView* gradientView() const { return m_gradients; }
    /// Per-rank memory of the newest selected run with several ranks (rank, held at the
    /// step's peak, planner's estimate, ratio); hidden when no such run is selected.
    [[nodiscard]] QTreeWidget* rankMemoryTable() const { return m_rankMemory; }
    /// The line above that table: which run it is, or empty.
    [[nodiscard]] QString rankMemoryCaption() const;
    /// Brings the gradient heatmap tab to the front.
    void showGradientTab();
    /// The red line about runs of other models; empty when there is none.
    [[nodiscard]] QString modelWarning() const;
    [[nodiscard]] QString summaryText() const;

signals:
    /// A listing arrived and the list shows it.
    void listed();

private:
    struct Listing {
        std::vector<actions::StoredTrainingRun> runs;
        std::optional<StoreStamp> stamp;
        std::string store;
        std::string error;
    };

    void showListing(Listing&& listing);
    void selectionChanged();
    void plot(const std::vector<const actions::StoredTrainingRun*>& runs);
    void showGradientPair(const std::vector<const actions::StoredTrainingRun*>& selected);
    void showRankMemory(const std::vector<const actions::StoredTrainingRun*>& selected);

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_listTicket;
    QTreeWidget* m_list = nullptr;
    QCheckBox* m_otherModels = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_warning = nullptr;
    QTabWidget* m_tabs = nullptr;
    GradientView* m_gradients = nullptr;
    PlotWidget* m_loss = nullptr;
    PlotWidget* m_gradNorm = nullptr;
    QLabel* m_rankCaption = nullptr;
    QTreeWidget* m_rankMemory = nullptr;
    std::vector<actions::StoredTrainingRun> m_listed;
    std::vector<RunId> m_overlaid;
    StoreFollower* m_follower = nullptr;
    bool m_autoSelect = true; ///< select the newest run and its model's others on first listing
    bool m_restoring = false;
};

} // namespace day0::ui
