// day0 verify <checkpoint>: structure (headers, index), integrity (SHA-256 against a manifest) and
// architecture (tensors against config.json) of a checkpoint.
#include "base/file_util.h"
#include "base/json_util.h"
#include "base/units.h"
#include "checkpoint/arch_check.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "command.h"
#include "interrupt.h"
#include "pipeline/records.h"
#include "progress_bar.h"
#include "table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

namespace day0::cli {

namespace {

namespace ck = day0::checkpoint;
namespace fs = std::filesystem;

struct VerifyArgs {
    std::string path;
    bool writeManifest = false;
    bool force = false;
    int jobs = 0;
};

nlohmann::json problemsJson(const ck::Checkpoint& c)
{
    auto out = nlohmann::json::array();
    for (const auto& p : c.problems()) {
        out.push_back({ { "file", p.file }, { "tensor", p.tensor },
            { "severity", p.warning ? "warning" : "error" }, { "message", p.error.message } });
    }
    return out;
}

nlohmann::json integrityJson(const ck::IntegrityReport& r)
{
    auto files = nlohmann::json::array();
    for (const auto& f : r.files) {
        nlohmann::json j { { "file", f.file },
            { "status", std::string(ck::fileStatusName(f.status)) }, { "size", f.actualSize },
            { "sha256", f.actualSha256 }, { "expected_sha256", f.expectedSha256 } };
        if (f.expectedSize) {
            j["expected_size"] = *f.expectedSize;
        }
        if (!f.message.empty()) {
            j["message"] = f.message;
        }
        files.push_back(std::move(j));
    }
    return { { "manifest", r.manifest }, { "ok", r.ok() }, { "failures", r.failures() },
        { "files", files }, { "bytes_hashed", r.bytesHashed }, { "seconds", r.seconds } };
}

/// The manifest entries that concern `files` only (when one file of a folder is verified).
ck::Manifest restrictTo(const ck::Manifest& m, const std::vector<std::string>& files)
{
    ck::Manifest out;
    out.source = m.source;
    for (const auto& e : m.files) {
        if (std::find(files.begin(), files.end(), e.file) != files.end()) {
            out.files.push_back(e);
        }
    }
    return out;
}

/// Keeps the verification as a run in the store (history): verdict, counts and every problem.
int runVerify(const VerifyArgs& args, const GlobalOptions& global)
{
    if (auto refused = refusePartial("verify", args.path, global)) {
        return *refused;
    }
    const auto start = std::chrono::steady_clock::now();
    auto opened = ck::Checkpoint::open(args.path);
    if (!opened) {
        return reportError(opened.error());
    }
    const auto& ckpt = *opened;
    const bool folder = fs::is_directory(args.path);
    nlohmann::json json { { "path", args.path },
        { "format", std::string(ck::checkpointFormatName(ckpt.format())) },
        { "files", ckpt.files().size() }, { "tensors", ckpt.tensors().size() },
        { "bytes", ckpt.totalTensorBytes() } };
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
    json["problems"] = problemsJson(ckpt);
    bool checksFailed = false;

    ck::HashOptions hash;
    hash.threads = args.jobs;
    Progress progress;
    const auto stop = interruptToken();
    std::optional<ck::IntegrityReport> integrity; // the hash check, when there is a manifest
    auto found = ck::findManifest(ckpt.root());
    if (!found) {
        return reportError(found.error());
    }
    if (args.writeManifest) {
        if (!folder) {
            return reportError(Error::badInput(
                fmt::format("{}: --write-manifest needs a checkpoint folder", args.path)));
        }
        if (found->has_value() && (*found)->source == ck::kManifestName && !args.force) {
            return reportError(Error::badInput(
                fmt::format("{}: already exists; verify against it, or pass --force to replace it",
                    displayPath(ckpt.root() / ck::kManifestName))));
        }
        ck::Manifest manifest;
        {
            ProgressBar bar(progress, "hashing", !global.quiet);
            auto built = ck::buildManifest(
                ckpt.root(), ck::manifestCandidates(ckpt.root()), hash, progress, stop);
            if (!built) {
                return reportError(built.error());
            }
            manifest = std::move(*built);
        }
        if (auto w = ck::writeManifest(ckpt.root(), manifest); !w) {
            return reportError(w.error());
        }
        json["manifest_written"] = std::string(ck::kManifestName);
        json["manifest_files"] = manifest.files.size();
        if (!global.json) {
            fmt::print("wrote {} ({} files)\n", displayPath(ckpt.root() / ck::kManifestName),
                manifest.files.size());
        }
    } else if (found->has_value()) {
        const auto manifest = folder ? **found : restrictTo(**found, ckpt.files());
        ck::IntegrityReport& report = integrity.emplace();
        {
            ProgressBar bar(progress, "verifying", !global.quiet);
            auto r = ck::verifyIntegrity(ckpt.root(), manifest, ckpt.files(), hash, progress, stop);
            if (!r) {
                return reportError(r.error());
            }
            report = std::move(*r);
        }
        for (const auto& f : report.files) {
            if (f.status != ck::FileStatus::Ok) {
                fmt::print(stderr, "day0: error: {}\n", f.message);
            }
        }
        checksFailed = checksFailed || !report.ok();
        json["integrity"] = integrityJson(report);
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
    } else {
        json["integrity"] = nullptr;
    }
    if (!args.writeManifest && !found->has_value() && !ckpt.hasErrors()) {
        printWarning(
            fmt::format("{}: no {} or {}: file hashes not checked (--write-manifest creates one)",
                displayPath(ckpt.root()), ck::kManifestName, ck::kSha256SumsName));
    }

    // Architecture: every tensor against the graph of config.json, when there is one. A rank's
    // file holds slices: its pieces were checked against plan.json above instead.
    if (ckpt.format() == ck::CheckpointFormat::RankShards) {
        printWarning(fmt::format("{}: per-rank shards: each piece checked against plan.json; "
                                 "the architecture check against config.json applies to the "
                                 "source checkpoint",
            displayPath(ckpt.root())));
        json["architecture"] = nullptr;
    }
    auto arch = ckpt.format() == ck::CheckpointFormat::RankShards
        ? Result<std::optional<ck::TensorReport>>(std::nullopt)
        : ck::checkAgainstConfig(ckpt);
    if (!arch) {
        return reportError(arch.error());
    }
    if (arch->has_value()) {
        const auto& tensors = **arch;
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
        checksFailed = checksFailed || !tensors.ok();
        auto j = tensors.toJson();
        j["ok"] = tensors.ok();
        json["architecture"] = std::move(j);
        if (!global.json) {
            fmt::print("architecture: {} of {} tensors ok ({} missing, {} unexpected, {} wrong "
                       "shape, {} wrong dtype)\n",
                tensors.count(ck::TensorStatus::Ok), tensors.rows.size(),
                tensors.count(ck::TensorStatus::Missing),
                tensors.count(ck::TensorStatus::Unexpected),
                tensors.count(ck::TensorStatus::WrongShape),
                tensors.count(ck::TensorStatus::WrongDtype));
        }
    } else {
        json["architecture"] = nullptr;
    }

    const bool structureBad = ckpt.hasErrors();
    json["ok"] = !structureBad && !checksFailed;
    recordResult(pipeline::verifyRunRecord(args.path, ckpt, integrity ? &*integrity : nullptr,
        arch->has_value() ? &**arch : nullptr,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    if (global.json) {
        fmt::print("{}\n", dumpJson(json, 2));
    } else {
        fmt::print("{} ({}): {} tensors in {} files, {}; {}\n", displayPath(args.path),
            ck::checkpointFormatName(ckpt.format()), ckpt.tensors().size(), ckpt.files().size(),
            formatBytes(Bytes(std::int64_t(ckpt.totalTensorBytes()))),
            structureBad ? "structure BROKEN" : (checksFailed ? "checks FAILED" : "ok"));
    }
    return structureBad ? 2 : (checksFailed ? 1 : 0);
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
