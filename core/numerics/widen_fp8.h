#pragma once

#include "base/dtype.h"

#include <cstddef>
#include <cstdint>

namespace day0::numerics::detail {

/// Widens `count` FP8 values (`from`: F8E4M3 or F8E5M2) at `src` to F32 at `dst`, exactly (a
/// 256-entry table of the values dtype_convert.h's scalar decoders give). Neither pointer needs
/// alignment. Large inputs are split over several threads, as widenBf16ToF32, and stored with
/// streaming stores (SSE2). Thread-safe.
void widenFp8ToF32(const std::byte* src, DType from, std::byte* dst, std::size_t count);

/// Dequantises a block-scaled FP8 matrix [rows, cols] (`from`: F8E4M3 or F8E5M2) to F32: element
/// (r, c) becomes float(double(v) · scales[(r / blockRows) · gridCols + c / blockCols]), v its
/// exact value and gridCols = ceil(cols / blockCols), rounded once, bit for bit what widening and
/// then scaling in double gives, NaN and subnormals included. Each block's 256 codes are scaled
/// once into a table that the elements then look up. Threaded and streamed as widenFp8ToF32.
void widenFp8BlockScaledToF32(const std::byte* src, DType from, const double* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols,
    float* dst);

} // namespace day0::numerics::detail
