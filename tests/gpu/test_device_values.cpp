// The device test's expectations, checked on the host: a wrong expectation
// would fail (or pass) the GPU run for the wrong reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "device_values.hpp"

namespace {

template <typename T>
T stored(ddp_dtype dtype, double value) {
    std::vector<std::byte> bytes(element_size(dtype));
    store(bytes, 0, dtype, value);
    T out;
    std::memcpy(&out, bytes.data(), sizeof out);
    return out;
}

// 5 * 10 * 15 = 750: PROD of tensor 0, element 4 on 3 ranks.
TEST(DeviceValues, ThreeRankProductsAreWhatTheGpuComputes) {
    ASSERT_EQ(expected_value(DDP_OP_PROD, 3, 0, 4), 750.0);
    // bf16 rounds to nearest even (0x443C), as NCCL and the CPU path store it; truncation gives 0x443B.
    EXPECT_EQ(stored<uint16_t>(DDP_DTYPE_BF16, 750), 0x443C);
    // 8-bit products wrap modulo 256, as they do in the dtype's arithmetic.
    EXPECT_EQ(stored<uint8_t>(DDP_DTYPE_U8, 750), 750 % 256);
    EXPECT_EQ(stored<int8_t>(DDP_DTYPE_I8, 750), static_cast<int8_t>(750 - 3 * 256));
}

TEST(DeviceValues, HalvesAndSmallIntegersAreExactInF16AndBf16) {
    EXPECT_EQ(stored<uint16_t>(DDP_DTYPE_F16, 7.5), 0x4780);
    EXPECT_EQ(stored<uint16_t>(DDP_DTYPE_BF16, 7.5), 0x40F0);
}

}  // namespace
