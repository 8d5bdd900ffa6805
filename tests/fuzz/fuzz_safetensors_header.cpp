// Fuzzes the safetensors header parser: any input must be rejected or give a header whose
// tensors tile the data section exactly.
#include "checkpoint/safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto bytes = std::as_bytes(std::span(data, size));
    const auto header = day0::checkpoint::parseSafetensorsHeader(bytes, size, "fuzz.safetensors");
    if (!header) {
        return 0;
    }
    std::uint64_t cursor = 0;
    for (const auto& t : header->tensors) {
        if (t.begin != cursor || t.end < t.begin
            || t.numel() * std::uint64_t(day0::dtypeSize(t.dtype)) != t.bytes()) {
            std::abort();
        }
        cursor = t.end;
    }
    if (header->dataOffset + cursor != size) {
        std::abort();
    }
    return 0;
}
