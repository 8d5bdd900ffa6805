#include "pipeline/report.h"

#include <fmt/format.h>

namespace day0::pipeline {

std::string escapeXml(const std::string& text)
{
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        case '\'':
            out += "&apos;";
            break;
        default:
            // XML 1.0 forbids most control characters even when escaped.
            if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') {
                out += "?";
            } else {
                out += c;
            }
        }
    }
    return out;
}

std::string base64(const std::string& bytes)
{
    static constexpr char kAlphabet[]
        = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const auto n = (std::uint32_t(std::uint8_t(bytes[i])) << 16)
            | (std::uint32_t(std::uint8_t(bytes[i + 1])) << 8)
            | std::uint32_t(std::uint8_t(bytes[i + 2]));
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += kAlphabet[(n >> 6) & 63];
        out += kAlphabet[n & 63];
    }
    if (i + 1 == bytes.size()) {
        const auto n = std::uint32_t(std::uint8_t(bytes[i])) << 16;
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += "==";
    } else if (i + 2 == bytes.size()) {
        const auto n = (std::uint32_t(std::uint8_t(bytes[i])) << 16)
            | (std::uint32_t(std::uint8_t(bytes[i + 1])) << 8);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += kAlphabet[(n >> 6) & 63];
        out += '=';
    }
    return out;
}

namespace {

std::string stepText(const StepRecord& step)
{
    std::string text = step.report.summary;
    for (const auto& line : step.report.details) {
        text += "\n" + line;
    }
    for (const auto& [key, value] : step.report.metrics) {
        text += fmt::format("\n{} = {}", key, value);
    }
    for (const auto& line : step.log) {
        text += "\n[log] " + line;
    }
    return text;
}

} // namespace

std::string toJUnitXml(const PipelineResult& result, const ReportHeader& header)
{
    int failures = 0;
    int errors = 0;
    int skipped = 0;
    for (const auto& s : result.steps) {
        failures += s.status == StepStatus::Failed;
        errors += s.status == StepStatus::Error;
        skipped += s.status == StepStatus::Skipped;
    }
    std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    xml += fmt::format("<testsuites name=\"day0\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                       "skipped=\"{}\" time=\"{:.3f}\">\n",
        result.steps.size(), failures, errors, skipped, result.duration.value);
    xml += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                       "skipped=\"{}\" time=\"{:.3f}\" "
                       "timestamp=\"{}\">\n",
        escapeXml(result.name), result.steps.size(), failures, errors, skipped,
        result.duration.value, escapeXml(header.created));
    xml += "    <properties>\n";
    for (const auto& [key, value] : { std::pair<std::string, std::string> { "model", header.model },
             { "plan", header.plan }, { "precision", header.precision },
             { "backend", header.backend }, { "version", header.softwareVersion } }) {
        if (!value.empty()) {
            xml += fmt::format(
                "      <property name=\"{}\" value=\"{}\"/>\n", key, escapeXml(value));
        }
    }
    xml += "    </properties>\n";
    for (const auto& s : result.steps) {
        xml += fmt::format(
            "    <testcase classname=\"day0.validate\" name=\"{}\" time=\"{:.3f}\">\n",
            escapeXml(s.id), s.duration.value);
        switch (s.status) {
        case StepStatus::Failed:
            xml += fmt::format("      <failure message=\"{}\"/>\n", escapeXml(s.reason));
            break;
        case StepStatus::Error:
            xml += fmt::format("      <error message=\"{}\"/>\n", escapeXml(s.reason));
            break;
        case StepStatus::Skipped:
            xml += fmt::format("      <skipped message=\"{}\"/>\n", escapeXml(s.reason));
            break;
        default:
            break;
        }
        const auto text = stepText(s);
        if (!text.empty()) {
            xml += fmt::format("      <system-out>{}</system-out>\n", escapeXml(text));
        }
        xml += "    </testcase>\n";
    }
    xml += "  </testsuite>\n</testsuites>\n";
    return xml;
}

nlohmann::json toJson(const PipelineResult& result, const ReportHeader& header)
{
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : result.steps) {
        steps.push_back({ { "id", s.id }, { "title", s.title },
            { "status", stepStatusName(s.status) }, { "duration_s", s.duration.value },
            { "reason", s.reason }, { "summary", s.report.summary },
            { "details", s.report.details }, { "metrics", s.report.metrics },
            { "artifacts", s.report.artifacts }, { "log", s.log } });
    }
    return { { "name", result.name }, { "passed", result.passed() },
        { "exit_code", result.exitCode() }, { "cancelled", result.cancelled },
        { "duration_s", result.duration.value }, { "model", header.model }, { "plan", header.plan },
        { "precision", header.precision }, { "backend", header.backend },
        { "version", header.softwareVersion }, { "created", header.created }, { "steps", steps } };
}

std::string toHtml(const PipelineResult& result, const ReportHeader& header,
    const std::vector<ReportFigure>& figures)
{
    std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
)";
    html += fmt::format("<title>{}</title>\n", escapeXml(result.name));
    html += R"(<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#1d2430;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}.meta{color:#5b6577;margin-bottom:1.5rem}
.verdict{display:inline-block;padding:.25rem .7rem;border-radius:4px;font-weight:600;color:#fff}
.ok{background:#1f8a4c}.bad{background:#c0392b}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid #e3e7ee;vertical-align:top}
th{background:#f5f7fa;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.s-passed{color:#1f8a4c;font-weight:600}.s-failed,.s-error{color:#c0392b;font-weight:600}.s-skipped{color:#8a6d1f;font-weight:600}
details{margin:.2rem 0}pre{background:#f5f7fa;padding:.6rem;overflow:auto;font-size:12px}
figure{margin:1.5rem 0}figure img{max-width:100%;border:1px solid #e3e7ee}figcaption{color:#5b6577}
</style></head><body>
)";
    html += fmt::format("<h1>{}</h1>\n", escapeXml(result.name));
    html += fmt::format("<div class=\"meta\">model <b>{}</b> · plan <b>{}</b> · precision "
                        "<b>{}</b> on <b>{}</b> · day0 {} · {} · {:.1f} s</div>\n",
        escapeXml(header.model.empty() ? "-" : header.model),
        escapeXml(header.plan.empty() ? "-" : header.plan),
        escapeXml(header.precision.empty() ? "-" : header.precision),
        escapeXml(header.backend.empty() ? "day0-cpu" : header.backend),
        escapeXml(header.softwareVersion), escapeXml(header.created), result.duration.value);
    html += fmt::format("<p><span class=\"verdict {}\">{}</span></p>\n",
        result.passed() ? "ok" : "bad",
        result.passed() ? "PASSED" : (result.cancelled ? "CANCELLED" : "FAILED"));
    html += "<table><thead><tr><th>#</th><th>step</th><th>status</th><th>time</th><th>result</th></"
            "tr></thead><tbody>\n";
    int index = 1;
    for (const auto& s : result.steps) {
        const auto status = stepStatusName(s.status);
        std::string cell = escapeXml(s.report.summary.empty() ? s.reason : s.report.summary);
        if (!s.reason.empty() && !s.report.summary.empty()) {
            cell += "<br>" + escapeXml(s.reason);
        }
        std::string more;
        for (const auto& d : s.report.details) {
            more += escapeXml(d) + "\n";
        }
        for (const auto& [key, value] : s.report.metrics) {
            more += fmt::format("{} = {}\n", escapeXml(key), value);
        }
        for (const auto& line : s.log) {
            more += escapeXml(line) + "\n";
        }
        if (!more.empty()) {
            cell += "<details><summary>details</summary><pre>" + more + "</pre></details>";
        }
        html += fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td class=\"s-{}\">{}</td><td "
                            "class=\"num\">{:.2f} s</td><td>{}</td></tr>\n",
            index++, escapeXml(s.title), status, status, s.duration.value, cell);
    }
    html += "</tbody></table>\n";
    for (const auto& f : figures) {
        html += fmt::format("<figure><img alt=\"{}\" "
                            "src=\"data:{};base64,{}\"><figcaption>{}</figcaption></figure>\n",
            escapeXml(f.title), f.mimeType, base64(f.data), escapeXml(f.title));
    }
    html += "</body></html>\n";
    return html;
}

} // namespace day0::pipeline
