#pragma once

#include "base/dtype.h"

#include <cstddef>
#include <cstdint>

namespace day0::numerics::detail {

/// How FP8 codes become F32. Both give the same bits; they differ in speed only.
enum class Fp8Kernel {
    Table, ///< 256-entry table lookups, four per SSE2 store (any x86-64 or other CPU)
    Avx2, ///< E4M3 decoded with integer and float arithmetic, eight per AVX2 store, the block's
          ///< scale multiplied in float; E5M2, and CPUs without AVX2, take the table
};

/// The fastest kernel this CPU runs: Avx2 where the CPU has AVX2, else Table.
Fp8Kernel fastestFp8Kernel();

/// Widens `count` FP8 values (`from`: F8E4M3 or F8E5M2) at `src` to F32 at `dst`, exactly (the
/// values of dtype_convert.h's scalar decoders, NaN bits included). Neither pointer needs
/// alignment. Large inputs are split over several threads, as widenBf16ToF32, and stored with
/// streaming stores. Thread-safe.
void widenFp8ToF32(const std::byte* src, DType from, std::byte* dst, std::size_t count,
    Fp8Kernel kernel = fastestFp8Kernel());

/// Dequantises a block-scaled FP8 matrix [rows, cols] (`from`: F8E4M3 or F8E5M2) to F32: element
/// (r, c) becomes float(double(v) · scales[(r / blockRows) · gridCols + c / blockCols]), v its
/// exact value and gridCols = ceil(cols / blockCols), rounded once, bit for bit what widening and
/// then scaling in double gives, NaN and subnormals included. Table: each block's 256 codes are
/// scaled once into a table the elements then look up. Avx2 (E4M3, a block row whose scales are
/// all floats, as every checkpoint's F32, BF16, F16 and E8M0 scales are): v · float(scale) in
/// float, the same bits because the exact product of a 4-bit and a 24-bit significand fits a
/// double; other block rows take the table. Threaded and streamed as widenFp8ToF32.
void widenFp8BlockScaledToF32(const std::byte* src, DType from, const double* scales,
    std::int64_t rows, std::int64_t cols, std::int64_t blockRows, std::int64_t blockCols,
    float* dst, Fp8Kernel kernel = fastestFp8Kernel());

} // namespace day0::numerics::detail
