#include "checkpoint/output_file.h"

#include "base/file_util.h"
#include "base/temp_output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace day0::checkpoint {

namespace fs = std::filesystem;

namespace {

Error osError(const fs::path& path, const char* what)
{
    return Error::badInput(
        fmt::format("{}: {}: {}", displayPath(path), what, std::strerror(errno)));
}

} // namespace

Result<OutputFile> OutputFile::create(const fs::path& path, std::uint64_t size)
{
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        return Error::badInput(fmt::format("{}: folder does not exist", displayPath(dir)));
    }
    auto temp = TempOutput::create(path, TempOutput::Kind::File);
    if (!temp) {
        return temp.error();
    }
    OutputFile file;
    file.m_target = path;
    file.m_fd = ::open(temp->path().c_str(), O_RDWR | O_CLOEXEC);
    if (file.m_fd < 0) {
        return osError(path, "cannot open its temporary file");
    }
    file.m_temp = std::move(*temp);
    // Allocate every block now: a file only sized by ftruncate is sparse, and a full disk would
    // then surface as SIGBUS on some later store through the map instead of an error here.
    if (size > 0) {
        if (const int error = ::posix_fallocate(file.m_fd, 0, off_t(size)); error != 0) {
            errno = error;
            return osError(
                path, fmt::format("cannot allocate {} bytes for the output file", size).c_str());
        }
    }
    file.m_size = std::size_t(size);
    if (size > 0) {
        void* addr = ::mmap(nullptr, file.m_size, PROT_READ | PROT_WRITE, MAP_SHARED, file.m_fd, 0);
        if (addr == MAP_FAILED) {
            file.m_size = 0;
            return osError(path, "cannot map the output file");
        }
        file.m_data = static_cast<std::byte*>(addr);
    }
    return file;
}

OutputFile::~OutputFile() { discard(); }

OutputFile::OutputFile(OutputFile&& other) noexcept
    : m_target(std::move(other.m_target))
    , m_temp(std::move(other.m_temp))
    , m_data(other.m_data)
    , m_size(other.m_size)
    , m_fd(other.m_fd)
{
    other.m_data = nullptr;
    other.m_size = 0;
    other.m_fd = -1;
}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept
{
    if (this != &other) {
        discard();
        m_target = std::move(other.m_target);
        m_temp = std::move(other.m_temp);
        m_data = other.m_data;
        m_size = other.m_size;
        m_fd = other.m_fd;
        other.m_data = nullptr;
        other.m_size = 0;
        other.m_fd = -1;
    }
    return *this;
}

void OutputFile::discard() noexcept
{
    if (m_data != nullptr) {
        ::munmap(m_data, m_size);
        m_data = nullptr;
    }
    if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
    }
    m_temp.discard();
}

Result<void> OutputFile::commit()
{
    if (!m_temp.active()) {
        return Error::internal("OutputFile::commit called twice");
    }
    if (m_data != nullptr && ::munmap(m_data, m_size) != 0) {
        return osError(m_target, "cannot unmap the output file");
    }
    m_data = nullptr;
    const int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0) {
        return osError(m_target, "write failed");
    }
    std::error_code ec;
    fs::rename(m_temp.path(), m_target, ec);
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot rename into place: {}", displayPath(m_target), ec.message()));
    }
    m_temp.release();
    return success();
}

Result<OutputDir> OutputDir::create(const fs::path& path, bool replace)
{
    std::error_code ec;
    if (fs::exists(path, ec)) {
        if (!fs::is_directory(path, ec)) {
            return Error::badInput(
                fmt::format("{}: exists and is not a folder", displayPath(path)));
        }
        if (!fs::is_empty(path, ec) && !replace) {
            return Error::badInput(fmt::format(
                "{}: folder exists and is not empty (choose another --out or pass --force)",
                displayPath(path)));
        }
    }
    const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot create: {}", displayPath(parent), ec.message()));
    }
    OutputDir dir;
    dir.m_target = path;
    auto temp = TempOutput::create(path, TempOutput::Kind::Folder);
    if (!temp) {
        return temp.error();
    }
    dir.m_temp = std::move(*temp);
    return dir;
}

OutputDir::~OutputDir() = default;
OutputDir::OutputDir(OutputDir&& other) noexcept = default;
OutputDir& OutputDir::operator=(OutputDir&& other) noexcept = default;

Result<void> OutputDir::commit()
{
    if (!m_temp.active()) {
        return Error::internal("OutputDir::commit called twice");
    }
    return m_temp.moveOver(m_target);
}

} // namespace day0::checkpoint
