#pragma once

#include "base/progress.h"
#include "base/result.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace day0::checkpoint {

/// The manifest file day0 writes next to a checkpoint.
inline constexpr std::string_view kManifestName = "day0-manifest.json";
/// The sha256sum-format file some publishers ship.
inline constexpr std::string_view kSha256SumsName = "SHA256SUMS";

/// One file of a manifest: path relative to the checkpoint folder, size, SHA-256 (lower-case).
struct ManifestEntry {
    std::string file;
    std::optional<std::uint64_t> size; ///< absent in SHA256SUMS files
    std::string sha256;
};

/// What a checkpoint's files should be.
struct Manifest {
    std::string source; ///< the file it came from ("day0-manifest.json", "SHA256SUMS")
    std::vector<ManifestEntry> files; ///< sorted by file

    /// The entry for `file`, nullptr if absent.
    [[nodiscard]] const ManifestEntry* find(std::string_view file) const;
};

/// Parses a day0 manifest:
/// {"format":"day0-manifest","version":1,"files":[{"file","size","sha256"}]}.
Result<Manifest> parseManifest(std::string_view text, const std::string& origin);
/// Parses `sha256sum` output: "HASH  FILE" or "HASH *FILE" per line (GNU escapes for names with
/// '\\' or newlines), "#" comments and blank lines ignored; BSD "SHA256 (FILE) = HASH" accepted.
Result<Manifest> parseSha256Sums(std::string_view text, const std::string& origin);
/// The manifest JSON text.
std::string serializeManifest(const Manifest& manifest);

/// Looks in `dir` for day0-manifest.json, then SHA256SUMS; nullopt when neither exists.
Result<std::optional<Manifest>> findManifest(const std::filesystem::path& dir);

/// The files a new manifest of `dir` covers: every regular, non-hidden file at the top level
/// except the manifest files themselves, sorted.
std::vector<std::string> manifestCandidates(const std::filesystem::path& dir);

/// Options for hashing.
struct HashOptions {
    int threads = 0; ///< files hashed at once; 0: one per hardware thread
    std::size_t chunkBytes = std::size_t(1) << 20; ///< read size (memory per thread)
};

/// The hash of one file, or why it could not be read.
struct FileHash {
    std::string file;
    std::uint64_t size = 0;
    std::string sha256; ///< empty when `error` is set
    std::optional<Error> error;
};

/// Hashes `files` (relative to `root`) with SHA-256, several at once, each streamed in constant
/// memory. Progress counts bytes (its total is set to the sum of sizes). Returns
/// Error::cancelled() when `stop` is requested; an unreadable file is reported in its FileHash.
Result<std::vector<FileHash>> hashFiles(const std::filesystem::path& root,
    const std::vector<std::string>& files, const HashOptions& options, Progress& progress,
    std::stop_token stop);

/// Builds a manifest of `files` by hashing them; fails if one cannot be read.
Result<Manifest> buildManifest(const std::filesystem::path& root,
    const std::vector<std::string>& files, const HashOptions& options, Progress& progress,
    std::stop_token stop);

/// Writes `manifest` to root/day0-manifest.json atomically.
Result<void> writeManifest(const std::filesystem::path& root, const Manifest& manifest);

/// The verdict on one file.
enum class FileStatus {
    Ok,
    HashMismatch, ///< hashed, digest differs
    SizeMismatch, ///< size differs from the manifest (not hashed)
    Missing, ///< in the manifest, not on disk
    Unreadable, ///< on disk, read failed
    Unlisted, ///< a weight file on disk that the manifest does not cover
};

/// "ok", "hash mismatch", ...
std::string_view fileStatusName(FileStatus status);

/// One checked file.
struct FileCheck {
    std::string file;
    FileStatus status = FileStatus::Ok;
    std::optional<std::uint64_t> expectedSize;
    std::uint64_t actualSize = 0;
    std::string expectedSha256;
    std::string actualSha256;
    std::string message; ///< one line naming the file, empty when ok
};

/// The result of checking a folder against a manifest.
struct IntegrityReport {
    std::string manifest; ///< which manifest was used
    std::vector<FileCheck> files; ///< sorted by file
    std::uint64_t bytesHashed = 0;
    double seconds = 0.0;

    /// True when every file is Ok.
    [[nodiscard]] bool ok() const;
    /// Number of files that are not Ok.
    [[nodiscard]] std::size_t failures() const;
};

/// Checks the files under `root` against `manifest`: sizes first, then SHA-256 of every file
/// whose size matches (in parallel). `mustBeListed` names files (e.g. the shards) that are
/// reported as Unlisted when the manifest lacks them. Every bad file is reported, not just the
/// first. Cancellation returns Error::cancelled().
Result<IntegrityReport> verifyIntegrity(const std::filesystem::path& root, const Manifest& manifest,
    const std::vector<std::string>& mustBeListed, const HashOptions& options, Progress& progress,
    std::stop_token stop);

} // namespace day0::checkpoint
