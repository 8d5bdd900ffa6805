#include "checkpoint/gguf.h"

#include "base/file_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_set>

namespace day0::checkpoint {

namespace {

constexpr std::uint32_t kMaxDims = 4;
constexpr int kMaxArrayNesting = 8;

// Block layouts of ggml types (elements per block, bytes per block), by type id. Removed ids
// (4, 5, 31-33, 36-38) are absent, so files using them are rejected as unknown.
constexpr std::array<GgmlTypeInfo, 32> kGgmlTypes { {
    { 0, "F32", 1, 4 },
    { 1, "F16", 1, 2 },
    { 2, "Q4_0", 32, 18 },
    { 3, "Q4_1", 32, 20 },
    { 6, "Q5_0", 32, 22 },
    { 7, "Q5_1", 32, 24 },
    { 8, "Q8_0", 32, 34 },
    { 9, "Q8_1", 32, 36 },
    { 10, "Q2_K", 256, 84 },
    { 11, "Q3_K", 256, 110 },
    { 12, "Q4_K", 256, 144 },
    { 13, "Q5_K", 256, 176 },
    { 14, "Q6_K", 256, 210 },
    { 15, "Q8_K", 256, 292 },
    { 16, "IQ2_XXS", 256, 66 },
    { 17, "IQ2_XS", 256, 74 },
    { 18, "IQ3_XXS", 256, 98 },
    { 19, "IQ1_S", 256, 50 },
    { 20, "IQ4_NL", 32, 18 },
    { 21, "IQ3_S", 256, 110 },
    { 22, "IQ2_S", 256, 82 },
    { 23, "IQ4_XS", 256, 136 },
    { 24, "I8", 1, 1 },
    { 25, "I16", 1, 2 },
    { 26, "I32", 1, 4 },
    { 27, "I64", 1, 8 },
    { 28, "F64", 1, 8 },
    { 29, "IQ1_M", 256, 56 },
    { 30, "BF16", 1, 2 },
    { 34, "TQ1_0", 256, 54 },
    { 35, "TQ2_0", 256, 66 },
    { 39, "MXFP4", 32, 17 },
} };

/// A bounds-checked little-endian cursor over the header bytes.
class Reader {
public:
    Reader(std::span<const std::byte> bytes, const std::string& origin)
        : m_bytes(bytes)
        , m_origin(origin)
    {
    }

    [[nodiscard]] std::uint64_t pos() const { return m_pos; }
    [[nodiscard]] std::uint64_t remaining() const { return m_bytes.size() - m_pos; }
    [[nodiscard]] bool failed() const { return m_error.has_value(); }
    [[nodiscard]] const Error& error() const { return *m_error; }

    void fail(const std::string& what)
    {
        if (!m_error) {
            m_error = Error::badInput(fmt::format("{}: {}", m_origin, what));
        }
    }

    template <typename T> T read(const char* what)
    {
        T value {};
        if (failed()) {
            return value;
        }
        if (remaining() < sizeof(T)) {
            fail(fmt::format("truncated at byte {} while reading {}", m_pos, what));
            return value;
        }
        std::memcpy(&value, m_bytes.data() + m_pos, sizeof(T)); // GGUF v2/v3 LE on an LE host
        m_pos += sizeof(T);
        return value;
    }

    std::string readString(const char* what)
    {
        const auto length = read<std::uint64_t>(what);
        if (failed()) {
            return {};
        }
        if (length > remaining()) {
            fail(fmt::format("{} at byte {} claims {} bytes but only {} remain", what, m_pos - 8,
                length, remaining()));
            return {};
        }
        std::string s(reinterpret_cast<const char*>(m_bytes.data() + m_pos), std::size_t(length));
        m_pos += length;
        return s;
    }

    void skipTo(std::uint64_t pos) { m_pos = pos; }

private:
    std::span<const std::byte> m_bytes;
    const std::string& m_origin;
    std::uint64_t m_pos = 0;
    std::optional<Error> m_error;
};

/// Smallest encoded size of one value of `type` (used to bound array counts before allocating).
std::uint64_t minEncodedSize(GgufValueType type)
{
    switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool:
        return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
        return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
        return 4;
    case GgufValueType::String:
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
        return 8;
    case GgufValueType::Array:
        return 12;
    }
    return 1;
}

bool knownValueType(std::uint32_t t) { return t <= 12; }

nlohmann::json readValue(
    Reader& in, GgufValueType type, const std::string& key, int depth, GgufValueType* arrayTypeOut);

nlohmann::json readArray(Reader& in, const std::string& key, int depth, GgufValueType* arrayTypeOut)
{
    if (depth >= kMaxArrayNesting) {
        in.fail(fmt::format("key '{}': arrays nested deeper than {}", key, kMaxArrayNesting));
        return {};
    }
    const auto elemType = in.read<std::uint32_t>("array element type");
    const auto count = in.read<std::uint64_t>("array length");
    if (in.failed()) {
        return {};
    }
    if (!knownValueType(elemType)) {
        in.fail(fmt::format("key '{}': unknown array element type {}", key, elemType));
        return {};
    }
    const auto type = GgufValueType(elemType);
    if (arrayTypeOut != nullptr) {
        *arrayTypeOut = type;
    }
    if (count > in.remaining() / minEncodedSize(type)) {
        in.fail(fmt::format("key '{}': array of {} elements does not fit in the {} bytes left", key,
            count, in.remaining()));
        return {};
    }
    nlohmann::json out = nlohmann::json::array();
    for (std::uint64_t i = 0; i < count && !in.failed(); ++i) {
        out.push_back(readValue(in, type, key, depth + 1, nullptr));
    }
    return out;
}

nlohmann::json readValue(
    Reader& in, GgufValueType type, const std::string& key, int depth, GgufValueType* arrayTypeOut)
{
    switch (type) {
    case GgufValueType::U8:
        return in.read<std::uint8_t>("uint8 value");
    case GgufValueType::I8:
        return in.read<std::int8_t>("int8 value");
    case GgufValueType::U16:
        return in.read<std::uint16_t>("uint16 value");
    case GgufValueType::I16:
        return in.read<std::int16_t>("int16 value");
    case GgufValueType::U32:
        return in.read<std::uint32_t>("uint32 value");
    case GgufValueType::I32:
        return in.read<std::int32_t>("int32 value");
    case GgufValueType::F32:
        return in.read<float>("float32 value");
    case GgufValueType::Bool: {
        const auto b = in.read<std::uint8_t>("bool value");
        if (b > 1) {
            in.fail(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, b));
        }
        return b != 0;
    }
    case GgufValueType::String:
        return in.readString("string value");
    case GgufValueType::Array:
        return readArray(in, key, depth, arrayTypeOut);
    case GgufValueType::U64:
        return in.read<std::uint64_t>("uint64 value");
    case GgufValueType::I64:
        return in.read<std::int64_t>("int64 value");
    case GgufValueType::F64:
        return in.read<double>("float64 value");
    }
    return {};
}

/// Reads one tensor info record and validates its shape and type.
GgufTensor readTensorInfo(Reader& in, std::uint64_t index)
{
    GgufTensor t;
    t.name = in.readString("tensor name");
    const auto nDims = in.read<std::uint32_t>("tensor dimension count");
    if (in.failed()) {
        return t;
    }
    if (nDims > kMaxDims) {
        in.fail(fmt::format("tensor '{}': {} dimensions (at most {})", t.name, nDims, kMaxDims));
        return t;
    }
    for (std::uint32_t d = 0; d < nDims; ++d) {
        const auto n = in.read<std::uint64_t>("tensor dimension");
        if (n > std::uint64_t(INT64_MAX)) {
            in.fail(fmt::format("tensor '{}': dimension {} is {}", t.name, d, n));
            return t;
        }
        t.ne.push_back(std::int64_t(n));
    }
    const auto typeId = in.read<std::uint32_t>("tensor type");
    t.offset = in.read<std::uint64_t>("tensor offset");
    if (in.failed()) {
        return t;
    }
    const auto info = ggmlTypeInfo(typeId);
    if (!info) {
        in.fail(fmt::format("tensor '{}' (#{}): unknown ggml type {}", t.name, index, typeId));
        return t;
    }
    t.type = *info;
    if (!t.ne.empty() && t.ne[0] % std::int64_t(info->blockSize) != 0) {
        in.fail(
            fmt::format("tensor '{}': row of {} elements is not a whole number of {} blocks of {}",
                t.name, t.ne[0], info->name, info->blockSize));
        return t;
    }
    std::uint64_t elements = 1;
    for (const auto n : t.ne) {
        if (n != 0 && elements > UINT64_MAX / std::uint64_t(n)) {
            in.fail(fmt::format("tensor '{}': element count overflows 64 bits", t.name));
            return t;
        }
        elements *= std::uint64_t(n);
    }
    const std::uint64_t blocks = elements / info->blockSize;
    if (blocks > UINT64_MAX / info->typeSize) {
        in.fail(fmt::format("tensor '{}': byte size overflows 64 bits", t.name));
        return t;
    }
    t.bytes = blocks * info->typeSize;
    return t;
}

} // namespace

std::string_view ggufValueTypeName(GgufValueType type)
{
    static constexpr std::array<std::string_view, 13> kNames { "uint8", "int8", "uint16", "int16",
        "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64" };
    const auto i = std::uint32_t(type);
    return i < kNames.size() ? kNames[i] : "?";
}

std::optional<GgmlTypeInfo> ggmlTypeInfo(std::uint32_t id)
{
    for (const auto& t : kGgmlTypes) {
        if (t.id == id) {
            return t;
        }
    }
    return std::nullopt;
}

std::optional<DType> ggmlPlainDType(std::uint32_t id)
{
    switch (id) {
    case 0:
        return DType::F32;
    case 1:
        return DType::F16;
    case 24:
        return DType::I8;
    case 25:
        return DType::I16;
    case 26:
        return DType::I32;
    case 27:
        return DType::I64;
    case 28:
        return DType::F64;
    case 30:
        return DType::BF16;
    default:
        return std::nullopt;
    }
}

std::vector<std::int64_t> GgufTensor::shape() const { return { ne.rbegin(), ne.rend() }; }

std::uint64_t GgufTensor::numel() const
{
    std::uint64_t n = 1;
    for (const auto d : ne) {
        n *= std::uint64_t(d);
    }
    return n;
}

const GgufKeyValue* GgufHeader::find(std::string_view key) const
{
    for (const auto& kv : metadata) {
        if (kv.key == key) {
            return &kv;
        }
    }
    return nullptr;
}

std::string GgufHeader::stringValue(std::string_view key) const
{
    const auto* kv = find(key);
    return kv != nullptr && kv->value.is_string() ? kv->value.get<std::string>() : std::string();
}

bool hasGgufMagic(std::span<const std::byte> prefix)
{
    return prefix.size() >= 4 && std::memcmp(prefix.data(), "GGUF", 4) == 0;
}

Result<GgufHeader> parseGgufHeader(
    std::span<const std::byte> prefix, std::uint64_t fileSize, const std::string& origin)
{
    if (!hasGgufMagic(prefix)) {
        return Error::badInput(fmt::format("{}: not a GGUF file (no 'GGUF' magic)", origin));
    }
    Reader in(prefix.first(std::size_t(std::min<std::uint64_t>(prefix.size(), fileSize))), origin);
    in.skipTo(4);
    GgufHeader header;
    header.version = in.read<std::uint32_t>("version");
    if (in.failed()) {
        return in.error();
    }
    if (header.version == 1) {
        return Error::unsupported(fmt::format(
            "{}: GGUF version 1 (32-bit lengths) is obsolete; re-save it with a current "
            "llama.cpp (gguf-py) to get version 3",
            origin));
    }
    if (header.version != 2 && header.version != 3) {
        const bool bigEndian = (header.version & 0xFFFF) == 0 && header.version != 0;
        return Error::unsupported(fmt::format("{}: GGUF version {}{}", origin, header.version,
            bigEndian ? " looks byte-swapped: big-endian GGUF files are not supported"
                      : " is not supported (2 or 3)"));
    }
    const auto tensorCount = in.read<std::uint64_t>("tensor count");
    const auto kvCount = in.read<std::uint64_t>("metadata count");
    if (in.failed()) {
        return in.error();
    }
    // Each key/value takes at least 8 + 4 + 1 bytes and each tensor info at least 8 + 4 + 4 + 8:
    // reject impossible counts before looping over them.
    if (kvCount > in.remaining() / 13 || tensorCount > in.remaining() / 24) {
        return Error::badInput(fmt::format("{}: {} metadata entries and {} tensors cannot fit in a "
                                           "{} byte file",
            origin, kvCount, tensorCount, fileSize));
    }

    std::unordered_set<std::string> keys;
    for (std::uint64_t i = 0; i < kvCount && !in.failed(); ++i) {
        GgufKeyValue kv;
        kv.key = in.readString("metadata key");
        const auto type = in.read<std::uint32_t>("metadata value type");
        if (in.failed()) {
            break;
        }
        if (!knownValueType(type)) {
            in.fail(fmt::format("key '{}': unknown value type {}", kv.key, type));
            break;
        }
        if (!keys.insert(kv.key).second) {
            in.fail(fmt::format("duplicate metadata key '{}'", kv.key));
            break;
        }
        kv.type = GgufValueType(type);
        kv.value = readValue(in, kv.type, kv.key, 0, &kv.arrayType);
        header.metadata.push_back(std::move(kv));
    }
    if (in.failed()) {
        return in.error();
    }

    if (const auto* align = header.find("general.alignment")) {
        const bool isInt = align->value.is_number_unsigned() || align->value.is_number_integer();
        const auto a = isInt ? align->value.get<std::int64_t>() : 0;
        if (align->type != GgufValueType::U32 || a <= 0 || (a & (a - 1)) != 0) {
            return Error::badInput(
                fmt::format("{}: 'general.alignment' must be a uint32 power of two, not {}", origin,
                    // GGUF strings need not be UTF-8: never let dump() throw on them.
                    align->value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
        }
        header.alignment = std::uint64_t(a);
    }

    std::unordered_set<std::string> names;
    for (std::uint64_t i = 0; i < tensorCount && !in.failed(); ++i) {
        auto t = readTensorInfo(in, i);
        if (in.failed()) {
            break;
        }
        if (!names.insert(t.name).second) {
            in.fail(fmt::format("duplicate tensor name '{}'", t.name));
            break;
        }
        header.tensors.push_back(std::move(t));
    }
    if (in.failed()) {
        return in.error();
    }

    const std::uint64_t infoEnd = in.pos();
    header.dataOffset = (infoEnd + header.alignment - 1) / header.alignment * header.alignment;
    if (header.tensors.empty()) {
        return header; // vocab-only files end right after the header, padding optional
    }
    if (header.dataOffset > fileSize) {
        return Error::badInput(fmt::format("{}: data section would start at byte {} past the end "
                                           "of the {} byte file (truncated?)",
            origin, header.dataOffset, fileSize));
    }
    const std::uint64_t dataSize = fileSize - header.dataOffset;
    std::vector<const GgufTensor*> byOffset;
    byOffset.reserve(header.tensors.size());
    for (const auto& t : header.tensors) {
        if (t.offset % header.alignment != 0) {
            return Error::badInput(fmt::format("{}: tensor '{}' offset {} is not a multiple of the "
                                               "alignment {}",
                origin, t.name, t.offset, header.alignment));
        }
        if (t.offset > dataSize || t.bytes > dataSize - t.offset) {
            return Error::badInput(
                fmt::format("{}: tensor '{}' ends at byte {} of the data section "
                            "but it has {} (truncated?)",
                    origin, t.name, t.offset + t.bytes, dataSize));
        }
        byOffset.push_back(&t);
    }
    std::sort(byOffset.begin(), byOffset.end(),
        [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < byOffset.size(); ++i) {
        const auto* prev = byOffset[i - 1];
        if (byOffset[i]->offset < prev->offset + prev->bytes) {
            return Error::badInput(fmt::format("{}: tensor '{}' at offset {} overlaps tensor '{}' "
                                               "({} bytes at offset {})",
                origin, byOffset[i]->name, byOffset[i]->offset, prev->name, prev->bytes,
                prev->offset));
        }
    }
    return header;
}

Result<GgufFile> GgufFile::open(const std::filesystem::path& path)
{
    auto mapped = MappedFile::open(path);
    if (!mapped) {
        return mapped.error();
    }
    auto header = parseGgufHeader(mapped->bytes(), mapped->size(), displayPath(path));
    if (!header) {
        return header.error();
    }
    GgufFile file;
    file.m_file = std::move(*mapped);
    file.m_header = std::move(*header);
    return file;
}

std::span<const std::byte> GgufFile::data(const GgufTensor& tensor) const
{
    return m_file.bytes().subspan(
        std::size_t(m_header.dataOffset + tensor.offset), std::size_t(tensor.bytes));
}

} // namespace day0::checkpoint
