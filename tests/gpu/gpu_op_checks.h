#pragma once

#include "exec/backend.h"
#include "extend/plugin_registry.h"

#include <string>
#include <vector>

namespace day0::gpu {

/// Pass/fail lines and figures of one run, printed as a summary.
class Report {
public:
    void check(const std::string& name, bool ok, const std::string& detail);
    void figure(const std::string& name, const std::string& value);
    /// Prints the summary; returns the exit code (0 all passed, 1 otherwise).
    int summarize() const;

private:
    struct Line {
        std::string name;
        bool ok = true;
        std::string detail;
    };
    std::vector<Line> m_checks;
    std::vector<std::pair<std::string, std::string>> m_figures;
};

/// Every backend operator against the CPU reference (fp32 tight, bf16/fp8 within rounding).
void runOpChecks(exec::Backend& gpu, Report& report);
/// Device tap statistics against numerics::computeStats.
void runTapCheck(Report& report);
/// A CUPTI timeline of a few backend calls holds their kernels, copies and launch flows.
void runCuptiCheck(const extend::PluginRegistry& registry, exec::Backend& gpu, Report& report);

} // namespace day0::gpu
