// day0 verify <checkpoint>: structure (headers, index), integrity (SHA-256 against a manifest) and
// architecture (tensors against config.json) of a checkpoint.
#include "actions/verify.h"
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "command.h"
#include "interrupt.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace day0::cli {

namespace {

namespace ck = day0::checkpoint;

struct VerifyArgs {
    std::string path;
    bool writeManifest = false;
    bool force = false;
    int jobs = 0;
};

/// Prints what the verification found; the record is kept in the store (history).
int runVerify(const VerifyArgs& args, const GlobalOptions& global)
{
    if (auto refused = refusePartial("verify", args.path, global)) {
        return *refused;
    }
    actions::VerifyOptions options;
    options.jobs = args.jobs;
    options.writeManifest = args.writeManifest;
    options.replaceManifest = args.force;
    Progress progress;
    Result<actions::VerifyOutcome> verified = Error::cancelled();
    {
        ProgressBar bar(progress, args.writeManifest ? "hashing" : "verifying", !global.quiet);
        verified = actions::verifyCheckpoint(args.path, options, progress, interruptToken());
    }
    if (!verified) {
        return reportError(verified.error());
    }
    const auto& o = *verified;
    const auto& ckpt = *o.checkpoint;
    // The first problems in full, the rest in one line: one missing shard makes hundreds of
    // tensors missing, and the real error must not scroll away.
    constexpr std::size_t kProblemsShown = 5;
    std::size_t errorsSeen = 0;
    for (const auto& p : ckpt.problems()) {
        if (p.warning) {
            printWarning(p.error.message);
        } else if (errorsSeen++ < kProblemsShown) {
            fmt::print(stderr, "day0: error: {}\n", p.error.message);
        }
    }
    if (errorsSeen > kProblemsShown) {
        fmt::print(stderr, "day0: error: ... and {} more structural problems (see --json)\n",
            errorsSeen - kProblemsShown);
    }
    if (o.written && !global.json) {
        fmt::print("wrote {} ({} files)\n", displayPath(ckpt.root() / ck::kManifestName),
            o.written->files.size());
    }
    if (o.integrity) {
        const auto& report = *o.integrity;
        for (const auto& f : report.files) {
            if (f.status != ck::FileStatus::Ok) {
                fmt::print(stderr, "day0: error: {}\n", f.message);
            }
        }
        if (!global.json) {
            Table table({ "file", "size", "status" },
                { Table::Align::Left, Table::Align::Right, Table::Align::Left });
            for (const auto& f : report.files) {
                table.addRow({ f.file, formatBytes(Bytes(std::int64_t(f.actualSize))),
                    std::string(ck::fileStatusName(f.status)) });
            }
            fmt::print("{}", table.render());
            const double rate
                = report.seconds > 0 ? double(report.bytesHashed) / report.seconds : 0.0;
            fmt::print("{}: {} of {} files ok, {} hashed in {} ({}/s)\n", report.manifest,
                report.files.size() - report.failures(), report.files.size(),
                formatBytes(Bytes(std::int64_t(report.bytesHashed))),
                formatDuration(Seconds(report.seconds)), formatBytes(Bytes(std::int64_t(rate))));
        }
    }
    for (const auto& w : o.warnings) {
        printWarning(w);
    }
    if (o.architecture) {
        const auto& tensors = *o.architecture;
        // After a structural error (a shard missing, a header broken) the mismatches against
        // config.json follow from it: one line for them, not a cascade.
        const std::size_t kShown = ckpt.hasErrors() ? 0 : 10;
        std::size_t shown = 0;
        for (const auto& row : tensors.rows) {
            if (row.status != ck::TensorStatus::Ok && shown++ < kShown) {
                fmt::print(stderr, "day0: error: {}\n", row.message);
            }
        }
        if (shown > kShown) {
            fmt::print(stderr, "day0: error: {}\n",
                kShown > 0 ? fmt::format("... and {} more tensors do not match config.json (see "
                                         "--json)",
                    shown - kShown)
                           : fmt::format("{} tensors do not match config.json, following from the "
                                         "problems above (see --json)",
                               shown));
        }
        if (!global.json) {
            fmt::print("architecture: {} of {} tensors ok ({} missing, {} unexpected, {} wrong "
                       "shape, {} wrong dtype)\n",
                tensors.count(ck::TensorStatus::Ok), tensors.rows.size(),
                tensors.count(ck::TensorStatus::Missing),
                tensors.count(ck::TensorStatus::Unexpected),
                tensors.count(ck::TensorStatus::WrongShape),
                tensors.count(ck::TensorStatus::WrongDtype));
        }
    }
    recordResult(o.record);
    if (global.json) {
        fmt::print("{}\n", dumpJson(actions::verifyJson(o), 2));
    } else {
        fmt::print("{} ({}): {} tensors in {} files, {}; {}\n", displayPath(args.path),
            ck::checkpointFormatName(ckpt.format()), ckpt.tensors().size(), ckpt.files().size(),
            formatBytes(Bytes(std::int64_t(ckpt.totalTensorBytes()))),
            o.structureBroken() ? "structure BROKEN" : (o.checksFailed() ? "checks FAILED" : "ok"));
    }
    return o.exitCode();
}

const bool registered = registerCommand({ "verify",
    "check a checkpoint's structure, SHA-256 hashes and tensors", 40,
    [](CLI::App& app, const GlobalOptions& global) -> std::function<int()> {
        auto args = std::make_shared<VerifyArgs>();
        app.add_option("checkpoint", args->path, "checkpoint folder, .safetensors or .gguf file")
            ->required();
        app.add_flag("--write-manifest", args->writeManifest,
            "hash every file and write day0-manifest.json");
        app.add_flag("--force", args->force, "with --write-manifest: replace an existing manifest");
        app.add_option("-j,--jobs", args->jobs, "files hashed in parallel (default: one per core)");
        return [args, &global] { return runVerify(*args, global); };
    } });

} // namespace

} // namespace day0::cli
