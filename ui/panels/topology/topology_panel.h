#pragma once

#include <QGraphicsView>
#include <QWidget>

#include <memory>

class QComboBox;
class QLabel;

namespace day0::ui {

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

private:
    void schedule();
    void display(TopologyData&& data, const QString& error);
    void updateLegend();

    Session& m_session;
    JobRunner& m_jobs;
    std::unique_ptr<JobTicket> m_ticket;
    TopologyScene* m_scene = nullptr;
    TopologyView* m_view = nullptr;
    QComboBox* m_coloring = nullptr;
    QLabel* m_legend = nullptr;
    QString m_error;
};

} // namespace day0::ui
