#include "base/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace day0 {

namespace {

    constexpr std::array<std::pair<DType, std::string_view>, 16> kNames { {
        { DType::F64, "F64" },
        { DType::F32, "F32" },
        { DType::F16, "F16" },
        { DType::BF16, "BF16" },
        { DType::F8E4M3, "F8_E4M3" },
        { DType::F8E5M2, "F8_E5M2" },
        { DType::F8E8M0, "F8_E8M0" },
        { DType::I64, "I64" },
        { DType::I32, "I32" },
        { DType::I16, "I16" },
        { DType::I8, "I8" },
        { DType::U64, "U64" },
        { DType::U32, "U32" },
        { DType::U16, "U16" },
        { DType::U8, "U8" },
        { DType::Bool, "BOOL" },
    } };

} // namespace

std::string_view dtypeName(DType t)
{
    if (t == DType::F4E2M1) {
        return "F4"; // safetensors' name; parseDType does not take it (see DType::F4E2M1)
    }
    if (t == DType::I4) {
        return "I4"; // no safetensors type; parseDType does not take it (see DType::I4)
    }
    for (const auto& [type, name] : kNames) {
        if (type == t) {
            return name;
        }
    }
    return "?";
}

std::optional<DType> parseDType(std::string_view name)
{
    for (const auto& [type, n] : kNames) {
        if (n == name) {
            return type;
        }
    }
    return std::nullopt;
}

std::optional<DType> parseDTypeLoose(std::string_view name)
{
    std::string s(name);
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (s.rfind("torch.", 0) == 0) {
        s = s.substr(6);
    }
    static const std::array<std::pair<std::string_view, DType>, 19> kAliases { {
        { "float64", DType::F64 },
        { "fp64", DType::F64 },
        { "double", DType::F64 },
        { "float32", DType::F32 },
        { "fp32", DType::F32 },
        { "float", DType::F32 },
        { "float16", DType::F16 },
        { "fp16", DType::F16 },
        { "half", DType::F16 },
        { "bfloat16", DType::BF16 },
        { "bf16", DType::BF16 },
        { "fp8", DType::F8E4M3 },
        { "float8_e4m3fn", DType::F8E4M3 },
        { "e4m3", DType::F8E4M3 },
        { "fp8_e4m3", DType::F8E4M3 },
        { "float8_e5m2", DType::F8E5M2 },
        { "e5m2", DType::F8E5M2 },
        { "fp8_e5m2", DType::F8E5M2 },
        { "int8", DType::I8 },
    } };
    for (const auto& [alias, type] : kAliases) {
        if (alias == s) {
            return type;
        }
    }
    std::string upper(name);
    std::transform(upper.begin(), upper.end(), upper.begin(),
        [](unsigned char c) { return char(std::toupper(c)); });
    return parseDType(upper);
}

} // namespace day0
