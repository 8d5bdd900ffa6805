// Recording of a sharded run's collectives, the measured-vs-modelled communication table, and
// the checkpoint identity ranks compare at start.
#include "base/file_util.h"
#include "base/sha256.h"
#include "checkpoint/manifest.h"
#include "parallel/run.h"
#include "plan/cost_kernel.h"
#include "profile/cpu_tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace day0::parallel {

namespace fs = std::filesystem;

CommRecorder::CommRecorder(std::vector<profile::CpuTracer*> tracers)
    : m_tracers(std::move(tracers))
{
}

void CommRecorder::setLayout(const checkpoint::ShardLayout& layout)
{
    std::lock_guard lock(m_mutex);
    m_layout = layout;
}

void CommRecorder::setEnabled(int rank, bool on)
{
    std::lock_guard lock(m_mutex);
    if (m_disabled.size() <= std::size_t(rank)) {
        m_disabled.resize(std::size_t(rank) + 1, false);
    }
    m_disabled[std::size_t(rank)] = !on;
}

int CommRecorder::groupSize(const std::string& group, const checkpoint::ShardLayout& layout)
{
    if (group.starts_with("tp")) {
        return layout.tp;
    }
    if (group.starts_with("expert")) {
        return layout.tp * layout.dp;
    }
    return layout.worldSize();
}

comm::CollectiveObserver CommRecorder::observer()
{
    return [this](const comm::CollectiveRecord& r) {
        profile::CpuTracer* tracer = nullptr;
        {
            std::lock_guard lock(m_mutex);
            const auto rank = std::size_t(r.worldRank);
            if (rank < m_disabled.size() && m_disabled[rank]) {
                return;
            }
            if (m_events.size() <= rank) {
                m_events.resize(rank + 1);
            }
            CommGroup group = CommGroup::World;
            if (r.group.starts_with("tp")) {
                group = CommGroup::Tensor;
            } else if (r.group.starts_with("expert")) {
                group = CommGroup::Expert;
            }
            m_events[rank].push_back({ r.worldRank, r.kind, r.bytes, r.startNs, r.endNs,
                groupSize(r.group, m_layout), group });
            if (rank < m_tracers.size()) {
                tracer = m_tracers[rank];
            }
        }
        if (tracer != nullptr && tracer->enabled()) {
            // The record's times are steady-clock; the tracer's clock is the wall clock.
            const std::int64_t steadyNow = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch())
                                               .count();
            const std::int64_t shift = profile::CpuTracer::now() - steadyNow;
            tracer->record(tracer->intern(comm::collectiveName(r.kind)),
                profile::Category::Communication, r.startNs + shift, r.endNs + shift);
        }
    };
}

std::vector<CommEvent> CommRecorder::eventsOf(int rank) const
{
    std::lock_guard lock(m_mutex);
    return std::size_t(rank) < m_events.size() ? m_events[std::size_t(rank)]
                                               : std::vector<CommEvent> {};
}

namespace {

/// The alpha-beta model's time for one recorded call on a machine with `net` (one domain).
double predictedSeconds(const CommEvent& e, const plan::detail::Network& net)
{
    using comm::CollectiveKind;
    const auto bytes = double(e.bytes);
    const int n = std::max(e.groupSize, 1);
    switch (e.kind) {
    case CollectiveKind::AllReduce:
        return plan::detail::collectiveTime(bytes, 1, n, net, 2);
    case CollectiveKind::AllGather:
        return plan::detail::collectiveTime(bytes * n, 1, n, net, 1);
    case CollectiveKind::ReduceScatter:
        return plan::detail::collectiveTime(bytes, 1, n, net, 1);
    case CollectiveKind::AllToAll:
    case CollectiveKind::AllToAllV:
        return plan::detail::allToAllTime(bytes, 1, n, net);
    case CollectiveKind::Send:
    case CollectiveKind::Recv:
    case CollectiveKind::Broadcast:
        return plan::detail::sendTime(bytes, 1, net);
    case CollectiveKind::Barrier:
    case CollectiveKind::Split:
        return plan::detail::collectiveTime(0.0, 1, n, net, 2);
    }
    return 0.0;
}

} // namespace

std::vector<CommKindRow> commTable(
    const std::vector<CommEvent>& events, int ranks, const MachineFigures& machine)
{
    plan::detail::Network net;
    net.intraBandwidth = machine.measured ? machine.bandwidth : 1.0;
    net.interBandwidth = net.intraBandwidth;
    net.intraLatency = machine.measured ? machine.latency : 0.0;
    net.interLatency = net.intraLatency;
    net.domainSize = 1 << 30; // one machine: every group stays inside the fast domain
    std::map<comm::CollectiveKind, CommKindRow> rows;
    for (const auto& e : events) {
        auto& row = rows[e.kind];
        row.kind = comm::collectiveName(e.kind);
        row.calls += 1;
        row.bytes += e.bytes;
        row.measuredSeconds += double(e.endNs - e.startNs) * 1e-9;
        row.predictedSeconds += machine.measured ? predictedSeconds(e, net) : 0.0;
    }
    std::vector<CommKindRow> out;
    CommKindRow total { "total" };
    const double per = 1.0 / std::max(ranks, 1);
    for (auto& [kind, row] : rows) {
        row.measuredSeconds *= per;
        row.predictedSeconds *= per;
        total.calls += row.calls;
        total.bytes += row.bytes;
        total.measuredSeconds += row.measuredSeconds;
        total.predictedSeconds += row.predictedSeconds;
        out.push_back(row);
    }
    out.push_back(total);
    return out;
}

std::vector<NodeTraffic> nodeTraffic(
    const std::vector<CommEvent>& events, const checkpoint::ShardLayout& l, int gpusPerNode)
{
    const int world = l.worldSize();
    const int perNode = std::max(gpusPerNode, 1);
    std::vector<NodeTraffic> out(std::size_t((world + perNode - 1) / perNode));
    const auto add = [&](int from, int to, double bytes) {
        const int a = from / perNode;
        const int b = to / perNode;
        if (a == b) {
            out[std::size_t(a)].intraBytes += std::int64_t(bytes);
        } else {
            out[std::size_t(a)].interBytes += std::int64_t(bytes);
            out[std::size_t(b)].interBytes += std::int64_t(bytes);
        }
    };
    const int stride = l.tp * l.dp;
    for (const auto& e : events) {
        if (e.rank < 0 || e.rank >= world || e.bytes <= 0) {
            continue;
        }
        const auto c = checkpoint::rankCoord(l, e.rank);
        std::vector<int> members;
        if (e.group == CommGroup::Tensor) {
            for (int j = 0; j < l.tp; ++j) {
                members.push_back((c.stage * l.dp + c.dpRank) * l.tp + j);
            }
        } else if (e.group == CommGroup::Expert) {
            for (int j = 0; j < stride; ++j) {
                members.push_back(c.stage * stride + j);
            }
        } else if (e.kind == comm::CollectiveKind::Send) {
            // Hidden states go to the next stage; the last stage sends tokens to the first.
            const int peer = c.stage + 1 < l.pp ? e.rank + stride : c.dpRank * l.tp + c.tpRank;
            add(e.rank, peer, double(e.bytes));
            continue;
        } else {
            continue; // recvs mirror sends; world collectives are start-up checks
        }
        const double share = double(e.bytes) / double(std::max<std::size_t>(members.size() - 1, 1));
        for (const int m : members) {
            if (m != e.rank) {
                add(e.rank, m, share);
            }
        }
    }
    return out;
}

Result<std::string> checkpointFingerprint(const fs::path& path)
{
    std::error_code ec;
    const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
    std::string text;
    if (fs::exists(dir / "config.json", ec)) {
        auto config = readFile(dir / "config.json");
        if (!config) {
            return config.error();
        }
        text += *config;
    }
    if (fs::exists(dir / checkpoint::kManifestName, ec)) {
        auto manifest = readFile(dir / checkpoint::kManifestName);
        if (!manifest) {
            return manifest.error();
        }
        text += *manifest;
    } else {
        std::vector<std::string> files;
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            if (entry.is_regular_file(ec)) {
                files.push_back(
                    fmt::format("{}:{}", entry.path().filename().string(), entry.file_size(ec)));
            }
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            text += f + "\n";
        }
    }
    if (text.empty()) {
        return Error::badInput(fmt::format("{}: no checkpoint to fingerprint", path.string()));
    }
    return sha256Hex(text);
}

} // namespace day0::parallel
