#pragma once

#include <cstddef>
#include <cstdint>

namespace day0::numerics::detail {

/// Widens `count` BF16 values at `src` to F32 at `dst` (bit-exact: each value shifted left by
/// 16). Neither pointer needs alignment. Large inputs are split over several threads and written
/// with streaming stores, so the output does not evict the input from the caches nor pay a read
/// for ownership of every output line. Thread-safe.
void widenBf16ToF32(const std::byte* src, std::byte* dst, std::size_t count);

} // namespace day0::numerics::detail
