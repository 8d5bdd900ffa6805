#pragma once

#include "base/result.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace day0::profile {

/// Reads a file in blocks, inflating gzip (also multi-member) transparently, so importers never
/// hold a whole decompressed file. A gzip stream that ends early is not an error: reading stops
/// and truncated() says so. Not thread-safe.
class ByteSource {
public:
    /// Opens `path`; gzip is recognised by its magic bytes, not by the file name.
    static Result<std::unique_ptr<ByteSource>> open(const std::filesystem::path& path);
    /// Reads from memory (a dropped file, a fuzzer's input); `name` is for messages.
    static Result<std::unique_ptr<ByteSource>> fromBytes(std::string bytes, std::string name);
    ~ByteSource();
    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;

    /// Reads up to `capacity` bytes; 0 means the end of the data.
    Result<std::size_t> read(char* out, std::size_t capacity);

    [[nodiscard]] bool gzip() const { return m_gzip; }
    /// True when the gzip data ended before its end-of-stream marker.
    [[nodiscard]] bool truncated() const { return m_truncated; }
    /// Bytes of the file consumed so far (compressed bytes for gzip), for progress.
    [[nodiscard]] std::uint64_t fileBytesRead() const { return m_fileRead; }
    [[nodiscard]] std::uint64_t fileSize() const { return m_fileSize; }
    /// Bytes handed out by read() so far.
    [[nodiscard]] std::uint64_t bytesProduced() const { return m_produced; }
    /// Bytes after the last gzip member that were not gzip data and were ignored.
    [[nodiscard]] std::uint64_t trailingBytesIgnored() const { return m_trailing; }
    [[nodiscard]] const std::string& displayName() const { return m_name; }

private:
    ByteSource() = default;
    Result<void> start();
    Result<std::size_t> readRaw(char* out, std::size_t capacity);
    Result<std::size_t> readGzip(char* out, std::size_t capacity);
    bool refillInput();

    std::FILE* m_file = nullptr;
    std::string m_bytes; ///< the data, when reading from memory
    std::string m_name;
    std::uint64_t m_fileSize = 0;
    std::uint64_t m_fileRead = 0;
    std::uint64_t m_produced = 0;
    std::uint64_t m_trailing = 0;
    bool m_gzip = false;
    bool m_truncated = false;
    bool m_finished = false;
    bool m_fileEof = false;
    struct Zlib;
    std::unique_ptr<Zlib> m_z;
    std::unique_ptr<unsigned char[]> m_in;
    std::size_t m_inSize = 0;
};

/// Reads a whole (possibly gzip-compressed) file into memory; for small inputs and for SQLite
/// exports, which the SQLite library needs in one piece.
Result<std::string> readAllBytes(const std::filesystem::path& path, bool* truncated = nullptr);

} // namespace day0::profile
