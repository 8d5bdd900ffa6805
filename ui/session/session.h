#pragma once

#include "hardware/cluster.h"
#include "model/layer_graph.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"
#include "plan/workload.h"
#include "profile/trace.h"

#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <utility>

namespace day0::ui {

/// The state every panel observes: the open model, the cluster, the workload, the current plan,
/// the open traces, and the selection. Panels read it and change it through its setters; they learn
/// about each other's changes only through its signals and never talk to each other. GUI-thread
/// object.
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
    /// What the planning core needs from the model (computed once when it is opened).
    [[nodiscard]] std::shared_ptr<const plan::ModelSummary> summary() const { return m_summary; }
    /// Replaces the model; emits modelChanged.
    void setModel(std::shared_ptr<const model::LayerGraph> graph,
        std::shared_ptr<const plan::ModelSummary> summary, const QString& source);

    // --- cluster, workload, plan -----------------------------------------------------------
    [[nodiscard]] const hardware::Cluster& cluster() const { return m_cluster; }
    /// The cluster argument it came from ("h200:32x8" or a file).
    [[nodiscard]] QString clusterSource() const { return m_clusterSource; }
    void setCluster(const hardware::Cluster& cluster, const QString& source);
    [[nodiscard]] const plan::Workload& workload() const { return m_workload; }
    void setWorkload(const plan::Workload& workload);
    /// The plan the memory and topology panels show (fields at 0 are derived by the core).
    [[nodiscard]] const plan::ParallelPlan& plan() const { return m_plan; }
    void setPlan(const plan::ParallelPlan& plan);
    /// A plan the user asked for (`--plan`): the planner does not replace it with its best
    /// layout when the next model opens. takePlanPin() answers once and clears the pin.
    void pinPlan() { m_planPinned = true; }
    [[nodiscard]] bool takePlanPin() { return std::exchange(m_planPinned, false); }
    /// True once model and cluster are set, so panels can compute.
    [[nodiscard]] bool ready() const { return m_summary && m_cluster.worldSize() > 0; }

    // --- traces ------------------------------------------------------------------------------
    /// The trace under study, and a second one stacked below it for comparison.
    enum class TraceSlot { Primary = 0, Comparison = 1 };
    Q_ENUM(TraceSlot)
    /// The trace in `slot`, or nullptr.
    [[nodiscard]] std::shared_ptr<const profile::Trace> trace(
        TraceSlot slot = TraceSlot::Primary) const;
    /// The file(s) it came from, as given ("a.json", or "r0.json, r1.json" for several ranks).
    [[nodiscard]] QString traceSource(TraceSlot slot = TraceSlot::Primary) const;
    /// Replaces the trace in `slot` (nullptr closes it); emits traceChanged. A time range selected
    /// in that slot is cleared.
    void setTrace(
        TraceSlot slot, std::shared_ptr<const profile::Trace> trace, const QString& source);
    /// Asks the panel that imports traces to open `paths` (several files: one trace, one rank
    /// each) into `slot`; with no paths it asks the user. Emits traceOpenRequested.
    void requestTraceOpen(const QStringList& paths, TraceSlot slot = TraceSlot::Primary);

    /// True when the workbench opened on its embedded default (no model, trace or checkpoint
    /// named, no screenshot): panels may show demo data (the timeline runs the demo checkpoint).
    [[nodiscard]] bool demo() const { return m_demo; }
    void setDemo(bool demo) { m_demo = demo; }

    // --- checkpoints -------------------------------------------------------------------------
    /// Asks the model panel to open the checkpoint at `path` (a folder, .safetensors or .gguf);
    /// with an empty path it asks the user. Emits checkpointOpenRequested.
    void requestCheckpointOpen(const QString& path);

    // --- selection ---------------------------------------------------------------------------
    /// A time range [start, end) in ns on the clock of the trace in `slot`.
    struct TimeRange {
        TraceSlot slot = TraceSlot::Primary;
        qint64 start = 0;
        qint64 end = 0;
        [[nodiscard]] bool empty() const { return end <= start; }
        bool operator==(const TimeRange&) const = default;
    };
    /// The selected time range (empty for none).
    [[nodiscard]] TimeRange selectedTimeRange() const { return m_timeRange; }
    void selectTimeRange(const TimeRange& range);
    /// Anchor of the selected block or tensor name ("model.layers.7.mlp"), empty for none.
    [[nodiscard]] QString selectedAnchor() const { return m_selectedAnchor; }
    void selectAnchor(const QString& anchor);
    /// Selected global rank, -1 for none.
    [[nodiscard]] int selectedRank() const { return m_selectedRank; }
    void selectRank(int rank);

    // --- runs --------------------------------------------------------------------------------
    /// Tells the observers (the runs panel) that this process recorded run `id` in the store.
    void announceRecordedRun(qint64 id);

signals:
    void modelChanged();
    void clusterChanged();
    void workloadChanged();
    void planChanged();
    void anchorSelected(const QString& anchor);
    void rankSelected(int rank);
    /// A panel recorded a run in the store (history::storePath()).
    void runRecorded(qint64 id);
    void traceChanged(day0::ui::Session::TraceSlot slot);
    void traceOpenRequested(const QStringList& paths, day0::ui::Session::TraceSlot slot);
    /// Importing a requested trace failed; the message names the file and what is wrong.
    void traceOpenFailed(const QString& message);
    void checkpointOpenRequested(const QString& path);
    void timeRangeSelected(const day0::ui::Session::TimeRange& range);
    /// A short message for the status bar (errors are shown by whoever caused them).
    void statusMessage(const QString& message);

private:
    std::shared_ptr<const model::LayerGraph> m_graph;
    std::shared_ptr<const plan::ModelSummary> m_summary;
    hardware::Cluster m_cluster;
    QString m_clusterSource;
    plan::Workload m_workload;
    plan::ParallelPlan m_plan;
    bool m_planPinned = false;
    QString m_modelSource;
    QString m_selectedAnchor;
    int m_selectedRank = -1;
    std::shared_ptr<const profile::Trace> m_traces[2];
    QString m_traceSources[2];
    TimeRange m_timeRange;
    bool m_demo = false;
};

} // namespace day0::ui
