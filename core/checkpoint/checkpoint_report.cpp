#include "checkpoint/checkpoint_report.h"

#include "checkpoint/arch_check.h"

#include <algorithm>

namespace day0::checkpoint {

namespace {

bool isSingleFile(const Checkpoint& checkpoint)
{
    return checkpoint.format() == CheckpointFormat::Safetensors
        || checkpoint.format() == CheckpointFormat::Gguf;
}

} // namespace

Result<TensorReport> reportTensors(const Checkpoint& checkpoint)
{
    auto checked = checkAgainstConfig(checkpoint);
    if (!checked) {
        return checked.error();
    }
    if (checked->has_value()) {
        return std::move(**checked);
    }
    return listTensors(checkpoint);
}

Result<std::optional<Manifest>> manifestFor(const Checkpoint& checkpoint)
{
    auto found = findManifest(checkpoint.root());
    if (!found || !found->has_value() || !isSingleFile(checkpoint)) {
        return found;
    }
    // One file of a folder: only its entry matters; the folder's other files are not checked.
    Manifest restricted;
    restricted.source = (*found)->source;
    const auto& files = checkpoint.files();
    std::copy_if((*found)->files.begin(), (*found)->files.end(),
        std::back_inserter(restricted.files), [&files](const ManifestEntry& e) {
            return std::find(files.begin(), files.end(), e.file) != files.end();
        });
    return std::optional<Manifest>(std::move(restricted));
}

Result<std::optional<IntegrityReport>> verifyCheckpointFiles(const Checkpoint& checkpoint,
    const HashOptions& options, Progress& progress, std::stop_token stop)
{
    auto manifest = manifestFor(checkpoint);
    if (!manifest) {
        return manifest.error();
    }
    if (!manifest->has_value()) {
        return std::optional<IntegrityReport>();
    }
    auto report = verifyIntegrity(
        checkpoint.root(), **manifest, checkpoint.files(), options, progress, std::move(stop));
    if (!report) {
        return report.error();
    }
    return std::optional<IntegrityReport>(std::move(*report));
}

Result<Manifest> writeCheckpointManifest(const Checkpoint& checkpoint, const HashOptions& options,
    Progress& progress, std::stop_token stop)
{
    auto manifest = buildManifest(checkpoint.root(), manifestCandidates(checkpoint.root()), options,
        progress, std::move(stop));
    if (!manifest) {
        return manifest.error();
    }
    if (auto written = writeManifest(checkpoint.root(), *manifest); !written) {
        return written.error();
    }
    return std::move(*manifest);
}

} // namespace day0::checkpoint
