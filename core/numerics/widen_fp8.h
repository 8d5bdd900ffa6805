#pragma once

#include "base/dtype.h"

#include <cstddef>
#include <cstdint>

namespace day0::numerics::detail {

/// Widens `count` FP8 values (`from`: F8E4M3 or F8E5M2) at `src` to F32 at `dst`, exactly (a
/// 256-entry table of the values dtype_convert.h's scalar decoders give). Neither pointer needs
/// alignment. Large inputs are split over several threads, as widenBf16ToF32. Thread-safe.
void widenFp8ToF32(const std::byte* src, DType from, std::byte* dst, std::size_t count);

} // namespace day0::numerics::detail
