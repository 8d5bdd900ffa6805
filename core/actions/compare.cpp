#include "actions/compare.h"

#include "actions/records.h"
#include "checkpoint/tensor_file.h"

#include <fmt/format.h>

#include <chrono>

namespace day0::actions {

namespace fs = std::filesystem;

namespace {

Result<std::shared_ptr<const numerics::Dump>> readDumpAs(const fs::path& path, const char* role)
{
    auto d = checkpoint::readDump(path);
    if (!d) {
        return d.error().withContext(role);
    }
    return std::make_shared<const numerics::Dump>(std::move(*d));
}

} // namespace

Result<CompareOutcome> compareDumpFolders(const CompareRequest& request, Progress& progress,
    std::stop_token stop, const ComparisonGrowing& growing)
{
    const auto started = std::chrono::steady_clock::now();
    CompareOutcome out;
    auto table = numerics::resolveToleranceTable(request.tolerances);
    if (!table) {
        return table.error();
    }
    out.table = std::make_shared<const numerics::ToleranceTable>(std::move(*table));
    numerics::CompareOptions options;
    options.table = out.table.get();
    options.allowMismatch = request.allowMismatch;
    if (!request.precision.empty()) {
        options.precision = numerics::precisionDType(request.precision);
        if (!options.precision) {
            return Error::badInput(
                fmt::format("--precision: unknown precision '{}'", request.precision));
        }
    }
    progress.setStage("reading dumps");
    auto reference = readDumpAs(request.reference, "reference dump");
    if (!reference) {
        return reference.error();
    }
    out.reference = std::move(*reference);
    auto target = readDumpAs(request.target, "target dump");
    if (!target) {
        return target.error();
    }
    out.target = std::move(*target);
    std::shared_ptr<const numerics::Dump> floor;
    if (!request.floor.empty()) {
        auto f = readDumpAs(request.floor, "floor dump");
        if (!f) {
            return f.error();
        }
        floor = std::move(*f);
        options.floor = floor.get();
    }
    if (!request.local.empty()) {
        auto l = readDumpAs(request.local, "inject-mode dump");
        if (!l) {
            return l.error();
        }
        out.local = std::move(*l);
        options.local = out.local.get();
    }
    if (growing) {
        options.partial = [&out, &growing](const numerics::DumpComparison& sofar) {
            growing({ out.reference, out.target, out.local, out.table, sofar });
        };
    }
    progress.setStage("comparing");
    auto cmp = numerics::compareDumps(*out.reference, *out.target, options, progress, stop);
    if (!cmp) {
        // Dumps that cannot be compared (other models, other inputs): name both folders.
        return cmp.error().code == ErrorCode::Cancelled
            ? cmp.error()
            : cmp.error().withContext(
                fmt::format("{} vs {}", request.reference.string(), request.target.string()));
    }
    out.comparison = std::move(*cmp);
    out.record
        = compareRunRecord(out.comparison, request.reference.string(), request.target.string());
    out.record.info.duration = Seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return out;
}

int comparisonExitCode(const numerics::DumpComparison& comparison)
{
    return comparison.failCount > 0 ? 1 : 0;
}

std::optional<fs::path> injectDumpBeside(const fs::path& target)
{
    const fs::path dir = target.parent_path() / (target.filename().string() + "-inject");
    std::error_code ec;
    if (fs::is_directory(dir, ec)) {
        return dir;
    }
    return std::nullopt;
}

} // namespace day0::actions
