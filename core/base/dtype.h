#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace day0 {

/// Element types of tensors, as safetensors names them (plus GGUF's block-quantised kinds are
/// described elsewhere). Shared by model specs, checkpoints and numerics.
enum class DType : std::uint8_t {
    F64,
    F32,
    F16,
    BF16,
    F8E4M3, ///< "F8_E4M3": the saturating "fn" variant, no infinities, max 448
    F8E5M2, ///< "F8_E5M2"
    F8E8M0, ///< "F8_E8M0": an unsigned power of two 2^(e−127), 0xFF NaN (MX block scales)
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
    /// E2M1, the 4-bit float of NVFP4 and MXFP4 (values 0, ±0.5 … ±6). A number format for the
    /// emulated FP4 precisions and their tolerance rules only: no tensor is stored in it (a
    /// safetensors "F4" tensor packs two values a byte and is not read as this type).
    F4E2M1,
    /// Signed 4-bit integers, -8 … 7: the number format of the emulated group-wise int4 weights
    /// and their tolerance rules only, stored in no tensor (packed int4 checkpoints hold them
    /// two or eight to an I8/I32 element).
    I4,
};

/// Size of one element in bytes.
constexpr int dtypeSize(DType t)
{
    switch (t) {
    case DType::F64:
    case DType::I64:
    case DType::U64:
        return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32:
        return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16:
        return 2;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F8E8M0:
    case DType::I8:
    case DType::U8:
    case DType::Bool:
    case DType::F4E2M1: // never a storage type (see above)
    case DType::I4:
        return 1;
    }
    return 1;
}

/// The safetensors name ("BF16", "F8_E4M3").
std::string_view dtypeName(DType t);
/// Parses a safetensors name; nullopt for unknown names.
std::optional<DType> parseDType(std::string_view name);
/// Parses user/HF spellings too: "bfloat16", "bf16", "float16", "fp8", "float8_e4m3fn", "fp32"...
std::optional<DType> parseDTypeLoose(std::string_view name);
/// True for floating-point types.
constexpr bool isFloat(DType t)
{
    return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16
        || t == DType::F8E4M3 || t == DType::F8E5M2 || t == DType::F8E8M0;
}

} // namespace day0
