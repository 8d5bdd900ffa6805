// Fuzzes the GGUF header parser: accepted tensors must lie inside the file without overlapping.
#include "checkpoint/gguf.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto bytes = std::as_bytes(std::span(data, size));
    const auto header = day0::checkpoint::parseGgufHeader(bytes, size, "fuzz.gguf");
    if (!header) {
        return 0;
    }
    for (const auto& t : header->tensors) {
        if (header->dataOffset + t.offset + t.bytes > size || t.offset % header->alignment != 0) {
            std::abort();
        }
    }
    return 0;
}
