#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/tensor_report.h"
#include "history/run_record.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace day0::actions {

/// How a checkpoint is verified.
struct VerifyOptions {
    int jobs = 0; ///< files hashed at once; 0: one per hardware thread
    /// Check every tensor against the config.json beside the weights (not for per-rank shards,
    /// whose pieces are checked against plan.json when they are opened). The validation pipeline
    /// leaves it to its own architecture step.
    bool checkArchitecture = true;
    /// Hash every file of the folder and write day0-manifest.json there instead of checking the
    /// hashes (`day0 verify --write-manifest`, the panel's Write Manifest). Refused for a single
    /// file, and over an existing day0-manifest.json unless replaceManifest.
    bool writeManifest = false;
    bool replaceManifest = false;
};

/// What verifying a checkpoint found: its structure, its files' hashes against the manifest
/// beside it, its tensors against config.json, and the run record of it.
struct VerifyOutcome {
    std::string path; ///< as given
    std::shared_ptr<const checkpoint::Checkpoint> checkpoint;
    /// The hash check; nullopt when the folder has no day0-manifest.json or SHA256SUMS.
    std::optional<checkpoint::IntegrityReport> integrity;
    /// The manifest written, with VerifyOptions::writeManifest (integrity is then nullopt).
    std::optional<checkpoint::Manifest> written;
    /// The tensors against config.json; nullopt without a config, for per-rank shards, or when
    /// not asked for.
    std::optional<checkpoint::TensorReport> architecture;
    /// What the user should know that is not an error: no manifest, per-rank shards.
    std::vector<std::string> warnings;
    double seconds = 0.0;
    history::RunRecord record; ///< verifyRunRecord of the above (kind verify)

    /// A shard missing, a header broken: the structure is broken.
    [[nodiscard]] bool structureBroken() const;
    /// A file failed its hash, or a tensor does not match config.json.
    [[nodiscard]] bool checksFailed() const;
    /// `day0 verify`'s exit status: 2 structure broken, 1 a check failed, 0 ok.
    [[nodiscard]] int exitCode() const;
};

/// `day0 verify PATH` and the model panel's Verify and Write Manifest: opens the checkpoint and
/// verifies it, or writes its manifest.
/// Progress counts the bytes hashed; cancellation returns Error::cancelled() and records
/// nothing. Fails when the checkpoint cannot be opened at all, or its manifest or config.json
/// cannot be read; a broken structure or a failed check is an outcome, not an error.
Result<VerifyOutcome> verifyCheckpoint(const std::string& path, const VerifyOptions& options,
    Progress& progress, std::stop_token stop);

/// The same for a checkpoint already opened from `path` (the model panel keeps it open).
Result<VerifyOutcome> verifyCheckpoint(std::shared_ptr<const checkpoint::Checkpoint> checkpoint,
    const std::string& path, const VerifyOptions& options, Progress& progress,
    std::stop_token stop);

/// `day0 verify --json`: path, format, counts, problems, integrity (per file) and architecture.
nlohmann::json verifyJson(const VerifyOutcome& outcome);

} // namespace day0::actions
