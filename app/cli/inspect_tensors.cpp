#include "inspect_tensors.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_report.h"
#include "table.h"

#include <fmt/format.h>

namespace day0::cli {

namespace ck = day0::checkpoint;

int runInspectTensors(const std::string& path, const GlobalOptions& global)
{
    auto opened = ck::Checkpoint::open(path);
    if (!opened) {
        return reportError(opened.error());
    }
    for (const auto& p : opened->problems()) {
        if (p.warning) {
            printWarning(p.error.message);
        } else {
            fmt::print(stderr, "day0: error: {}\n", p.error.message);
        }
    }
    const auto report = ck::reportTensors(*opened);
    if (!report) {
        return reportError(report.error());
    }
    if (global.json) {
        auto json = report->toJson();
        json["path"] = path;
        if (const auto* g = opened->gguf()) {
            json["gguf"] = { { "version", g->version },
                { "architecture", g->stringValue("general.architecture") },
                { "name", g->stringValue("general.name") },
                { "metadata_keys", g->metadata.size() } };
        }
        fmt::print("{}\n", dumpJson(json, 2));
    } else {
        if (const auto* g = opened->gguf()) {
            fmt::print("GGUF v{}: architecture '{}', name '{}', {} metadata keys (shapes shown "
                       "outermost first)\n",
                g->version, g->stringValue("general.architecture"), g->stringValue("general.name"),
                g->metadata.size());
        }
        std::vector<std::string> header { "tensor", "dtype", "shape", "file", "bytes" };
        if (report->checked) {
            header.push_back("status");
        }
        Table table(header,
            { Table::Align::Left, Table::Align::Left, Table::Align::Left, Table::Align::Left,
                Table::Align::Right, Table::Align::Left });
        for (const auto& r : report->rows) {
            std::vector<std::string> row { r.name, r.dtype, ck::formatShape(r.shape), r.file,
                formatBytes(Bytes(std::int64_t(r.bytes))) };
            if (report->checked) {
                row.push_back(std::string(ck::tensorStatusName(r.status)));
            }
            table.addRow(std::move(row));
        }
        fmt::print("{}", table.render());
        fmt::print("{} tensors, {} ({})\n", report->rows.size(),
            formatBytes(Bytes(std::int64_t(report->bytes))), report->format);
    }
    if (opened->hasErrors()) {
        return 2;
    }
    return report->checked && !report->ok() ? 1 : 0;
}

} // namespace day0::cli
