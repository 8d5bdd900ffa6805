#pragma once

#include "pipeline/pipeline.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace day0::pipeline {

/// A picture for the HTML report, already rendered (the GUI's plotting code renders them, so the
/// report shows the same plots as the workbench).
struct ReportFigure {
    std::string title;
    std::string mimeType; ///< "image/png" or "image/svg+xml"
    std::string data; ///< the raw image bytes
};

/// Information about the run shown at the top of every report.
struct ReportHeader {
    std::string model;
    std::string plan;
    std::string precision;
    std::string backend; ///< where the target ran ("day0-cpu", "cuda (NVIDIA H200 ...)")
    std::string softwareVersion;
    std::string created; ///< ISO 8601 UTC
};

/// JUnit XML as CI systems read it: one testsuite, one testcase per step (failure / error /
/// skipped elements with the reason; details and log in system-out).
std::string toJUnitXml(const PipelineResult& result, const ReportHeader& header);

/// The machine-readable report: header, steps with status, duration, summary, details, metrics.
nlohmann::json toJson(const PipelineResult& result, const ReportHeader& header);

/// One self-contained HTML file (inline CSS, figures as data URIs) that opens in any browser.
std::string toHtml(const PipelineResult& result, const ReportHeader& header,
    const std::vector<ReportFigure>& figures);

/// Escapes text for XML and HTML.
std::string escapeXml(const std::string& text);

/// Standard base64 (RFC 4648) of bytes.
std::string base64(const std::string& bytes);

} // namespace day0::pipeline
