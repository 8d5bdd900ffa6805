#include "base/file_util.h"

#include "base/mapped_file.h"
#include "base/temp_output.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

namespace day0 {

namespace fs = std::filesystem;

std::string displayPath(const fs::path& path)
{
    std::error_code ec;
    const auto rel = fs::relative(path, fs::current_path(ec), ec);
    if (!ec && !rel.empty() && rel.string().size() < path.string().size()
        && rel.string().rfind("..", 0) != 0) {
        return rel.string();
    }
    return path.string();
}

Result<std::string> readFile(const fs::path& path)
{
    // Through MappedFile's checks: a folder, a FIFO (which would block for ever), a socket or a
    // device is refused by name before anything is read.
    auto mapped = MappedFile::open(path);
    if (!mapped) {
        return mapped.error();
    }
    const auto bytes = mapped->bytes();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Result<void> writeFileAtomic(const fs::path& path, std::string_view contents)
{
    auto temp = TempOutput::create(path, TempOutput::Kind::File);
    if (!temp) {
        return temp.error();
    }
    {
        std::FILE* f = std::fopen(temp->path().c_str(), "wb");
        if (!f) {
            return Error::badInput(
                fmt::format("{}: cannot write: {}", displayPath(path), std::strerror(errno)));
        }
        errno = 0;
        const bool wrote = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
        const bool flushed = std::fflush(f) == 0;
        const int error = errno;
        const bool closed = std::fclose(f) == 0;
        if (!wrote || !flushed || !closed) {
            const int reason = error != 0 ? error : errno;
            return Error::badInput(fmt::format("{}: write failed: {}", displayPath(path),
                reason != 0 ? std::strerror(reason) : "short write"));
        }
    }
    std::error_code ec;
    fs::rename(temp->path(), path, ec);
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot rename into place: {}", displayPath(path), ec.message()));
    }
    temp->release();
    return success();
}

} // namespace day0
