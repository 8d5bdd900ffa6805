#include "profile/string_table.h"

#include <cstring>

namespace day0::profile {

namespace {

constexpr std::size_t kFirstBlock = std::size_t(64) << 10;
constexpr std::size_t kMaxBlock = std::size_t(4) << 20;

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b)
{
    const __uint128_t r = __uint128_t(a) * b;
    return std::uint64_t(r) ^ std::uint64_t(r >> 64);
}

inline std::uint64_t read64(const unsigned char* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

} // namespace

std::uint64_t hashBytes(const void* data, std::size_t size)
{
    constexpr std::uint64_t k0 = 0xa0761d6478bd642full;
    constexpr std::uint64_t k1 = 0xe7037ed1a0b428dbull;
    constexpr std::uint64_t k2 = 0x8ebc6af09c88c6e3ull;
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t seed = k0 ^ size;
    std::size_t n = size;
    while (n >= 16) {
        seed = mix(read64(p) ^ k1, read64(p + 8) ^ seed);
        p += 16;
        n -= 16;
    }
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (n >= 8) {
        a = read64(p);
        b = read64(p + n - 8);
    } else if (n > 0) {
        for (std::size_t i = 0; i < n; ++i) {
            a = (a << 8) | p[i];
        }
        b = n;
    }
    return mix(mix(a ^ k1, b ^ seed) ^ k2, size ^ k1);
}

StringTable::StringTable()
{
    m_slots.assign(1024, 0);
    m_views.emplace_back();
    m_hashes.push_back(std::uint32_t(hashBytes("", 0)));
    m_slots[m_hashes[0] & (m_slots.size() - 1)] = 1;
}

std::string_view StringTable::store(std::string_view text)
{
    if (text.empty()) {
        return {};
    }
    if (m_blockUsed + text.size() > m_blockSize) {
        const std::size_t next
            = m_blockSize == 0 ? kFirstBlock : std::min(m_blockSize * 2, kMaxBlock);
        if (text.size() > next / 4) {
            // A long string gets its own block, so the shared block keeps filling with short ones.
            auto block = std::make_unique<char[]>(text.size());
            std::memcpy(block.get(), text.data(), text.size());
            const std::string_view v(block.get(), text.size());
            m_textBytes += text.size();
            m_longBlocks.push_back(std::move(block));
            return v;
        }
        m_blocks.push_back(std::make_unique<char[]>(next));
        m_blockSize = next;
        m_blockUsed = 0;
        m_textBytes += next;
    }
    char* dst = m_blocks.back().get() + m_blockUsed;
    std::memcpy(dst, text.data(), text.size());
    m_blockUsed += text.size();
    return { dst, text.size() };
}

void StringTable::grow()
{
    std::vector<std::uint32_t> slots(m_slots.size() * 2, 0);
    const std::size_t mask = slots.size() - 1;
    for (std::size_t id = 0; id < m_views.size(); ++id) {
        std::size_t i = m_hashes[id] & mask;
        while (slots[i] != 0) {
            i = (i + 1) & mask;
        }
        slots[i] = std::uint32_t(id + 1);
    }
    m_slots.swap(slots);
}

StringId StringTable::find(std::string_view text) const
{
    const auto h = std::uint32_t(hashBytes(text.data(), text.size()));
    const std::size_t mask = m_slots.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
        const std::uint32_t slot = m_slots[i];
        if (slot == 0) {
            return kNotFound;
        }
        if (m_hashes[slot - 1] == h && m_views[slot - 1] == text) {
            return slot - 1;
        }
    }
}

StringId StringTable::intern(std::string_view text)
{
    const auto h = std::uint32_t(hashBytes(text.data(), text.size()));
    std::size_t mask = m_slots.size() - 1;
    std::size_t i = h & mask;
    for (;; i = (i + 1) & mask) {
        const std::uint32_t slot = m_slots[i];
        if (slot == 0) {
            break;
        }
        if (m_hashes[slot - 1] == h && m_views[slot - 1] == text) {
            return slot - 1;
        }
    }
    const auto id = StringId(m_views.size());
    m_views.push_back(store(text));
    m_hashes.push_back(h);
    m_slots[i] = id + 1;
    if (m_views.size() * 2 > m_slots.size()) {
        grow();
    }
    return id;
}

std::size_t StringTable::memoryBytes() const
{
    return m_textBytes + m_views.capacity() * sizeof(std::string_view)
        + m_slots.capacity() * sizeof(std::uint32_t) + m_hashes.capacity() * sizeof(std::uint32_t)
        + (m_blocks.capacity() + m_longBlocks.capacity()) * sizeof(void*);
}

} // namespace day0::profile
