#include "profile/args.h"

#include <cstring>
#include <limits>

namespace day0::profile {

namespace {

constexpr std::size_t kMaxBytes = std::numeric_limits<std::uint32_t>::max() - 16;

std::uint64_t readVarint(const std::uint8_t*& p)
{
    std::uint64_t v = 0;
    int shift = 0;
    while (true) {
        const std::uint8_t b = *p++;
        v |= std::uint64_t(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            return v;
        }
        shift += 7;
    }
}

inline std::uint64_t zigzag(std::int64_t v)
{
    return (std::uint64_t(v) << 1) ^ std::uint64_t(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v)
{
    return std::int64_t(v >> 1) ^ -std::int64_t(v & 1);
}

} // namespace

ArgStore::ArgStore()
{
    // Offset 0 is reserved so that a reference (offset) of 0 can mean "no arguments".
    m_data.push_back(0);
    m_index.assign(1024, 0);
    m_pendingStart = m_data.size();
}

void ArgStore::begin()
{
    m_data.resize(m_pendingStart);
    m_pendingCount = 0;
}

void ArgStore::putVarint(std::uint64_t v)
{
    while (v >= 0x80) {
        m_data.push_back(std::uint8_t(v | 0x80));
        v >>= 7;
    }
    m_data.push_back(std::uint8_t(v));
}

void ArgStore::putKey(StringId key, ArgType type)
{
    putVarint((std::uint64_t(key) << 3) | std::uint64_t(type));
    ++m_pendingCount;
}

void ArgStore::addInt(StringId key, std::int64_t value)
{
    putKey(key, ArgType::Int);
    putVarint(zigzag(value));
}

void ArgStore::addDouble(StringId key, double value)
{
    putKey(key, ArgType::Double);
    std::uint8_t bytes[8];
    std::memcpy(bytes, &value, 8);
    m_data.insert(m_data.end(), bytes, bytes + 8);
}

void ArgStore::addString(StringId key, StringId value)
{
    putKey(key, ArgType::String);
    putVarint(value);
}

void ArgStore::addJson(StringId key, StringId rawJson)
{
    putKey(key, ArgType::Json);
    putVarint(rawJson);
}

void ArgStore::addBool(StringId key, bool value)
{
    putKey(key, value ? ArgType::True : ArgType::False);
}

void ArgStore::addNull(StringId key) { putKey(key, ArgType::Null); }

std::uint32_t ArgStore::findOrInsert(
    std::uint64_t hash, std::size_t bodyStart, std::size_t bodySize)
{
    const std::size_t mask = m_index.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
        const std::uint32_t ref = m_index[i];
        if (ref == 0) {
            m_index[i] = std::uint32_t(m_pendingStart);
            ++m_indexUsed;
            return 0;
        }
        const std::uint8_t* p = m_data.data() + ref;
        const std::uint64_t size = readVarint(p);
        if (size == bodySize && std::memcmp(p, m_data.data() + bodyStart, bodySize) == 0) {
            return ref;
        }
    }
}

ArgsRef ArgStore::commit()
{
    if (m_pendingCount == 0) {
        m_data.resize(m_pendingStart);
        return 0;
    }
    // Layout: varint(body size) varint(count) entries... ; the size prefix is written in front
    // of the body by moving it, which is cheap for the small sets traces carry.
    const std::size_t entriesStart = m_pendingStart;
    const std::size_t entriesSize = m_data.size() - entriesStart;
    std::uint8_t head[20];
    std::size_t headSize = 0;
    auto emit = [&](std::uint64_t v) {
        while (v >= 0x80) {
            head[headSize++] = std::uint8_t(v | 0x80);
            v >>= 7;
        }
        head[headSize++] = std::uint8_t(v);
    };
    std::uint8_t countBytes[10];
    std::size_t countSize = 0;
    for (std::uint64_t v = m_pendingCount;; v >>= 7) {
        countBytes[countSize++] = std::uint8_t((v >= 0x80 ? 0x80 : 0) | (v & 0x7F));
        if (v < 0x80) {
            break;
        }
    }
    const std::size_t bodySize = countSize + entriesSize;
    emit(bodySize);
    m_data.insert(m_data.begin() + std::ptrdiff_t(entriesStart), head, head + headSize);
    m_data.insert(m_data.begin() + std::ptrdiff_t(entriesStart + headSize), countBytes,
        countBytes + countSize);
    m_pendingCount = 0;
    if (m_data.size() > kMaxBytes) {
        m_full = true;
        m_data.resize(m_pendingStart);
        return 0;
    }
    const std::size_t bodyStart = entriesStart + headSize;
    const std::uint64_t hash = hashBytes(m_data.data() + bodyStart, bodySize);
    if (!m_index.empty()) {
        if (const std::uint32_t existing = findOrInsert(hash, bodyStart, bodySize)) {
            m_data.resize(m_pendingStart);
            return existing;
        }
        if (m_indexUsed * 2 > m_index.size()) {
            std::vector<std::uint32_t> index(m_index.size() * 2, 0);
            const std::size_t mask = index.size() - 1;
            for (const std::uint32_t ref : m_index) {
                if (ref == 0) {
                    continue;
                }
                const std::uint8_t* p = m_data.data() + ref;
                const std::uint64_t size = readVarint(p);
                std::size_t i = hashBytes(p, size) & mask;
                while (index[i] != 0) {
                    i = (i + 1) & mask;
                }
                index[i] = ref;
            }
            m_index.swap(index);
        }
    }
    const auto ref = ArgsRef(m_pendingStart);
    m_pendingStart = m_data.size();
    return ref;
}

std::uint32_t ArgStore::count(ArgsRef ref) const
{
    if (ref == 0 || ref >= m_pendingStart) {
        return 0;
    }
    const std::uint8_t* p = m_data.data() + ref;
    readVarint(p);
    return std::uint32_t(readVarint(p));
}

void ArgStore::decode(ArgsRef ref, const StringTable& strings, std::vector<Arg>& out) const
{
    if (ref == 0 || ref >= m_pendingStart) {
        return;
    }
    const std::uint8_t* p = m_data.data() + ref;
    readVarint(p);
    const std::uint64_t n = readVarint(p);
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t keyType = readVarint(p);
        Arg arg;
        arg.key = strings.view(StringId(keyType >> 3));
        arg.type = ArgType(keyType & 7);
        switch (arg.type) {
        case ArgType::Int:
            arg.intValue = unzigzag(readVarint(p));
            break;
        case ArgType::Double:
            std::memcpy(&arg.doubleValue, p, 8);
            p += 8;
            break;
        case ArgType::String:
        case ArgType::Json:
            arg.text = strings.view(StringId(readVarint(p)));
            break;
        case ArgType::True:
        case ArgType::False:
        case ArgType::Null:
            break;
        }
        out.push_back(arg);
    }
}

std::size_t ArgStore::memoryBytes() const
{
    return m_data.capacity() + m_index.capacity() * sizeof(std::uint32_t);
}

void ArgStore::freezeIndex()
{
    m_index.clear();
    m_index.shrink_to_fit();
    m_indexUsed = 0;
    m_data.shrink_to_fit();
}

} // namespace day0::profile
