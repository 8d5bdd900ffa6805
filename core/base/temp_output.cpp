#include "base/temp_output.h"

#include "base/file_util.h"
#include "base/log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>

namespace day0 {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTempMarker = ".day0-tmp-";
constexpr std::string_view kAsideMarker = ".day0-old-";
// A temporary younger than this is never taken for a leftover: it may be one another process
// has created and not yet locked.
constexpr auto kMinimumAge = std::chrono::seconds(2);

std::string randomSuffix()
{
    static thread_local std::mt19937_64 engine { std::random_device {}() };
    return fmt::format("{:012x}", engine() & 0xffffffffffffULL);
}

fs::path folderOf(const fs::path& target)
{
    return target.has_parent_path() ? target.parent_path() : fs::path(".");
}

// `path` opened (never through a symbolic link) under an exclusive flock: waiting for it, or
// not (then -1 when someone holds it). -1 also when it cannot be opened.
int openLocked(const fs::path& path, bool wait)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return -1;
    }
    if (::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

bool oldEnough(const fs::path& path)
{
    struct stat st { };
    if (::lstat(path.c_str(), &st) != 0) {
        return false;
    }
    const auto modified = std::chrono::system_clock::time_point(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
    return std::chrono::system_clock::now() - modified >= kMinimumAge;
}

// ".<name><marker><suffix>" → "<name>", or "" when `filename` is not of that form.
std::string targetName(std::string_view filename, std::string_view marker)
{
    if (filename.size() < 2 || filename[0] != '.') {
        return {};
    }
    const auto at = filename.rfind(marker);
    if (at == std::string_view::npos || at <= 1 || at + marker.size() == filename.size()) {
        return {};
    }
    return std::string(filename.substr(1, at - 1));
}

} // namespace

Result<TempOutput> TempOutput::create(const fs::path& target, Kind kind)
{
    const fs::path folder = folderOf(target);
    removeStaleTemporaries(folder);
    TempOutput temp;
    temp.m_kind = kind;
    for (int attempt = 0; attempt < 16; ++attempt) {
        const fs::path candidate = folder
            / fmt::format(".{}{}{}", target.filename().string(), kTempMarker, randomSuffix());
        int fd = -1;
        if (kind == Kind::File) {
            fd = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        } else if (::mkdir(candidate.c_str(), 0755) == 0) {
            fd = ::open(candidate.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                const int error = errno;
                ::rmdir(candidate.c_str());
                errno = error;
            }
        }
        if (fd < 0) {
            if (errno == EEXIST) {
                continue;
            }
            return Error::badInput(fmt::format("{}: cannot create a temporary {} beside it: {}",
                displayPath(target), kind == Kind::File ? "file" : "folder", std::strerror(errno)));
        }
        temp.m_path = candidate;
        temp.m_lockFd = fd;
        if (::flock(fd, LOCK_EX) != 0) {
            const int error = errno;
            temp.discard();
            return Error::badInput(fmt::format(
                "{}: cannot lock its temporary: {}", displayPath(target), std::strerror(error)));
        }
        return temp;
    }
    return Error::badInput(
        fmt::format("{}: cannot find a free temporary name beside it", displayPath(target)));
}

TempOutput::~TempOutput() { discard(); }

TempOutput::TempOutput(TempOutput&& other) noexcept
    : m_path(std::move(other.m_path))
    , m_kind(other.m_kind)
    , m_lockFd(other.m_lockFd)
{
    other.m_path.clear();
    other.m_lockFd = -1;
}

TempOutput& TempOutput::operator=(TempOutput&& other) noexcept
{
    if (this != &other) {
        discard();
        m_path = std::move(other.m_path);
        m_kind = other.m_kind;
        m_lockFd = other.m_lockFd;
        other.m_path.clear();
        other.m_lockFd = -1;
    }
    return *this;
}

void TempOutput::release() noexcept
{
    m_path.clear();
    if (m_lockFd >= 0) {
        ::close(m_lockFd);
        m_lockFd = -1;
    }
}

void TempOutput::discard() noexcept
{
    if (!m_path.empty()) {
        std::error_code ec;
        if (m_kind == Kind::Folder) {
            fs::remove_all(m_path, ec);
        } else {
            fs::remove(m_path, ec);
        }
    }
    release();
}

std::vector<StaleTemporary> removeStaleTemporaries(const fs::path& folder)
{
    std::vector<StaleTemporary> done;
    {
        static std::mutex mutex;
        static std::set<std::string> cleaned;
        std::error_code ec;
        const fs::path key = fs::weakly_canonical(fs::absolute(folder, ec), ec);
        const std::lock_guard lock(mutex);
        if (!cleaned.insert(key.string()).second) {
            return done;
        }
    }
    std::error_code ec;
    fs::directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
        return done;
    }
    std::vector<fs::path> candidates;
    for (const auto end = fs::directory_iterator(); it != end; it.increment(ec)) {
        if (ec) {
            break;
        }
        const std::string name = it->path().filename().string();
        if (isTemporaryName(name)) {
            candidates.push_back(it->path());
        }
    }
    for (const fs::path& path : candidates) {
        const std::string name = path.filename().string();
        const bool aside = !targetName(name, kAsideMarker).empty();
        if (!aside && !oldEnough(path)) {
            continue;
        }
        const int fd = openLocked(path, false);
        if (fd < 0) {
            continue; // a live process holds it, or it went away
        }
        std::error_code removeError;
        if (aside) {
            // An old folder set aside by a --force replacement that was killed between its two
            // renames: put it back when nothing replaced it, drop it when the new one is there.
            const fs::path target = folderOf(path) / targetName(name, kAsideMarker);
            if (!fs::exists(fs::symlink_status(target, removeError))) {
                fs::rename(path, target, removeError);
                if (!removeError) {
                    logWarning(fmt::format("{}: put back from {}, where an interrupted "
                                           "replacement had left it",
                        displayPath(target), displayPath(path)));
                    done.push_back({ target, StaleTemporary::Action::Restored });
                }
                ::close(fd);
                continue;
            }
        }
        fs::remove_all(path, removeError);
        ::close(fd);
        if (!removeError) {
            logWarning(fmt::format(
                "{}: removed, a temporary left by an interrupted day0 process", displayPath(path)));
            done.push_back({ path, StaleTemporary::Action::Removed });
        }
    }
    return done;
}

fs::path asideSibling(const fs::path& target)
{
    return folderOf(target)
        / fmt::format(".{}{}{}", target.filename().string(), kAsideMarker, randomSuffix());
}

bool isTemporaryName(std::string_view filename)
{
    return !targetName(filename, kTempMarker).empty()
        || !targetName(filename, kAsideMarker).empty();
}

Result<void> TempOutput::moveOver(const fs::path& target)
{
    if (!active()) {
        return Error::internal(
            fmt::format("{}: no temporary to move into place", displayPath(target)));
    }
    std::error_code ec;
    if (!fs::exists(target, ec)) {
        fs::rename(m_path, target, ec);
        if (ec) {
            return Error::badInput(
                fmt::format("{}: cannot rename into place: {}", displayPath(target), ec.message()));
        }
        release();
        return success();
    }
    // Swap the new folder and the old one in one step, so that a kill at any moment leaves one
    // of the two complete under the target name; the old one, now under the temporary's name,
    // is then removed (a kill during that leaves a temporary the next writer removes).
    if (::renameat2(AT_FDCWD, m_path.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
        discard();
        return success();
    }
    // A filesystem without RENAME_EXCHANGE: set the old folder aside (locked, so that no other
    // process takes it for a leftover), rename the new one into place, then drop the old one.
    // A kill between the two renames leaves the old folder aside; the next writer in this
    // folder puts it back.
    const fs::path aside = asideSibling(target);
    const int lock = lockForSwitch(target);
    fs::rename(target, aside, ec);
    if (ec) {
        if (lock >= 0) {
            ::close(lock);
        }
        return Error::badInput(
            fmt::format("{}: cannot replace: {}", displayPath(target), ec.message()));
    }
    fs::rename(m_path, target, ec);
    if (ec) {
        std::error_code ignored;
        fs::rename(aside, target, ignored);
        if (lock >= 0) {
            ::close(lock);
        }
        return Error::badInput(
            fmt::format("{}: cannot rename into place: {}", displayPath(target), ec.message()));
    }
    release();
    fs::remove_all(aside, ec);
    if (lock >= 0) {
        ::close(lock);
    }
    return success();
}

int lockForSwitch(const fs::path& path) { return openLocked(path, true); }

} // namespace day0
