#include "checkpoint/safetensors.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/strict_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace day0::checkpoint {

namespace {

using nlohmann::json;

/// Reads a non-negative JSON integer; false for anything else (floats, negatives, strings).
bool readUnsigned(const json& value, std::uint64_t& out)
{
    if (value.is_number_unsigned()) {
        out = value.get<std::uint64_t>();
        return true;
    }
    if (value.is_number_integer() && value.get<std::int64_t>() >= 0) {
        out = std::uint64_t(value.get<std::int64_t>());
        return true;
    }
    return false;
}

/// Reads one tensor entry with the schema's rules (exactly dtype, shape, data_offsets).
Result<TensorEntry> readEntry(const std::string& name, const json& value, const std::string& origin)
{
    const auto bad = [&](const std::string& what) {
        return Error::badInput(fmt::format("{}: tensor '{}': {}", origin, name, what));
    };
    if (!value.is_object()) {
        return bad("entry must be an object with dtype, shape and data_offsets");
    }
    for (const auto& [key, field] : value.items()) {
        if (key != "dtype" && key != "shape" && key != "data_offsets") {
            return bad(
                fmt::format("unknown field '{}' (allowed: dtype, shape, data_offsets)", key));
        }
    }
    TensorEntry entry;
    entry.name = name;
    const auto dtypeIt = value.find("dtype");
    if (dtypeIt == value.end() || !dtypeIt->is_string()) {
        return bad("missing string field 'dtype'");
    }
    const auto& dtypeText = dtypeIt->get_ref<const std::string&>();
    const auto dtype = parseDType(dtypeText);
    if (!dtype) {
        return bad(fmt::format("unknown dtype '{}' (known: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, "
                               "I64, I32, I16, I8, U64, U32, U16, U8, BOOL)",
            dtypeText));
    }
    entry.dtype = *dtype;

    const auto shapeIt = value.find("shape");
    if (shapeIt == value.end() || !shapeIt->is_array()) {
        return bad("missing array field 'shape'");
    }
    for (const auto& dim : *shapeIt) {
        std::uint64_t d = 0;
        if (!readUnsigned(dim, d) || d > std::uint64_t(INT64_MAX)) {
            return bad(fmt::format("shape entry {} is not a non-negative integer", dumpJson(dim)));
        }
        entry.shape.push_back(std::int64_t(d));
    }

    const auto offsetsIt = value.find("data_offsets");
    if (offsetsIt == value.end() || !offsetsIt->is_array() || offsetsIt->size() != 2
        || !readUnsigned((*offsetsIt)[0], entry.begin)
        || !readUnsigned((*offsetsIt)[1], entry.end)) {
        return bad("'data_offsets' must be two non-negative integers [begin, end]");
    }
    if (entry.end < entry.begin) {
        return bad(
            fmt::format("data_offsets [{}, {}] end before they begin", entry.begin, entry.end));
    }

    // Element count and byte size with overflow checks: a hostile header must not wrap around.
    std::uint64_t count = 1;
    for (const auto d : entry.shape) {
        if (d != 0 && count > UINT64_MAX / std::uint64_t(d)) {
            return bad(
                fmt::format("shape {} overflows 64-bit element count", formatShape(entry.shape)));
        }
        count *= std::uint64_t(d);
    }
    const auto elemSize = std::uint64_t(dtypeSize(entry.dtype));
    if (count > UINT64_MAX / elemSize) {
        return bad(fmt::format("shape {} × {} overflows 64-bit byte size", formatShape(entry.shape),
            dtypeName(entry.dtype)));
    }
    if (count * elemSize != entry.bytes()) {
        return bad(fmt::format("shape {} × {} is {} bytes but data_offsets [{}, {}] span {}",
            formatShape(entry.shape), dtypeName(entry.dtype), count * elemSize, entry.begin,
            entry.end, entry.bytes()));
    }
    return entry;
}

Result<std::map<std::string, std::string>> readMetadata(
    const json& value, const std::string& origin)
{
    std::map<std::string, std::string> out;
    if (value.is_null()) {
        return out;
    }
    if (!value.is_object()) {
        return Error::badInput(
            fmt::format("{}: '__metadata__' must be an object of strings", origin));
    }
    for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
            return Error::badInput(
                fmt::format("{}: '__metadata__' value of '{}' must be a string, not {}", origin,
                    key, v.type_name()));
        }
        out.emplace(key, v.get<std::string>());
    }
    return out;
}

} // namespace

std::uint64_t TensorEntry::numel() const
{
    std::uint64_t n = 1;
    for (const auto d : shape) {
        n *= std::uint64_t(d);
    }
    return n;
}

std::string formatShape(std::span<const std::int64_t> shape)
{
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        out += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return out + "]";
}

Result<SafetensorsHeader> parseSafetensorsHeader(
    std::span<const std::byte> prefix, std::uint64_t fileSize, const std::string& origin)
{
    if (fileSize < 8 || prefix.size() < 8) {
        return Error::badInput(fmt::format(
            "{}: file is {} bytes, too short for a safetensors header (8-byte length first)",
            origin, fileSize));
    }
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
        n = (n << 8) | std::uint64_t(std::to_integer<std::uint8_t>(prefix[std::size_t(i)]));
    }
    if (n > kMaxSafetensorsHeader) {
        return Error::badInput(fmt::format(
            "{}: header length {} exceeds the {} byte limit (not a safetensors file, or corrupt)",
            origin, n, kMaxSafetensorsHeader));
    }
    if (8 + n > fileSize) {
        return Error::badInput(
            fmt::format("{}: header length {} runs past the end of the {} byte file (truncated?)",
                origin, n, fileSize));
    }
    if (prefix.size() < 8 + n) {
        return Error::internal(fmt::format("{}: header bytes not supplied to the parser", origin));
    }
    const std::string_view text(reinterpret_cast<const char*>(prefix.data()) + 8, std::size_t(n));
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || text[first] != '{') {
        return Error::badInput(fmt::format("{}: header is not a JSON object", origin));
    }
    auto parsed = parseStrictJson(text, origin + ": header");
    if (!parsed) {
        return parsed.error();
    }
    SafetensorsHeader header;
    header.headerSize = n;
    header.dataOffset = 8 + n;
    for (const auto& [name, value] : parsed->items()) {
        if (name == "__metadata__") {
            auto metadata = readMetadata(value, origin);
            if (!metadata) {
                return metadata.error();
            }
            header.metadata = std::move(*metadata);
            continue;
        }
        auto entry = readEntry(name, value, origin);
        if (!entry) {
            return entry.error();
        }
        header.tensors.push_back(std::move(*entry));
    }

    // The data section must be tiled exactly: sorted by offset, each tensor starts where the
    // previous one ended, and the last one ends at the end of the file (no gap, no overlap, no
    // trailing bytes that could smuggle another format in).
    std::sort(header.tensors.begin(), header.tensors.end(),
        [](const TensorEntry& a, const TensorEntry& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
    const std::uint64_t dataSize = fileSize - header.dataOffset;
    std::uint64_t cursor = 0;
    const TensorEntry* previous = nullptr;
    for (const auto& t : header.tensors) {
        if (t.begin < cursor) {
            return Error::badInput(fmt::format(
                "{}: tensor '{}' data_offsets [{}, {}] overlap tensor '{}' which ends at {}",
                origin, t.name, t.begin, t.end, previous->name, cursor));
        }
        if (t.begin > cursor) {
            return Error::badInput(fmt::format("{}: tensor '{}' starts at byte {} of the data "
                                               "section, leaving a gap after byte {}",
                origin, t.name, t.begin, cursor));
        }
        if (t.end > dataSize) {
            return Error::badInput(fmt::format(
                "{}: tensor '{}' ends at byte {} but the data section has {} (truncated?)", origin,
                t.name, t.end, dataSize));
        }
        cursor = t.end;
        previous = &t;
    }
    if (cursor != dataSize) {
        return Error::badInput(fmt::format(
            "{}: data section has {} bytes but the tensors cover {}{}", origin, dataSize, cursor,
            previous ? fmt::format(" (last tensor '{}')", previous->name) : std::string()));
    }
    return header;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path)
{
    auto mapped = MappedFile::open(path);
    if (!mapped) {
        return mapped.error();
    }
    auto header = parseSafetensorsHeader(mapped->bytes(), mapped->size(), displayPath(path));
    if (!header) {
        return header.error();
    }
    SafetensorsFile file;
    file.m_file = std::move(*mapped);
    file.m_header = std::move(*header);
    file.m_byName.reserve(file.m_header.tensors.size());
    for (std::size_t i = 0; i < file.m_header.tensors.size(); ++i) {
        file.m_byName.emplace(file.m_header.tensors[i].name, i);
    }
    return file;
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const
{
    const auto it = m_byName.find(name);
    return it == m_byName.end() ? nullptr : &m_header.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const TensorEntry& entry) const
{
    return m_file.bytes().subspan(
        std::size_t(m_header.dataOffset + entry.begin), std::size_t(entry.bytes()));
}

} // namespace day0::checkpoint
