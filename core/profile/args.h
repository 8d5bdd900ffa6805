#pragma once

#include "profile/string_table.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace day0::profile {

/// Type of one argument value attached to a slice or instant.
enum class ArgType : std::uint8_t { Int, Double, String, Json, True, False, Null };

/// One decoded argument; `text` holds String values and the raw text of Json (arrays, objects).
struct Arg {
    std::string_view key;
    ArgType type = ArgType::Null;
    std::int64_t intValue = 0;
    double doubleValue = 0.0;
    std::string_view text;
};

/// Reference to an encoded argument set in an ArgStore; 0 means "no arguments".
using ArgsRef = std::uint32_t;

/// Compact, deduplicated storage of argument sets: keys and strings are StringIds, integers are
/// zig-zag varints, and identical sets are stored once (kernel launch configurations repeat).
/// Writing is single-threaded; reading a committed set is safe from any thread.
class ArgStore {
public:
    ArgStore();

    /// Starts a new set, discarding an uncommitted one.
    void begin();
    void addInt(StringId key, std::int64_t value);
    void addDouble(StringId key, double value);
    void addString(StringId key, StringId value);
    void addJson(StringId key, StringId rawJson);
    void addBool(StringId key, bool value);
    void addNull(StringId key);
    /// Number of arguments in the set being written.
    [[nodiscard]] std::uint32_t pendingCount() const { return m_pendingCount; }
    /// Stores the set (or finds an identical one) and returns its reference; 0 when the set is
    /// empty or the store is full (4 GiB), which `full()` then reports.
    ArgsRef commit();

    /// Decodes a set; keys and strings are resolved through `strings`.
    void decode(ArgsRef ref, const StringTable& strings, std::vector<Arg>& out) const;
    /// Number of arguments in a set.
    [[nodiscard]] std::uint32_t count(ArgsRef ref) const;

    [[nodiscard]] bool full() const { return m_full; }
    /// Heap bytes held.
    [[nodiscard]] std::size_t memoryBytes() const;
    /// Drops the deduplication index (after import, when nothing more is added).
    void freezeIndex();

private:
    void putVarint(std::uint64_t v);
    void putKey(StringId key, ArgType type);
    std::uint32_t findOrInsert(std::uint64_t hash, std::size_t bodyStart, std::size_t bodySize);

    std::vector<std::uint8_t> m_data; // committed sets, then the pending one at the end
    std::size_t m_pendingStart = 0;
    std::uint32_t m_pendingCount = 0;
    std::vector<std::uint32_t> m_index; // open addressing over refs (offset + 1)
    std::size_t m_indexUsed = 0;
    bool m_full = false;
};

} // namespace day0::profile
