#include "numerics/tensor.h"

#include "numerics/float_formats.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

namespace day0::numerics {

namespace {

constexpr std::size_t kAlignment = 64;

// From this size on, a new buffer's pages are mapped in one call before they are zeroed.
constexpr std::size_t kPopulateBytes = std::size_t(1) << 20;

/// Maps the whole pages inside [p, p + size) writable (MADV_POPULATE_WRITE, Linux 5.14), so the
/// memset that follows takes no page fault: one fault per 4 KiB page costs about 40 µs on a
/// virtual machine that shadows the page tables (a streamed run's first layer allocated its
/// 50 MiB of buffers in 0.3-0.6 s there), the one call about 2 µs a page. Best effort: where
/// the advice is unknown the memset faults the pages in as before.
void populatePages(std::byte* p, std::size_t size)
{
#if defined(MADV_POPULATE_WRITE)
    static const auto page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + size) & ~(page - 1);
    if (end > begin) {
        ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
    }
#else
    (void)p;
    (void)size;
#endif
}

std::shared_ptr<std::byte> allocate(std::int64_t bytes)
{
    const auto size = std::size_t(std::max<std::int64_t>(bytes, 1));
    auto* p = static_cast<std::byte*>(::operator new(size, std::align_val_t(kAlignment)));
    if (size >= kPopulateBytes) {
        populatePages(p, size);
    }
    std::memset(p, 0, size);
    return std::shared_ptr<std::byte>(
        p, [](std::byte* q) { ::operator delete(q, std::align_val_t(kAlignment)); });
}

Shape contiguousStrides(const Shape& shape)
{
    Shape strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= shape[i];
    }
    return strides;
}

template <typename T> T saturateInt(double v)
{
    if (std::isnan(v)) {
        return T(0);
    }
    const double r = std::nearbyint(v);
    if (r <= double(std::numeric_limits<T>::lowest())) {
        return std::numeric_limits<T>::lowest();
    }
    if (r >= double(std::numeric_limits<T>::max())) {
        return std::numeric_limits<T>::max();
    }
    return T(r);
}

template <typename T> T loadRaw(const std::byte* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename T> void storeRaw(std::byte* p, T v) { std::memcpy(p, &v, sizeof(T)); }

} // namespace

std::int64_t numelOf(const Shape& shape)
{
    std::int64_t n = 1;
    for (const auto d : shape) {
        n *= d;
    }
    return n;
}

std::string shapeString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

double loadAsDouble(const std::byte* p, DType dtype)
{
    switch (dtype) {
    case DType::F64:
        return loadRaw<double>(p);
    case DType::F32:
        return double(loadRaw<float>(p));
    case DType::F16:
        return double(f16ToFloat(loadRaw<std::uint16_t>(p)));
    case DType::BF16:
        return double(bf16ToFloat(loadRaw<std::uint16_t>(p)));
    case DType::F8E4M3:
        return double(e4m3ToFloat(loadRaw<std::uint8_t>(p)));
    case DType::F8E5M2:
        return double(e5m2ToFloat(loadRaw<std::uint8_t>(p)));
    case DType::F8E8M0: {
        const auto e = loadRaw<std::uint8_t>(p);
        return e == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(e) - 127);
    }
    case DType::I64:
        return double(loadRaw<std::int64_t>(p));
    case DType::I32:
        return double(loadRaw<std::int32_t>(p));
    case DType::I16:
        return double(loadRaw<std::int16_t>(p));
    case DType::I8:
        return double(loadRaw<std::int8_t>(p));
    case DType::U64:
        return double(loadRaw<std::uint64_t>(p));
    case DType::U32:
        return double(loadRaw<std::uint32_t>(p));
    case DType::U16:
        return double(loadRaw<std::uint16_t>(p));
    case DType::U8:
    case DType::Bool:
        return double(loadRaw<std::uint8_t>(p));
    case DType::F4E2M1:
    case DType::I4:
        // Never a tensor's dtype (a number format of the emulation only): NaN, not a guess.
        return std::numeric_limits<double>::quiet_NaN();
    }
    return 0.0;
}

void storeFromDouble(std::byte* p, DType dtype, double value)
{
    switch (dtype) {
    case DType::F64:
        storeRaw(p, value);
        break;
    case DType::F32:
        storeRaw(p, float(value));
        break;
    case DType::F16:
        storeRaw(p, floatToF16(float(value)));
        break;
    case DType::BF16:
        storeRaw(p, floatToBf16(float(value)));
        break;
    case DType::F8E4M3:
        storeRaw(p, floatToE4m3(float(value)));
        break;
    case DType::F8E5M2:
        storeRaw(p, floatToE5m2(float(value)));
        break;
    case DType::F8E8M0: {
        // The nearest power of two at or above the value (MX scales round up so blocks fit).
        int e = 0;
        const double m = std::frexp(value, &e); // value = m · 2^e, m in [0.5, 1)
        const int exponent = !(value > 0.0) ? -127 : (m == 0.5 ? e - 1 : e);
        storeRaw(p, std::uint8_t(std::clamp(exponent + 127, 0, 254)));
        break;
    }
    case DType::I64:
        storeRaw(p, saturateInt<std::int64_t>(value));
        break;
    case DType::I32:
        storeRaw(p, saturateInt<std::int32_t>(value));
        break;
    case DType::I16:
        storeRaw(p, saturateInt<std::int16_t>(value));
        break;
    case DType::I8:
        storeRaw(p, saturateInt<std::int8_t>(value));
        break;
    case DType::U64:
        storeRaw(p, saturateInt<std::uint64_t>(value));
        break;
    case DType::U32:
        storeRaw(p, saturateInt<std::uint32_t>(value));
        break;
    case DType::U16:
        storeRaw(p, saturateInt<std::uint16_t>(value));
        break;
    case DType::U8:
        storeRaw(p, saturateInt<std::uint8_t>(value));
        break;
    case DType::Bool:
        storeRaw(p, std::uint8_t(value != 0.0 ? 1 : 0));
        break;
    case DType::F4E2M1:
    case DType::I4:
        storeRaw(p, std::uint8_t(0xFF)); // never a tensor's dtype (see loadAsDouble)
        break;
    }
}

Tensor Tensor::zeros(const Shape& shape, DType dtype)
{
    for (const auto d : shape) {
        if (d < 0) {
            throw std::invalid_argument("Tensor: negative dimension in " + shapeString(shape));
        }
    }
    Tensor t;
    t.m_dtype = dtype;
    t.m_shape = shape;
    t.m_strides = contiguousStrides(shape);
    t.m_storageBytes = numelOf(shape) * dtypeSize(dtype);
    t.m_storage = allocate(t.m_storageBytes);
    return t;
}

Tensor Tensor::fromFloats(const Shape& shape, std::span<const float> values)
{
    if (std::int64_t(values.size()) != numelOf(shape)) {
        throw std::invalid_argument(
            fmt::format("Tensor: {} values for shape {}", values.size(), shapeString(shape)));
    }
    Tensor t = zeros(shape, DType::F32);
    std::memcpy(t.rawData(), values.data(), values.size_bytes());
    return t;
}

Tensor Tensor::fromDoubles(const Shape& shape, std::span<const double> values)
{
    if (std::int64_t(values.size()) != numelOf(shape)) {
        throw std::invalid_argument(
            fmt::format("Tensor: {} values for shape {}", values.size(), shapeString(shape)));
    }
    Tensor t = zeros(shape, DType::F64);
    std::memcpy(t.rawData(), values.data(), values.size_bytes());
    return t;
}

Tensor Tensor::fromInts(const Shape& shape, std::span<const std::int64_t> values)
{
    if (std::int64_t(values.size()) != numelOf(shape)) {
        throw std::invalid_argument(
            fmt::format("Tensor: {} values for shape {}", values.size(), shapeString(shape)));
    }
    Tensor t = zeros(shape, DType::I64);
    std::memcpy(t.rawData(), values.data(), values.size_bytes());
    return t;
}

Tensor Tensor::fromBytes(const Shape& shape, DType dtype, std::span<const std::byte> bytes)
{
    Tensor t = zeros(shape, dtype);
    if (std::int64_t(bytes.size()) != t.byteSize()) {
        throw std::invalid_argument(fmt::format(
            "Tensor: {} bytes for {} {}", bytes.size(), dtypeName(dtype), shapeString(shape)));
    }
    std::memcpy(t.rawData(), bytes.data(), bytes.size());
    return t;
}

int Tensor::normaliseDim(int d) const
{
    const int r = rank();
    const int n = d < 0 ? d + r : d;
    if (n < 0 || n >= r) {
        throw std::out_of_range(fmt::format("Tensor: dimension {} of a rank-{} tensor", d, r));
    }
    return n;
}

std::int64_t Tensor::dim(int d) const { return m_shape[std::size_t(normaliseDim(d))]; }

bool Tensor::isContiguous() const
{
    return m_strides == contiguousStrides(m_shape) || numel() <= 1;
}

std::byte* Tensor::rawData() { return m_storage.get() + m_offset * dtypeSize(m_dtype); }

const std::byte* Tensor::rawData() const { return m_storage.get() + m_offset * dtypeSize(m_dtype); }

std::span<const std::byte> Tensor::bytes() const
{
    if (!isContiguous()) {
        throw std::logic_error("Tensor::bytes on a non-contiguous view");
    }
    return { rawData(), std::size_t(byteSize()) };
}

Tensor Tensor::view(Shape shape) const
{
    if (!isContiguous()) {
        throw std::logic_error("Tensor::view on a non-contiguous tensor; call contiguous() first");
    }
    std::int64_t known = 1;
    int inferred = -1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            inferred = int(i);
        } else {
            known *= shape[i];
        }
    }
    if (inferred >= 0 && known > 0) {
        shape[std::size_t(inferred)] = numel() / known;
    }
    if (numelOf(shape) != numel()) {
        throw std::invalid_argument(fmt::format(
            "Tensor::view: cannot view {} as {}", shapeString(m_shape), shapeString(shape)));
    }
    Tensor t = *this;
    t.m_shape = std::move(shape);
    t.m_strides = contiguousStrides(t.m_shape);
    return t;
}

Tensor Tensor::narrow(int d, std::int64_t start, std::int64_t length) const
{
    const int n = normaliseDim(d);
    if (start < 0 || length < 0 || start + length > m_shape[std::size_t(n)]) {
        throw std::out_of_range(fmt::format("Tensor::narrow: [{}, {}) of dimension {} (size {})",
            start, start + length, n, m_shape[std::size_t(n)]));
    }
    Tensor t = *this;
    t.m_offset += start * m_strides[std::size_t(n)];
    t.m_shape[std::size_t(n)] = length;
    return t;
}

Tensor Tensor::select(int d, std::int64_t index) const
{
    const int n = normaliseDim(d);
    Tensor t = narrow(n, index, 1);
    t.m_shape.erase(t.m_shape.begin() + n);
    t.m_strides.erase(t.m_strides.begin() + n);
    return t;
}

Tensor Tensor::transpose(int a, int b) const
{
    const int na = normaliseDim(a);
    const int nb = normaliseDim(b);
    Tensor t = *this;
    std::swap(t.m_shape[std::size_t(na)], t.m_shape[std::size_t(nb)]);
    std::swap(t.m_strides[std::size_t(na)], t.m_strides[std::size_t(nb)]);
    return t;
}

std::int64_t Tensor::offsetOf(std::int64_t flatIndex) const
{
    std::int64_t offset = m_offset;
    for (std::size_t i = m_shape.size(); i-- > 0;) {
        const std::int64_t size = m_shape[i];
        offset += (flatIndex % size) * m_strides[i];
        flatIndex /= size;
    }
    return offset;
}

Tensor Tensor::contiguous() const { return isContiguous() ? *this : clone(); }

Tensor Tensor::clone() const
{
    Tensor t = zeros(m_shape, m_dtype);
    t.copyFrom(*this);
    return t;
}

Tensor Tensor::to(DType dtype) const
{
    Tensor t = zeros(m_shape, dtype);
    t.copyFrom(*this);
    return t;
}

double Tensor::item(std::int64_t i) const
{
    return loadAsDouble(m_storage.get() + offsetOf(i) * dtypeSize(m_dtype), m_dtype);
}

void Tensor::copyFrom(const Tensor& src)
{
    if (src.m_shape != m_shape) {
        throw std::invalid_argument(fmt::format(
            "Tensor::copyFrom: shape {} into {}", shapeString(src.m_shape), shapeString(m_shape)));
    }
    const std::int64_t n = numel();
    if (src.isContiguous() && isContiguous()) {
        if (src.m_dtype == m_dtype) {
            std::memmove(rawData(), src.rawData(), std::size_t(byteSize()));
            return;
        }
        if (isFloat(src.m_dtype) && isFloat(m_dtype) && src.m_dtype != DType::F64
            && m_dtype != DType::F64) {
            std::vector<float> tmp(static_cast<std::size_t>(n));
            decodeFloats(src.rawData(), n, src.m_dtype, tmp.data());
            encodeFloats(tmp.data(), n, m_dtype, rawData());
            return;
        }
    }
    const int srcSize = dtypeSize(src.m_dtype);
    const int dstSize = dtypeSize(m_dtype);
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = loadAsDouble(src.m_storage.get() + src.offsetOf(i) * srcSize, src.m_dtype);
        storeFromDouble(m_storage.get() + offsetOf(i) * dstSize, m_dtype, v);
    }
}

std::vector<double> Tensor::toDoubles() const
{
    const std::int64_t n = numel();
    std::vector<double> out(static_cast<std::size_t>(n));
    if (isContiguous() && m_dtype == DType::F64) {
        std::memcpy(out.data(), rawData(), std::size_t(n) * sizeof(double));
    } else if (isContiguous() && m_dtype == DType::F32) {
        const float* p = data<float>();
        std::copy(p, p + n, out.begin());
    } else {
        for (std::int64_t i = 0; i < n; ++i) {
            out[std::size_t(i)] = item(i);
        }
    }
    return out;
}

std::vector<float> Tensor::toFloats() const
{
    const std::int64_t n = numel();
    std::vector<float> out(static_cast<std::size_t>(n));
    if (isContiguous() && isFloat(m_dtype)) {
        decodeFloats(rawData(), n, m_dtype, out.data());
    } else {
        for (std::int64_t i = 0; i < n; ++i) {
            out[std::size_t(i)] = float(item(i));
        }
    }
    return out;
}

std::vector<std::int64_t> Tensor::toInts() const
{
    const std::int64_t n = numel();
    std::vector<std::int64_t> out(static_cast<std::size_t>(n));
    const int size = dtypeSize(m_dtype);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::byte* p = m_storage.get() + offsetOf(i) * size;
        // 64-bit integers are read exactly; everything else goes through double.
        if (m_dtype == DType::I64) {
            out[std::size_t(i)] = loadRaw<std::int64_t>(p);
        } else if (m_dtype == DType::U64) {
            out[std::size_t(i)] = std::int64_t(loadRaw<std::uint64_t>(p));
        } else {
            out[std::size_t(i)] = std::int64_t(loadAsDouble(p, m_dtype));
        }
    }
    return out;
}

} // namespace day0::numerics
