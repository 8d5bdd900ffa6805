#pragma once

#include "base/dtype.h"
#include "base/result.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace day0::numerics {

// Scalar conversions. Every narrowing rounds to nearest, ties to even, handles subnormals, and
// maps NaN to a quiet NaN with the input's sign (E4M3 has only 0x7F/0xFF). Overflow: F16, BF16
// and E5M2 go to ±infinity as IEEE 754 says; E4M3 ("fn": no infinities) saturates to ±448,
// infinities included (NVIDIA's satfinite; PyTorch's .to(float8_e4m3fn) gives NaN from 480 up).
// I8 saturates to [-128, 127], NaN gives 0. All functions are pure and thread-safe.

/// BF16 bits → float (exact).
inline float bf16ToFloat(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }
/// float → BF16 bits.
std::uint16_t floatToBf16(float f);
/// F16 bits → float (exact).
float f16ToFloat(std::uint16_t h);
/// float → F16 bits.
std::uint16_t floatToF16(float f);
/// F8_E4M3 (fn) bits → float (exact).
float e4m3ToFloat(std::uint8_t b);
/// float → F8_E4M3 (fn) bits, saturating.
std::uint8_t floatToE4m3(float f);
/// F8_E5M2 bits → float (exact).
float e5m2ToFloat(std::uint8_t b);
/// float → F8_E5M2 bits.
std::uint8_t floatToE5m2(float f);
/// float → int8, saturating; NaN → 0.
std::int8_t floatToI8(float f);
/// An E2M1 (FP4) code, the low 4 bits of `nibble` → its value: bit 3 sign, bits 2–1 exponent
/// (bias 1), bit 0 mantissa; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (OCP MX v1.0).
float e2m1ToFloat(std::uint8_t nibble);
/// float → the nearest E2M1 code, ties to the even code (mantissa bit 0), saturating past ±6 as
/// the MX and NVFP4 quantisers do; NaN → +0 (E2M1 has no NaN: callers keep NaN themselves).
std::uint8_t floatToE2m1(float f);

/// double → the bits of a narrow float type (F32, F16, BF16, F8E4M3, F8E5M2), rounded once,
/// with the same rules as above (so F64 sources are not double-rounded through F32).
std::uint32_t roundDoubleTo(double x, DType to);

/// True if convertElements() handles this pair: any of F64/F32/F16/BF16/F8E4M3/F8E5M2 to any of
/// them or to I8, and any type to itself.
bool canConvert(DType from, DType to);

/// Converts `count` elements from `src` (type `from`) to `dst` (type `to`). Buffers need no
/// alignment and must hold count × element size bytes. Thread-safe. BF16 → F32 (the loading
/// path) is vectorised and, for large inputs, split over several threads; other pairs run on
/// the calling thread, so large inputs are the caller's to split.
Result<void> convertElements(std::span<const std::byte> src, DType from, std::span<std::byte> dst,
    DType to, std::size_t count);

/// Reads element `i` of a float-typed buffer as double (for statistics and tests).
double loadAsDouble(std::span<const std::byte> src, DType type, std::size_t i);

} // namespace day0::numerics
