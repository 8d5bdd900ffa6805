#pragma once

#include "base/dtype.h"
#include "base/mapped_file.h"
#include "base/result.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace day0::checkpoint {

/// GGUF metadata value types, numbered as in the GGUF specification.
enum class GgufValueType : std::uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

/// Name of a value type ("uint32", "string", ...).
std::string_view ggufValueTypeName(GgufValueType type);

/// One metadata key/value pair. Scalars and strings are held as JSON values; arrays as JSON
/// arrays (strings are kept byte for byte, so dump them with a replacing error handler).
struct GgufKeyValue {
    std::string key;
    GgufValueType type = GgufValueType::U8;
    GgufValueType arrayType = GgufValueType::U8; ///< element type when type == Array
    nlohmann::json value;
};

/// Element layout of a ggml tensor type: `blockSize` elements take `typeSize` bytes.
struct GgmlTypeInfo {
    std::uint32_t id = 0;
    std::string_view name; ///< "F16", "Q4_K", ...
    std::uint32_t blockSize = 1;
    std::uint32_t typeSize = 0;
};

/// The layout of a ggml type id, nullopt for unknown or removed ids.
std::optional<GgmlTypeInfo> ggmlTypeInfo(std::uint32_t id);

/// The safetensors dtype matching a plain (unquantised) ggml type, nullopt for block types.
std::optional<DType> ggmlPlainDType(std::uint32_t id);

/// One tensor of a GGUF file.
struct GgufTensor {
    std::string name;
    std::vector<std::int64_t> ne; ///< GGUF order: ne[0] is the innermost (contiguous) dimension
    GgmlTypeInfo type;
    std::uint64_t offset = 0; ///< relative to the data section
    std::uint64_t bytes = 0;

    /// Row-major shape, outermost first (ne reversed), as safetensors and PyTorch write it.
    [[nodiscard]] std::vector<std::int64_t> shape() const;
    [[nodiscard]] std::uint64_t numel() const;
};

/// A validated GGUF header: version, metadata and tensor infos.
struct GgufHeader {
    std::uint32_t version = 0;
    std::vector<GgufKeyValue> metadata;
    std::vector<GgufTensor> tensors; ///< in file order
    std::uint64_t alignment = 32; ///< general.alignment
    std::uint64_t dataOffset = 0; ///< where the data section starts in the file

    /// The value of `key`, nullptr if absent.
    [[nodiscard]] const GgufKeyValue* find(std::string_view key) const;
    /// A string value (e.g. "general.architecture"), empty if absent or not a string.
    [[nodiscard]] std::string stringValue(std::string_view key) const;
};

/// Parses and validates a GGUF header (versions 2 and 3, little-endian): bounded string and
/// array lengths, known value and tensor types, no duplicate keys or tensor names, at most 4
/// dimensions, overflow-checked sizes, rows a whole number of blocks, aligned offsets, tensors
/// inside the file and not overlapping. `prefix` holds the start of the file (all of it is
/// simplest); `fileSize` is the whole size; `origin` names the file in errors.
Result<GgufHeader> parseGgufHeader(
    std::span<const std::byte> prefix, std::uint64_t fileSize, const std::string& origin);

/// A GGUF file opened over a read-only memory map. Thread-safe for reading; move-only.
class GgufFile {
public:
    static Result<GgufFile> open(const std::filesystem::path& path);

    [[nodiscard]] const std::filesystem::path& path() const { return m_file.path(); }
    [[nodiscard]] const GgufHeader& header() const { return m_header; }
    /// The bytes of a tensor, in place.
    [[nodiscard]] std::span<const std::byte> data(const GgufTensor& tensor) const;
    /// The whole mapped file.
    [[nodiscard]] std::span<const std::byte> mappedBytes() const { return m_file.bytes(); }

private:
    MappedFile m_file;
    GgufHeader m_header;
};

/// True if the bytes start with the GGUF magic.
bool hasGgufMagic(std::span<const std::byte> prefix);

} // namespace day0::checkpoint
