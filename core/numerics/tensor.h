#pragma once

#include "base/dtype.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace day0::numerics {

/// Tensor dimensions, outermost first (PyTorch order).
using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a rank-0 scalar).
std::int64_t numelOf(const Shape& shape);
/// "[2, 16, 64]".
std::string shapeString(const Shape& shape);

/// An n-dimensional array over shared storage: a dtype, a shape, strides (in elements) and an
/// offset into a 64-byte aligned buffer. Views (view, narrow, select, transpose) share storage
/// with their source; copies (clone, contiguous, to) do not. Not synchronised: concurrent
/// writers to one storage must partition it themselves.
class Tensor {
public:
    Tensor() = default;

    /// A new zero-filled contiguous tensor.
    static Tensor zeros(const Shape& shape, DType dtype);
    /// A new contiguous F32 tensor holding `values` (size must equal the shape's numel).
    static Tensor fromFloats(const Shape& shape, std::span<const float> values);
    /// A new contiguous F64 tensor holding `values`.
    static Tensor fromDoubles(const Shape& shape, std::span<const double> values);
    /// A new contiguous I64 tensor holding `values`.
    static Tensor fromInts(const Shape& shape, std::span<const std::int64_t> values);
    /// A new contiguous tensor whose storage is a copy of `bytes` (size must match).
    static Tensor fromBytes(const Shape& shape, DType dtype, std::span<const std::byte> bytes);

    [[nodiscard]] bool defined() const { return m_storage != nullptr; }
    [[nodiscard]] DType dtype() const { return m_dtype; }
    [[nodiscard]] const Shape& shape() const { return m_shape; }
    [[nodiscard]] const Shape& strides() const { return m_strides; }
    [[nodiscard]] int rank() const { return int(m_shape.size()); }
    /// Size of dimension `d`; negative `d` counts from the end.
    [[nodiscard]] std::int64_t dim(int d) const;
    [[nodiscard]] std::int64_t numel() const { return numelOf(m_shape); }
    [[nodiscard]] std::int64_t byteSize() const { return numel() * dtypeSize(m_dtype); }
    /// True if the elements are laid out densely in row-major order.
    [[nodiscard]] bool isContiguous() const;

    /// Pointer to the first element (element type must match the dtype's width).
    template <typename T> T* data() { return reinterpret_cast<T*>(rawData()); }
    template <typename T> const T* data() const { return reinterpret_cast<const T*>(rawData()); }
    std::byte* rawData();
    [[nodiscard]] const std::byte* rawData() const;
    /// The bytes of a contiguous tensor.
    [[nodiscard]] std::span<const std::byte> bytes() const;

    /// Same storage, new shape; requires a contiguous tensor and the same numel. One dimension
    /// may be -1 (inferred).
    [[nodiscard]] Tensor view(Shape shape) const;
    /// Elements [start, start + length) of dimension `d` (a view).
    [[nodiscard]] Tensor narrow(int d, std::int64_t start, std::int64_t length) const;
    /// Index `index` of dimension `d`, which is removed (a view).
    [[nodiscard]] Tensor select(int d, std::int64_t index) const;
    /// Swaps two dimensions (a view).
    [[nodiscard]] Tensor transpose(int a, int b) const;
    /// This tensor if contiguous, else a contiguous copy.
    [[nodiscard]] Tensor contiguous() const;
    /// A contiguous deep copy.
    [[nodiscard]] Tensor clone() const;
    /// A contiguous copy converted to `dtype`; float narrowing rounds to nearest-even, float to
    /// integer rounds to nearest (saturating).
    [[nodiscard]] Tensor to(DType dtype) const;

    /// Element at flat row-major index `i`, as double (any dtype, any layout).
    [[nodiscard]] double item(std::int64_t i) const;
    /// Every element in row-major order, as double.
    [[nodiscard]] std::vector<double> toDoubles() const;
    /// Every element in row-major order, as float.
    [[nodiscard]] std::vector<float> toFloats() const;
    /// Every element in row-major order, as int64 (floats are truncated).
    [[nodiscard]] std::vector<std::int64_t> toInts() const;

    /// Copies `src` (same shape, any dtype and layout) into this tensor, converting.
    void copyFrom(const Tensor& src);

private:
    [[nodiscard]] std::int64_t offsetOf(std::int64_t flatIndex) const;
    [[nodiscard]] int normaliseDim(int d) const;

    std::shared_ptr<std::byte> m_storage;
    std::int64_t m_storageBytes = 0;
    std::int64_t m_offset = 0; ///< in elements
    Shape m_shape;
    Shape m_strides;
    DType m_dtype = DType::F32;
};

/// Reads one stored element of `dtype` at `p` as double.
double loadAsDouble(const std::byte* p, DType dtype);
/// Stores `value` at `p` as `dtype` (rounding to nearest-even / saturating for integers).
void storeFromDouble(std::byte* p, DType dtype, double value);

} // namespace day0::numerics
