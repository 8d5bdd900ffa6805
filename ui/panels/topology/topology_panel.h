#pragma once

#include <QColor>
#include <QGraphicsView>
#include <QList>
#include <QWidget>

#include <memory>

class QComboBox;
class QLabel;
class QTimer;
class QToolButton;

namespace day0::parallel {
struct RankProgress;
}

namespace day0::ui {

class ElidedLabel;
class JobRunner;
class JobTicket;
class Session;
class TopologyScene;
struct TopologyData;

/// A QGraphicsView that zooms with the wheel around the cursor and pans by dragging; fits the
/// scene until the user zooms.
class TopologyView : public QGraphicsView {
    Q_OBJECT
public:
    explicit TopologyView(QWidget* parent = nullptr);
    /// Fits the whole scene and returns to following the window size.
    void fitAll();

protected:
    void wheelEvent(QWheelEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    bool m_userZoomed = false;
};

/// The cluster with the session's plan on it: nodes, GPUs, fast domains and the network, GPUs
/// coloured by TP group, PP stage, EP group, DP replica or CP group; hover for a GPU's rank,
/// coordinates and memory; click to outline its group.
class TopologyPanel : public QWidget {
    Q_OBJECT
public:
    TopologyPanel(Session& session, JobRunner& jobs, QWidget* parent = nullptr);
    ~TopologyPanel() override;

    [[nodiscard]] TopologyScene* scene() const { return m_scene; }
    [[nodiscard]] TopologyView* view() const { return m_view; }
    /// The last parallel run's summary line, or its error (tests).
    [[nodiscard]] QString runStatus() const;
    /// The legend line and the colour key as shown, and the key's colours in group order (tests).
    [[nodiscard]] QString legendText() const;
    [[nodiscard]] QString keyText() const;
    [[nodiscard]] const QList<QColor>& keyColors() const { return m_keyColors; }
    /// The cluster's headline above the drawing (tests).
    [[nodiscard]] QString clusterText() const;

    /// Runs the session's plan on in-process ranks: on the open checkpoint when the model is a
    /// folder with weights, else on a shrunk checkpoint of its architecture sized for the plan.
    /// A finished run is recorded in the run store (actions::parallelRunRecord, as `day0 run
    /// --plan` records it) and announced through Session::runRecorded; a cancelled or failed
    /// one is not.
    void runPlan();
    /// Cancels a running plan run.
    void cancelRun();

private:
    void schedule();
    void display(TopologyData&& data, const QString& error);
    void updateLegend();
    void pollRunProgress();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    TopologyScene* m_scene = nullptr;
    TopologyView* m_view = nullptr;
    QComboBox* m_coloring = nullptr;
    ElidedLabel* m_cluster = nullptr; ///< the cluster's headline
    QLabel* m_legend = nullptr;
    QLabel* m_key = nullptr; ///< a swatch per colour
    QList<QColor> m_keyColors;
    QString m_error;
    std::unique_ptr<JobTicket> m_runTicket;
    std::shared_ptr<parallel::RankProgress> m_rankProgress;
    QToolButton* m_run = nullptr;
    QComboBox* m_backend = nullptr; ///< where the ranks compute ("cpu" or a backend plugin)
    QToolButton* m_cancel = nullptr;
    QLabel* m_runStatus = nullptr;
    QString m_scaleNote; ///< what "Run with this plan" scaled to fit in-process ranks
    QTimer* m_progressTimer = nullptr;
};

} // namespace day0::ui
