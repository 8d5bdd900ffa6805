#pragma once

#include "base/dtype.h"
#include "base/mapped_file.h"
#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace day0::checkpoint {

/// Largest header the reader accepts, as in the reference implementation (100 MB).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

/// One tensor of a safetensors file. Offsets are relative to the start of the data section.
struct TensorEntry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape; ///< row-major, outermost first; [] is a scalar
    std::uint64_t begin = 0; ///< data_offsets[0]
    std::uint64_t end = 0; ///< data_offsets[1], one past the last byte

    /// Number of elements (1 for a scalar).
    [[nodiscard]] std::uint64_t numel() const;
    /// Size of the data in bytes.
    [[nodiscard]] std::uint64_t bytes() const { return end - begin; }
};

/// A validated safetensors header.
struct SafetensorsHeader {
    std::uint64_t headerSize = 0; ///< N, the JSON length
    std::uint64_t dataOffset = 0; ///< 8 + N: where the data section starts in the file
    std::vector<TensorEntry> tensors; ///< sorted by offset
    std::map<std::string, std::string> metadata; ///< `__metadata__`
};

/// Parses and validates a safetensors header with every check of the reference reader: at least
/// 8 bytes, N ≤ 100 MB and inside the file, UTF-8 JSON object without duplicate keys, known
/// dtypes, entries with exactly dtype/shape/data_offsets, shape × dtype size equal to the offsets'
/// span (overflow-checked), offsets contiguous from 0 without gaps or overlaps and ending exactly
/// at the end of the file, `__metadata__` mapping strings to strings.
/// `prefix` holds at least the first 8 + N bytes of the file (or all of it); `fileSize` is the
/// whole file's size; `origin` names the file in errors ("x.safetensors: tensor 'w' ...").
Result<SafetensorsHeader> parseSafetensorsHeader(
    std::span<const std::byte> prefix, std::uint64_t fileSize, const std::string& origin);

/// A safetensors file opened over a read-only memory map: the header is validated on open and
/// tensor data is viewed in place (zero copy). Thread-safe for reading; move-only.
class SafetensorsFile {
public:
    /// Opens and validates `path`.
    static Result<SafetensorsFile> open(const std::filesystem::path& path);

    [[nodiscard]] const std::filesystem::path& path() const { return m_file.path(); }
    [[nodiscard]] const SafetensorsHeader& header() const { return m_header; }
    [[nodiscard]] const std::vector<TensorEntry>& tensors() const { return m_header.tensors; }
    [[nodiscard]] const std::map<std::string, std::string>& metadata() const
    {
        return m_header.metadata;
    }
    /// The entry named `name`, nullptr if absent.
    [[nodiscard]] const TensorEntry* find(std::string_view name) const;
    /// The bytes of a tensor of this file, in place (not necessarily aligned to the element
    /// size); valid while this object lives.
    [[nodiscard]] std::span<const std::byte> data(const TensorEntry& entry) const;
    /// Prefaults the pages of a tensor before it is read in full (faster than page-by-page faults).
    void prefetch(const TensorEntry& entry) const
    {
        m_file.populate(m_header.dataOffset + entry.begin, entry.bytes());
    }
    /// The underlying map (for read-ahead advice).
    [[nodiscard]] const MappedFile& mapped() const { return m_file; }

private:
    MappedFile m_file;
    SafetensorsHeader m_header;
    std::unordered_map<std::string_view, std::size_t> m_byName;
};

/// "[2, 3]" for messages and listings.
std::string formatShape(std::span<const std::int64_t> shape);

} // namespace day0::checkpoint
