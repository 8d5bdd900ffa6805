#pragma once

#include "base/progress.h"
#include "base/result.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

namespace day0 {

/// A SHA-256 digest.
using Sha256Digest = std::array<std::uint8_t, 32>;

/// Streaming SHA-256 over OpenSSL's EVP interface. Not thread-safe; use one per thread.
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(Sha256&&) noexcept;
    Sha256& operator=(Sha256&&) noexcept;
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    /// Adds bytes to the message.
    void update(const void* data, std::size_t size);
    void update(std::string_view data) { update(data.data(), data.size()); }
    /// Finishes the message and returns its digest; the object starts a new message afterwards.
    Sha256Digest finish();

    /// Lower-case hex of a digest (64 characters).
    static std::string hex(const Sha256Digest& digest);

private:
    struct Context;
    std::unique_ptr<Context> m_ctx;
};

/// The lower-case hex SHA-256 of a byte string.
std::string sha256Hex(std::string_view data);

/// True if `text` is 64 hex digits (either case).
bool isSha256Hex(std::string_view text);

/// Hashes a file in fixed-size chunks (constant memory, no matter the file size). Adds the bytes
/// read to `progress` as it goes and returns Error::cancelled() soon after `stop` is requested.
/// The error of a failed read names the file. Thread-safe (no shared state).
Result<std::string> sha256File(const std::filesystem::path& path, Progress* progress,
    std::stop_token stop = {}, std::size_t chunkBytes = std::size_t(1) << 20);

} // namespace day0
