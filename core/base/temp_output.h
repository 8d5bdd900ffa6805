#pragma once

#include "base/result.h"

#include <filesystem>
#include <string_view>
#include <vector>

namespace day0 {

/// The hidden temporary an output is written under before it is renamed into place:
/// ".<name>.day0-tmp-<random>" beside the target, a file or a folder. It is created
/// exclusively and held under an exclusive flock() for as long as this object lives, so another
/// process can tell a live writer's temporary from one left by a process that was killed
/// (kill -9, the OOM killer, a power cut); every create() first removes such leftovers from
/// the target's folder. Destroyed before release(), the temporary is removed. Move-only.
class TempOutput {
public:
    enum class Kind { File, Folder };

    /// Creates the temporary for `target` (an empty file or folder) and locks it. The target's
    /// folder must exist.
    static Result<TempOutput> create(const std::filesystem::path& target, Kind kind);

    TempOutput() = default;
    ~TempOutput();
    TempOutput(TempOutput&& other) noexcept;
    TempOutput& operator=(TempOutput&& other) noexcept;
    TempOutput(const TempOutput&) = delete;
    TempOutput& operator=(const TempOutput&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }
    [[nodiscard]] bool active() const { return !m_path.empty(); }

    /// Renames this temporary folder to `target` and releases it. A folder already at
    /// `target` is replaced so that a kill at any moment leaves one complete folder under the
    /// name: swapped in one step (RENAME_EXCHANGE) where the filesystem can, else set aside
    /// (locked; the next writer puts it back after a kill) and restored if the rename fails;
    /// the old folder is then removed. Errors name `target`. Whether replacing is allowed is
    /// the caller's decision.
    Result<void> moveOver(const std::filesystem::path& target);
    /// The temporary has been renamed into place (or handed on): keep it, drop the lock.
    void release() noexcept;
    /// Removes the temporary now and drops the lock.
    void discard() noexcept;

private:
    std::filesystem::path m_path;
    Kind m_kind = Kind::File;
    int m_lockFd = -1;
};

/// What removeStaleTemporaries did with one leftover.
struct StaleTemporary {
    std::filesystem::path path;
    enum class Action { Removed, Restored } action = Action::Removed;
};

/// Removes, from `folder`, the temporaries of outputs whose writer no longer runs (no process
/// holds their lock and they are more than a few seconds old); an old folder set aside by an
/// interrupted `--force` replacement is put back when its replacement never arrived, and
/// removed when it did. Each is logged as a warning naming it. Runs once per folder and
/// process; TempOutput::create calls it, so every output Day0 writes cleans up after a killed
/// predecessor.
std::vector<StaleTemporary> removeStaleTemporaries(const std::filesystem::path& folder);

/// The name an old folder is set aside under while `target` is replaced:
/// ".<name>.day0-old-<random>".
std::filesystem::path asideSibling(const std::filesystem::path& target);

/// True for a name TempOutput or asideSibling makes (a hidden day0 temporary).
bool isTemporaryName(std::string_view filename);

/// Locks `path` (a file or folder) as in use by this process while a replacement switches it;
/// returns the descriptor to close afterwards, or -1 when it cannot be opened.
int lockForSwitch(const std::filesystem::path& path);

} // namespace day0
