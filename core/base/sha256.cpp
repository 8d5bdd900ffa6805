#include "base/sha256.h"

#include "base/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace day0 {

struct Sha256::Context {
    EVP_MD_CTX* ctx = nullptr;
    ~Context() { EVP_MD_CTX_free(ctx); }
};

namespace {

void initDigest(EVP_MD_CTX* ctx)
{
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
        throw std::runtime_error("OpenSSL: EVP_DigestInit_ex(sha256) failed");
    }
}

} // namespace

Sha256::Sha256()
    : m_ctx(std::make_unique<Context>())
{
    m_ctx->ctx = EVP_MD_CTX_new();
    if (m_ctx->ctx == nullptr) {
        throw std::runtime_error("OpenSSL: EVP_MD_CTX_new failed");
    }
    initDigest(m_ctx->ctx);
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size)
{
    if (size > 0 && EVP_DigestUpdate(m_ctx->ctx, data, size) != 1) {
        throw std::runtime_error("OpenSSL: EVP_DigestUpdate failed");
    }
}

Sha256Digest Sha256::finish()
{
    Sha256Digest digest {};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(m_ctx->ctx, digest.data(), &length) != 1 || length != digest.size()) {
        throw std::runtime_error("OpenSSL: EVP_DigestFinal_ex failed");
    }
    initDigest(m_ctx->ctx);
    return digest;
}

std::string Sha256::hex(const Sha256Digest& digest)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(digest.size() * 2, '0');
    for (std::size_t i = 0; i < digest.size(); ++i) {
        out[2 * i] = kDigits[digest[i] >> 4];
        out[2 * i + 1] = kDigits[digest[i] & 0xF];
    }
    return out;
}

std::string sha256Hex(std::string_view data)
{
    Sha256 sha;
    sha.update(data);
    return Sha256::hex(sha.finish());
}

bool isSha256Hex(std::string_view text)
{
    if (text.size() != 64) {
        return false;
    }
    for (const char c : text) {
        const bool hexDigit
            = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hexDigit) {
            return false;
        }
    }
    return true;
}

Result<std::string> sha256File(const std::filesystem::path& path, Progress* progress,
    std::stop_token stop, std::size_t chunkBytes)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Error::badInput(
            fmt::format("{}: cannot open: {}", displayPath(path), std::strerror(errno)));
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer { fd };
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    Sha256 sha;
    std::vector<std::byte> buffer(std::max<std::size_t>(chunkBytes, 4096));
    for (;;) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return Error::badInput(
                fmt::format("{}: read failed: {}", displayPath(path), std::strerror(errno)));
        }
        if (n == 0) {
            break;
        }
        sha.update(buffer.data(), std::size_t(n));
        if (progress != nullptr) {
            progress->advance(n);
        }
    }
    return Sha256::hex(sha.finish());
}

} // namespace day0
