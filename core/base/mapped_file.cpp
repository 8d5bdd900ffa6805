#include "base/mapped_file.h"

#include "base/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace day0 {

namespace {

/// Closes a file descriptor when leaving scope.
struct FdCloser {
    int fd;
    ~FdCloser()
    {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

} // namespace

Result<MappedFile> MappedFile::open(const std::filesystem::path& path)
{
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever; it
    // is refused below as not a regular file.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return Error::badInput(
            fmt::format("{}: cannot open: {}", displayPath(path), std::strerror(errno)));
    }
    FdCloser closer { fd };
    struct stat st { };
    if (::fstat(fd, &st) != 0) {
        return Error::badInput(
            fmt::format("{}: cannot stat: {}", displayPath(path), std::strerror(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
        return Error::badInput(fmt::format("{}: is a folder, expected a file", displayPath(path)));
    }
    if (!S_ISREG(st.st_mode)) {
        return Error::badInput(
            fmt::format("{}: is not a regular file (a FIFO, socket or device)", displayPath(path)));
    }
    MappedFile file;
    file.m_path = path;
    file.m_size = std::size_t(st.st_size);
    if (file.m_size == 0) {
        return file; // mmap refuses length 0; an empty file is a valid empty span
    }
    void* addr = ::mmap(nullptr, file.m_size, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        return Error::badInput(
            fmt::format("{}: cannot map into memory: {}", displayPath(path), std::strerror(errno)));
    }
    file.m_data = static_cast<const std::byte*>(addr);
    return file;
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path))
    , m_data(other.m_data)
    , m_size(other.m_size)
{
    other.m_data = nullptr;
    other.m_size = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept
{
    if (this != &other) {
        reset();
        m_path = std::move(other.m_path);
        m_data = other.m_data;
        m_size = other.m_size;
        other.m_data = nullptr;
        other.m_size = 0;
    }
    return *this;
}

void MappedFile::reset() noexcept
{
    if (m_data != nullptr) {
        ::munmap(const_cast<std::byte*>(m_data), m_size);
    }
    m_data = nullptr;
    m_size = 0;
}

void MappedFile::adviseSequential() const
{
    if (m_data != nullptr) {
        ::madvise(const_cast<std::byte*>(m_data), m_size, MADV_SEQUENTIAL);
    }
}

void MappedFile::populate(std::uint64_t offset, std::uint64_t length) const
{
    if (m_data == nullptr || offset >= m_size || length == 0) {
        return;
    }
    const auto page = std::uint64_t(::sysconf(_SC_PAGESIZE));
    const std::uint64_t begin = offset / page * page;
    const std::uint64_t end = std::min<std::uint64_t>(offset + length, m_size);
    auto* start = const_cast<std::byte*>(m_data) + begin;
#ifdef MADV_POPULATE_READ
    if (::madvise(start, end - begin, MADV_POPULATE_READ) == 0) {
        return;
    }
#endif
    ::madvise(start, end - begin, MADV_WILLNEED);
}

void MappedFile::adviseDontNeed(std::uint64_t offset, std::uint64_t length) const
{
    if (m_data == nullptr || offset >= m_size) {
        return;
    }
    // madvise wants a page-aligned start; round the range inwards so no needed page is dropped.
    const auto page = std::uint64_t(::sysconf(_SC_PAGESIZE));
    const std::uint64_t begin = (offset + page - 1) / page * page;
    const std::uint64_t end = std::min<std::uint64_t>(offset + length, m_size) / page * page;
    if (end > begin) {
        ::madvise(const_cast<std::byte*>(m_data) + begin, end - begin, MADV_DONTNEED);
    }
}

} // namespace day0
