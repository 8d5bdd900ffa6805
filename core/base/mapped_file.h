#pragma once

#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace day0 {

/// A read-only memory map of a whole file. Move-only; unmapped on destruction. Reading the bytes
/// from several threads at once is safe.
class MappedFile {
public:
    /// Maps `path`; the error names the file and the OS reason (missing, a folder, no access...).
    static Result<MappedFile> open(const std::filesystem::path& path);

    MappedFile() = default;
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    /// The whole file (empty for an empty file).
    [[nodiscard]] std::span<const std::byte> bytes() const { return { m_data, m_size }; }
    [[nodiscard]] const std::byte* data() const { return m_data; }
    /// File size in bytes.
    [[nodiscard]] std::uint64_t size() const { return m_size; }
    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

    /// Tells the kernel the file will be read front to back (larger read-ahead).
    void adviseSequential() const;
    /// Maps the pages of [offset, offset + length) in one go before they are read (prefaulting
    /// a range is much cheaper than one fault per page); falls back to read-ahead advice on
    /// kernels without MADV_POPULATE_READ. Best effort: failures are ignored.
    void populate(std::uint64_t offset, std::uint64_t length) const;
    /// Tells the kernel the pages of [offset, offset + length) will not be needed again soon.
    void adviseDontNeed(std::uint64_t offset, std::uint64_t length) const;

private:
    void reset() noexcept;

    std::filesystem::path m_path;
    const std::byte* m_data = nullptr;
    std::size_t m_size = 0;
};

} // namespace day0
