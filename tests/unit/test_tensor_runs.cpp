// merged_runs: which tensors of a list a device plane reduces as one.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "util/tensor_runs.hpp"

namespace {

std::array<float, 64> storage;

ddp_tensor at(int64_t offset, int64_t count, ddp_dtype dtype = DDP_DTYPE_F32, int32_t device_id = 0) {
    return ddp_tensor{storage.data() + offset, count, dtype, DDP_DEVICE_CUDA, device_id, 0};
}

TEST(TensorRuns, ViewsOfOneBufferBecomeOneTensor) {
    const std::array list{at(0, 3), at(3, 5), at(8, 1)};
    const auto runs = ddp::merged_runs(list);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].data, storage.data());
    EXPECT_EQ(runs[0].count, 9);
}

TEST(TensorRuns, GapsReordersDtypesAndDevicesSplitRuns) {
    const std::array list{at(0, 3), at(4, 2),                   // a gap of one element
                          at(8, 2), at(6, 2),                   // adjacent, but in the other order
                          at(20, 2), at(22, 2),                 // a run
                          at(24, 2, DDP_DTYPE_I32),             // another dtype
                          at(26, 2, DDP_DTYPE_I32, 1)};         // another device
    const auto runs = ddp::merged_runs(list);
    ASSERT_EQ(runs.size(), list.size() - 1);  // only at(20) and at(22) merge
    EXPECT_EQ(runs[3].data, storage.data() + 6);
    EXPECT_EQ(runs[4].data, storage.data() + 20);
    EXPECT_EQ(runs[4].count, 4);
    EXPECT_EQ(runs[5].dtype, DDP_DTYPE_I32);
}

TEST(TensorRuns, EmptyTensorsVanishAndDoNotBreakARun) {
    const std::array list{at(0, 0), at(0, 2), at(40, 0), at(2, 2)};
    const auto runs = ddp::merged_runs(list);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].count, 4);
    EXPECT_TRUE(ddp::merged_runs(std::span<const ddp_tensor>{}).empty());
}

}  // namespace
