#include "numerics/float_formats.h"
#include "numerics/tensor.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

using namespace day0;
using namespace day0::numerics;

namespace {

Tensor iota(const Shape& shape)
{
    std::vector<float> v(static_cast<std::size_t>(numelOf(shape)));
    std::iota(v.begin(), v.end(), 0.0f);
    return Tensor::fromFloats(shape, v);
}

} // namespace

TEST(Tensor, ZerosHaveShapeAndStrides)
{
    const Tensor t = Tensor::zeros({ 2, 3, 4 }, DType::BF16);
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.byteSize(), 48);
    EXPECT_EQ(t.strides(), (Shape { 12, 4, 1 }));
    EXPECT_TRUE(t.isContiguous());
    EXPECT_EQ(t.dim(-1), 4);
    EXPECT_EQ(shapeString(t.shape()), "[2, 3, 4]");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.rawData()) % 64, 0u);
}

TEST(Tensor, ViewsShareStorage)
{
    Tensor t = iota({ 2, 3 });
    Tensor v = t.view({ 3, -1 });
    EXPECT_EQ(v.shape(), (Shape { 3, 2 }));
    v.data<float>()[5] = 42.0f;
    EXPECT_EQ(t.item(5), 42.0);
    EXPECT_THROW((void)t.view({ 4, 2 }), std::invalid_argument);
}

TEST(Tensor, NarrowSelectTranspose)
{
    const Tensor t = iota({ 3, 4 });
    const Tensor col = t.narrow(1, 1, 2); // columns 1..2
    EXPECT_FALSE(col.isContiguous());
    EXPECT_EQ(col.toDoubles(), (std::vector<double> { 1, 2, 5, 6, 9, 10 }));
    const Tensor row = t.select(0, 2);
    EXPECT_EQ(row.shape(), (Shape { 4 }));
    EXPECT_EQ(row.toDoubles(), (std::vector<double> { 8, 9, 10, 11 }));
    const Tensor tt = t.transpose(0, 1).contiguous();
    EXPECT_EQ(tt.shape(), (Shape { 4, 3 }));
    EXPECT_EQ(tt.toDoubles(), (std::vector<double> { 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11 }));
    EXPECT_THROW((void)t.narrow(0, 2, 2), std::out_of_range);
    EXPECT_THROW((void)t.select(2, 0), std::out_of_range);
}

TEST(Tensor, ConversionRoundsToNearestEven)
{
    const Tensor t
        = Tensor::fromFloats({ 3 }, std::vector<float> { 1.0f + 1.0f / 256.0f, 0.1f, -3.0f });
    const Tensor b = t.to(DType::BF16);
    EXPECT_EQ(b.dtype(), DType::BF16);
    EXPECT_EQ(b.item(0), 1.0);
    EXPECT_EQ(b.item(1), double(roundToFormat(0.1f, DType::BF16)));
    const Tensor i
        = Tensor::fromFloats({ 3 }, std::vector<float> { 2.5f, -300.0f, 7.4f }).to(DType::I8);
    EXPECT_EQ(i.toInts(), (std::vector<std::int64_t> { 2, -128, 7 }));
    // A strided view converts element by element.
    const Tensor s = iota({ 2, 2 }).transpose(0, 1).to(DType::F64);
    EXPECT_EQ(s.toDoubles(), (std::vector<double> { 0, 2, 1, 3 }));
}

TEST(Tensor, FromBytesChecksSize)
{
    std::vector<std::byte> bytes(8);
    EXPECT_NO_THROW((void)Tensor::fromBytes({ 2 }, DType::F32, bytes));
    EXPECT_THROW((void)Tensor::fromBytes({ 3 }, DType::F32, bytes), std::invalid_argument);
    const std::vector<std::int64_t> ids { 1LL << 60, -5 };
    EXPECT_EQ(Tensor::fromInts({ 2 }, ids).toInts(), ids);
}

TEST(Tensor, CopyFromConvertsAcrossLayouts)
{
    Tensor dst = Tensor::zeros({ 2, 2 }, DType::F16);
    dst.copyFrom(iota({ 2, 2 }).transpose(0, 1));
    EXPECT_EQ(dst.toDoubles(), (std::vector<double> { 0, 2, 1, 3 }));
    EXPECT_THROW(dst.copyFrom(iota({ 4 })), std::invalid_argument);
}
