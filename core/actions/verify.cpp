#include "actions/verify.h"

#include "actions/records.h"
#include "base/file_util.h"
#include "checkpoint/arch_check.h"
#include "checkpoint/checkpoint_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

namespace day0::actions {

namespace ck = day0::checkpoint;
namespace fs = std::filesystem;

bool VerifyOutcome::structureBroken() const { return checkpoint && checkpoint->hasErrors(); }

bool VerifyOutcome::checksFailed() const
{
    return (integrity && !integrity->ok()) || (architecture && !architecture->ok());
}

int VerifyOutcome::exitCode() const { return structureBroken() ? 2 : (checksFailed() ? 1 : 0); }

namespace {

/// Hashes every file of the checkpoint folder and writes day0-manifest.json there atomically.
Result<ck::Manifest> writeManifest(const ck::Checkpoint& checkpoint, const std::string& path,
    const VerifyOptions& options, const ck::HashOptions& hash, Progress& progress,
    std::stop_token stop)
{
    if (!fs::is_directory(path)) {
        return Error::badInput(fmt::format("{}: --write-manifest needs a checkpoint folder", path));
    }
    auto found = ck::findManifest(checkpoint.root());
    if (!found) {
        return found.error();
    }
    if (found->has_value() && (*found)->source == ck::kManifestName && !options.replaceManifest) {
        return Error::badInput(
            fmt::format("{}: already exists; verify against it, or pass --force to replace it",
                displayPath(checkpoint.root() / ck::kManifestName)));
    }
    return ck::writeCheckpointManifest(checkpoint, hash, progress, stop);
}

} // namespace

Result<VerifyOutcome> verifyCheckpoint(
    const std::string& path, const VerifyOptions& options, Progress& progress, std::stop_token stop)
{
    progress.setStage("opening");
    auto opened = ck::Checkpoint::open(path);
    if (!opened) {
        return opened.error();
    }
    return verifyCheckpoint(std::make_shared<const ck::Checkpoint>(std::move(*opened)), path,
        options, progress, std::move(stop));
}

Result<VerifyOutcome> verifyCheckpoint(std::shared_ptr<const ck::Checkpoint> checkpoint,
    const std::string& path, const VerifyOptions& options, Progress& progress, std::stop_token stop)
{
    const auto started = std::chrono::steady_clock::now();
    VerifyOutcome out;
    out.path = path;
    out.checkpoint = std::move(checkpoint);
    const auto& ckpt = *out.checkpoint;

    ck::HashOptions hash;
    hash.threads = options.jobs;
    progress.setStage("hashing");
    if (options.writeManifest) {
        auto written = writeManifest(ckpt, path, options, hash, progress, stop);
        if (!written) {
            return written.error();
        }
        out.written = std::move(*written);
    } else {
        auto integrity = ck::verifyCheckpointFiles(ckpt, hash, progress, stop);
        if (!integrity) {
            return integrity.error();
        }
        out.integrity = std::move(*integrity);
        if (!out.integrity && !ckpt.hasErrors()) {
            out.warnings.push_back(fmt::format(
                "{}: no {} or {}: file hashes not checked (--write-manifest creates one)",
                displayPath(ckpt.root()), ck::kManifestName, ck::kSha256SumsName));
        }
    }
    if (stop.stop_requested()) {
        return Error::cancelled();
    }

    if (ckpt.format() == ck::CheckpointFormat::RankShards) {
        // A rank's file holds slices: its pieces were checked against plan.json when opened.
        out.warnings.push_back(fmt::format("{}: per-rank shards: each piece checked against "
                                           "plan.json; the architecture check against "
                                           "config.json applies to the source checkpoint",
            displayPath(ckpt.root())));
    } else if (options.checkArchitecture) {
        auto arch = ck::checkAgainstConfig(ckpt);
        if (!arch) {
            return arch.error();
        }
        out.architecture = std::move(*arch);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out.record = verifyRunRecord(path, ckpt, out.integrity ? &*out.integrity : nullptr,
        out.architecture ? &*out.architecture : nullptr, out.seconds);
    return out;
}

namespace {

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

} // namespace

nlohmann::json verifyJson(const VerifyOutcome& o)
{
    const auto& ckpt = *o.checkpoint;
    nlohmann::json json { { "path", o.path },
        { "format", std::string(ck::checkpointFormatName(ckpt.format())) },
        { "files", ckpt.files().size() }, { "tensors", ckpt.tensors().size() },
        { "bytes", ckpt.totalTensorBytes() }, { "problems", problemsJson(ckpt) } };
    if (o.written) {
        json["manifest_written"] = std::string(ck::kManifestName);
        json["manifest_files"] = o.written->files.size();
    }
    json["integrity"] = o.integrity ? integrityJson(*o.integrity) : nlohmann::json(nullptr);
    if (o.architecture) {
        auto j = o.architecture->toJson();
        j["ok"] = o.architecture->ok();
        json["architecture"] = std::move(j);
    } else {
        json["architecture"] = nullptr;
    }
    json["ok"] = o.exitCode() == 0;
    return json;
}

} // namespace day0::actions
