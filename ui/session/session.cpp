#include "session/session.h"

namespace day0::ui {

Session::Session(QObject* parent)
    : QObject(parent)
{
}

Session::~Session() = default;

void Session::setModel(std::shared_ptr<const model::LayerGraph> graph,
    std::shared_ptr<const plan::ModelSummary> summary, const QString& source)
{
    m_graph = std::move(graph);
    m_summary = std::move(summary);
    m_modelSource = source;
    m_selectedAnchor.clear();
    emit modelChanged();
}

void Session::setCluster(const hardware::Cluster& cluster, const QString& source)
{
    m_cluster = cluster;
    m_clusterSource = source;
    m_selectedRank = -1;
    emit clusterChanged();
}

void Session::setWorkload(const plan::Workload& workload)
{
    m_workload = workload;
    emit workloadChanged();
}

void Session::setPlan(const plan::ParallelPlan& plan)
{
    if (plan == m_plan) {
        return;
    }
    m_plan = plan;
    emit planChanged();
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

void Session::announceRecordedRun(qint64 id) { emit runRecorded(id); }
std::shared_ptr<const profile::Trace> Session::trace(TraceSlot slot) const
{
    return m_traces[int(slot)];
}

QString Session::traceSource(TraceSlot slot) const { return m_traceSources[int(slot)]; }

void Session::setTrace(
    TraceSlot slot, std::shared_ptr<const profile::Trace> trace, const QString& source)
{
    m_traces[int(slot)] = std::move(trace);
    m_traceSources[int(slot)] = m_traces[int(slot)] ? source : QString();
    if (m_timeRange.slot == slot && !m_timeRange.empty()) {
        m_timeRange = TimeRange {};
        emit timeRangeSelected(m_timeRange);
    }
    emit traceChanged(slot);
}

void Session::requestCheckpointOpen(const QString& path) { emit checkpointOpenRequested(path); }

void Session::requestTraceOpen(const QStringList& paths, TraceSlot slot)
{
    emit traceOpenRequested(paths, slot);
}

void Session::selectTimeRange(const TimeRange& range)
{
    const TimeRange normalized = range.empty() ? TimeRange {} : range;
    if (normalized == m_timeRange) {
        return;
    }
    m_timeRange = normalized;
    emit timeRangeSelected(m_timeRange);
}

} // namespace day0::ui
