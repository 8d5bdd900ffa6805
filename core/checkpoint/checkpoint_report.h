#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/tensor_report.h"

#include <optional>
#include <stop_token>

namespace day0::checkpoint {

/// The tensor listing of an opened checkpoint as `day0 inspect --tensors` prints it and the
/// model panel shows it: checked against the config.json beside the weights when there is one
/// (checkAgainstConfig), else listed unchecked. Fails only when that config.json is unreadable.
/// Pure; thread-safe.
Result<TensorReport> reportTensors(const Checkpoint& checkpoint);

/// The manifest that covers `checkpoint`: day0-manifest.json or SHA256SUMS in its folder,
/// restricted to the checkpoint's own file when a single file was opened. nullopt when the
/// folder has neither.
Result<std::optional<Manifest>> manifestFor(const Checkpoint& checkpoint);

/// Hashes the checkpoint's files against manifestFor(checkpoint) (verifyIntegrity, with the
/// weight files required to be listed). nullopt when there is no manifest. Progress counts
/// bytes; cancellation returns Error::cancelled().
Result<std::optional<IntegrityReport>> verifyCheckpointFiles(const Checkpoint& checkpoint,
    const HashOptions& options, Progress& progress, std::stop_token stop);

/// Hashes every manifest candidate of the checkpoint's folder and writes day0-manifest.json
/// there atomically (what `day0 verify --write-manifest` does). Returns the manifest written.
Result<Manifest> writeCheckpointManifest(const Checkpoint& checkpoint, const HashOptions& options,
    Progress& progress, std::stop_token stop);

} // namespace day0::checkpoint
