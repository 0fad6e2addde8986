// f16 and bf16 conversions and the element-wise kernels built on them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "device/cpu/elementwise.hpp"
#include "device/cpu/half.hpp"

namespace {

TEST(Half, F16RoundTripsEveryFiniteValue) {
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
        const auto h = static_cast<uint16_t>(bits);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;  // NaN payloads
        EXPECT_EQ(ddp::float_to_f16(ddp::f16_to_float(h)), h) << std::hex << bits;
    }
}

TEST(Half, F16KnownValuesAndRounding) {
    EXPECT_EQ(ddp::float_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(ddp::float_to_f16(-2.0f), 0xc000);
    EXPECT_EQ(ddp::float_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(ddp::float_to_f16(65520.0f), 0x7c00);  // rounds to infinity
    EXPECT_EQ(ddp::float_to_f16(5.9604644775390625e-8f), 0x0001);  // smallest subnormal
    EXPECT_EQ(ddp::float_to_f16(2.98e-8f), 0x0000);  // below half of it
    // 1 + 2^-11 lies halfway between 1 and the next f16: ties to even.
    EXPECT_EQ(ddp::float_to_f16(1.0f + 0.00048828125f), 0x3c00);
    EXPECT_EQ(ddp::float_to_f16(1.0f + 3 * 0.00048828125f), 0x3c02);
    EXPECT_TRUE(std::isnan(ddp::f16_to_float(ddp::float_to_f16(std::nanf("")))));
}

TEST(Half, Bf16KnownValuesAndRounding) {
    EXPECT_EQ(ddp::float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(ddp::bf16_to_float(0xc000), -2.0f);
    EXPECT_EQ(ddp::float_to_bf16(1.0f + 1.0f / 256), 0x3f80);      // tie, to even
    EXPECT_EQ(ddp::float_to_bf16(1.0f + 3.0f / 256), 0x3f82);      // tie, to even (up)
    EXPECT_TRUE(std::isnan(ddp::bf16_to_float(ddp::float_to_bf16(std::nanf("")))));
}

TEST(Half, ReduceAndDivide) {
    uint16_t a[3] = {ddp::float_to_f16(1.5f), ddp::float_to_f16(-2.0f), ddp::float_to_f16(4.0f)};
    const uint16_t b[3] = {ddp::float_to_f16(0.5f), ddp::float_to_f16(3.0f), ddp::float_to_f16(-8.0f)};
    ddp::reduce_into(a, b, 3, DDP_DTYPE_F16, DDP_OP_SUM);
    EXPECT_EQ(ddp::f16_to_float(a[0]), 2.0f);
    EXPECT_EQ(ddp::f16_to_float(a[1]), 1.0f);
    EXPECT_EQ(ddp::f16_to_float(a[2]), -4.0f);
    ddp::reduce_into(a, b, 3, DDP_DTYPE_F16, DDP_OP_MAX);
    EXPECT_EQ(ddp::f16_to_float(a[2]), -4.0f);
    EXPECT_EQ(ddp::f16_to_float(a[1]), 3.0f);
    uint16_t c[2] = {ddp::float_to_bf16(6.0f), ddp::float_to_bf16(-3.0f)};
    ddp::divide_copy(c, c, 2, DDP_DTYPE_BF16, 3.0);
    EXPECT_EQ(ddp::bf16_to_float(c[0]), 2.0f);
    EXPECT_EQ(ddp::bf16_to_float(c[1]), -1.0f);
}

}  // namespace
