#pragma once

#include "activity_converter.h"
#include "extend/profiler_collector.h"

#include <memory>

namespace day0::cupti {

/// The CUPTI Activity API collector (CUDA 13): concurrent kernels, memcpy, memset, runtime and
/// driver API, NVTX markers and synchronisation, delivered in 8 MiB buffers that CUPTI fills and
/// hands back from its own thread; the records are copied into ActivityRecords and converted to
/// a trace on stop(). CUPTI allows one subscriber per process: when another tool (Nsight
/// Systems, Nsight Compute) holds it, start() says so. One collector per process.
class CuptiCollector final : public extend::ProfilerCollector {
public:
    explicit CuptiCollector(ConvertOptions options);
    ~CuptiCollector() override;

    std::string name() const override { return "cupti"; }
    Result<void> start() override;
    Result<profile::Trace> stop(Progress& progress, std::stop_token stop) override;

private:
    void disable();

    ConvertOptions m_options;
    void* m_subscriber = nullptr;
    bool m_running = false;
};

} // namespace day0::cupti
