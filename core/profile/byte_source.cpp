#include "profile/byte_source.h"

#include "base/file_util.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace day0::profile {

namespace {
constexpr std::size_t kInputBlock = 1 << 20;
} // namespace

struct ByteSource::Zlib {
    z_stream stream {};
    bool initialised = false;
    ~Zlib()
    {
        if (initialised) {
            inflateEnd(&stream);
        }
    }
};

Result<std::unique_ptr<ByteSource>> ByteSource::open(const std::filesystem::path& path)
{
    std::error_code ec;
    const std::string name = displayPath(path);
    if (std::filesystem::is_directory(path, ec)) {
        return Error::badInput(fmt::format("{}: is a folder, expected a trace file", name));
    }
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        return Error::badInput(fmt::format("{}: cannot open: {}", name, std::strerror(errno)));
    }
    std::unique_ptr<ByteSource> src(new ByteSource());
    src->m_file = f;
    src->m_name = name;
    src->m_fileSize = std::filesystem::file_size(path, ec);
    DAY0_TRY(src->start());
    return src;
}

Result<std::unique_ptr<ByteSource>> ByteSource::fromBytes(std::string bytes, std::string name)
{
    std::unique_ptr<ByteSource> src(new ByteSource());
    src->m_bytes = std::move(bytes);
    src->m_name = std::move(name);
    src->m_fileSize = src->m_bytes.size();
    if (!src->m_bytes.empty()) {
        src->m_file = fmemopen(src->m_bytes.data(), src->m_bytes.size(), "rb");
        if (src->m_file == nullptr) {
            return Error::internal(fmt::format("{}: cannot read from memory", src->m_name));
        }
    } else {
        src->m_fileEof = true;
    }
    DAY0_TRY(src->start());
    return src;
}

Result<void> ByteSource::start()
{
    m_in = std::make_unique<unsigned char[]>(kInputBlock);
    refillInput();
    if (m_inSize >= 2 && m_in[0] == 0x1f && m_in[1] == 0x8b) {
        m_gzip = true;
        m_z = std::make_unique<Zlib>();
        auto& z = m_z->stream;
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
            return Error::internal(fmt::format("{}: cannot initialise zlib", m_name));
        }
        m_z->initialised = true;
        z.next_in = m_in.get();
        z.avail_in = unsigned(m_inSize);
    }
    return success();
}

ByteSource::~ByteSource()
{
    if (m_file != nullptr) {
        std::fclose(m_file);
    }
}

bool ByteSource::refillInput()
{
    if (m_fileEof) {
        m_inSize = 0;
        return false;
    }
    m_inSize = std::fread(m_in.get(), 1, kInputBlock, m_file);
    m_fileRead += m_inSize;
    if (m_inSize < kInputBlock) {
        m_fileEof = true;
    }
    return m_inSize > 0;
}

Result<std::size_t> ByteSource::read(char* out, std::size_t capacity)
{
    auto r = m_gzip ? readGzip(out, capacity) : readRaw(out, capacity);
    if (r.ok()) {
        m_produced += *r;
    }
    return r;
}

Result<std::size_t> ByteSource::readRaw(char* out, std::size_t capacity)
{
    std::size_t done = 0;
    // The first block was read by open() to sniff the format; hand it out first.
    if (m_inSize > 0) {
        const std::size_t n = std::min(capacity, m_inSize);
        std::memcpy(out, m_in.get(), n);
        std::memmove(m_in.get(), m_in.get() + n, m_inSize - n);
        m_inSize -= n;
        done = n;
    }
    if (done < capacity && !m_fileEof) {
        const std::size_t n = std::fread(out + done, 1, capacity - done, m_file);
        m_fileRead += n;
        if (n < capacity - done) {
            if (std::ferror(m_file)) {
                return Error::badInput(
                    fmt::format("{}: read failed: {}", m_name, std::strerror(errno)));
            }
            m_fileEof = true;
        }
        done += n;
    }
    return done;
}

Result<std::size_t> ByteSource::readGzip(char* out, std::size_t capacity)
{
    auto& z = m_z->stream;
    std::size_t done = 0;
    while (done < capacity && !m_finished) {
        if (z.avail_in == 0) {
            if (!refillInput()) {
                // The file ended inside a gzip member.
                m_truncated = true;
                m_finished = true;
                break;
            }
            z.next_in = m_in.get();
            z.avail_in = unsigned(m_inSize);
        }
        z.next_out = reinterpret_cast<unsigned char*>(out + done);
        z.avail_out = unsigned(std::min<std::size_t>(capacity - done, 1u << 30));
        const std::size_t before = z.avail_out;
        const int rc = inflate(&z, Z_NO_FLUSH);
        done += before - z.avail_out;
        if (rc == Z_STREAM_END) {
            // Another member may follow (concatenated gzip files); anything else is ignored.
            if (z.avail_in == 0 && !refillInput()) {
                m_finished = true;
                break;
            }
            if (z.avail_in == 0) {
                z.next_in = m_in.get();
                z.avail_in = unsigned(m_inSize);
            }
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            m_trailing += z.avail_in;
            while (refillInput()) {
                m_trailing += m_inSize;
            }
            z.avail_in = 0;
            m_finished = true;
            break;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0) {
            continue; // needs more input
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            const std::uint64_t at = m_fileRead - z.avail_in;
            return Error::badInput(fmt::format("{}: corrupt gzip data near byte {} ({})", m_name,
                at, z.msg != nullptr ? z.msg : zError(rc)));
        }
    }
    return done;
}

Result<std::string> readAllBytes(const std::filesystem::path& path, bool* truncated)
{
    auto src = ByteSource::open(path);
    if (!src.ok()) {
        return src.error();
    }
    std::string data;
    std::size_t used = 0;
    data.resize(std::size_t(std::max<std::uint64_t>((*src)->fileSize(), 1 << 16)));
    while (true) {
        if (used == data.size()) {
            data.resize(data.size() * 2);
        }
        auto n = (*src)->read(data.data() + used, data.size() - used);
        if (!n.ok()) {
            return n.error();
        }
        if (*n == 0) {
            break;
        }
        used += *n;
    }
    data.resize(used);
    if (truncated != nullptr) {
        *truncated = (*src)->truncated();
    }
    return data;
}

} // namespace day0::profile
