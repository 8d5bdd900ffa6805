#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace day0::profile {

/// Index of an interned string in a StringTable; 0 is always the empty string.
using StringId = std::uint32_t;

/// Interns strings: each distinct text is stored once and named by a dense StringId.
/// Views returned by view() stay valid for the table's lifetime (storage never moves).
/// Not thread-safe; one importer or one merge owns a table at a time.
class StringTable {
public:
    StringTable();
    StringTable(StringTable&&) noexcept = default;
    StringTable& operator=(StringTable&&) noexcept = default;
    StringTable(const StringTable&) = delete;
    StringTable& operator=(const StringTable&) = delete;

    /// The id of `text`, adding it when new.
    StringId intern(std::string_view text);
    /// The id of `text` if it was interned, else kNotFound.
    [[nodiscard]] StringId find(std::string_view text) const;
    /// The text of an id (empty for ids out of range).
    [[nodiscard]] std::string_view view(StringId id) const
    {
        return id < m_views.size() ? m_views[id] : std::string_view();
    }
    /// Number of distinct strings, the empty string included.
    [[nodiscard]] std::size_t size() const { return m_views.size(); }
    /// Heap bytes held (text blocks, views, hash slots).
    [[nodiscard]] std::size_t memoryBytes() const;

    static constexpr StringId kNotFound = 0xFFFFFFFFu;

private:
    std::string_view store(std::string_view text);
    void grow();

    std::vector<std::unique_ptr<char[]>> m_blocks; // shared blocks; the last one is filling
    std::vector<std::unique_ptr<char[]>> m_longBlocks; // one per long string
    std::size_t m_blockUsed = 0;
    std::size_t m_blockSize = 0;
    std::size_t m_textBytes = 0;
    std::vector<std::string_view> m_views;
    // Open addressing, linear probing: each slot holds id + 1 (0 = empty).
    std::vector<std::uint32_t> m_slots;
    std::vector<std::uint32_t> m_hashes; // per id, to rehash without rereading text
};

/// 64-bit hash of bytes (wyhash-style mixing); stable within one build.
std::uint64_t hashBytes(const void* data, std::size_t size);

} // namespace day0::profile
