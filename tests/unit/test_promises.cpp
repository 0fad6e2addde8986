// Issue 8's broken promises that one process can show (the self backend,
// run without a launcher). Each test failed on libddp 0.1.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ddp/ddp.h"
#include "self_world.hpp"

namespace {

// 1. A huge but finite timeout meant an instant DDP_ERR_TIMEOUT (the deadline overflowed).
TEST(Promises, HugeTimeoutsWaitInsteadOfExpiring) {
    ddp_comm* world = start_self(1e10);
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    ddp_collective_options opts;
    ASSERT_EQ(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.timeout_s = 1e300;
    EXPECT_EQ(ddp_barrier(world, &opts), DDP_OK) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);

    setenv("DDP_TIMEOUT_S", "1e12", 1);
    world = start_self();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
    unsetenv("DDP_TIMEOUT_S");
}

// 2. Shard arithmetic overflowed, and memory followed the data set.
TEST(Promises, ShardCountsAreExactForEveryInt64) {
    int64_t count = -1;
    ASSERT_EQ(ddp_shard_count(INT64_MAX, 2, nullptr, &count), DDP_OK) << message();
    EXPECT_EQ(count, int64_t{1} << 62);  // ceil((2^63 - 1) / 2)
    ASSERT_EQ(ddp_shard_count(INT64_MAX, 1, nullptr, &count), DDP_OK);
    EXPECT_EQ(count, INT64_MAX);
}

TEST(Promises, UnshuffledShardsNeedMemoryForTheShardOnly) {
    ddp_shard_options opts;
    ASSERT_EQ(ddp_shard_options_init(&opts, sizeof opts), DDP_OK);
    opts.shuffle = 0;
    const int64_t n_items = int64_t{1} << 40;
    const int32_t world = 1 << 30;
    std::vector<int64_t> out(1024);
    int64_t count = 0;
    // 0.1 allocated n_items * 8 bytes (8 TiB) here.
    ASSERT_EQ(ddp_shard_indices(n_items, 5, world, &opts, out.data(), 1024, &count), DDP_OK) << message();
    ASSERT_EQ(count, 1024);
    for (int64_t k = 0; k < count; ++k) EXPECT_EQ(out[static_cast<size_t>(k)], 5 + k * world);
    // The padded tail wraps around to the start, exactly, at the edge of int64.
    opts.strategy = DDP_SHARD_CONTIGUOUS;
    ASSERT_EQ(ddp_shard_indices(INT64_MAX, 1, 2, &opts, out.data(), 1, &count), DDP_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(count, int64_t{1} << 62);
}

TEST(Promises, ShuffledShardsPastTheLimitSaySo) {
    std::vector<int64_t> out(4);
    int64_t count = 0;
    ASSERT_EQ(ddp_shard_indices(INT64_MAX, 0, INT32_MAX, nullptr, out.data(), 4, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_SHARD_SHUFFLE_MAX_ITEMS")) << message();
    ASSERT_EQ(ddp_shard_indices(int64_t{1} << 40, 0, 1 << 30, nullptr, out.data(), 4, &count),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("shard without shuffle")) << message();
}

// 7. Validation errors name the rank.
TEST(Promises, ValidationErrorsNameTheRank) {
    ddp_comm* world = start_self();
    float value = 1;
    ddp_tensor bad{&value, -1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &bad, 1, DDP_OP_SUM, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("rank 0: tensors[0].count is -1")) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

// The reserved flags field is refused when set.
TEST(Promises, ReservedFlagsMustBeZero) {
    ddp_comm* world = start_self();
    float value = 1;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 4};
    EXPECT_EQ(ddp_broadcast_tensor_list(world, &tensor, 1, 0, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[0].flags is 4")) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

// 12. The same buffer twice, or overlapping tensors, in a call that writes.
TEST(Promises, OverlappingWritableTensorsAreRefused) {
    ddp_comm* world = start_self();
    std::vector<double> data(100, 1.0);
    const ddp_tensor whole{data.data(), 100, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
    const ddp_tensor middle{data.data() + 40, 10, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
    const ddp_tensor twice[2] = {whole, whole};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, twice, 2, DDP_OP_SUM, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[0] and tensors[1] overlap")) << message();
    const ddp_tensor nested[3] = {middle, {data.data() + 60, 5, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0}, whole};
    EXPECT_EQ(ddp_reduce_tensor_list(world, nested, 3, DDP_OP_SUM, 0, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("overlap")) << message();
    // Back to back is not overlap; a read-only call may name memory twice.
    const ddp_tensor adjacent[2] = {{data.data(), 50, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0},
                                    {data.data() + 50, 50, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0}};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, adjacent, 2, DDP_OP_AVG, nullptr), DDP_OK) << message();
    // Out of address order: apart is apart, and a later tensor reaching into
    // an earlier one is still found.
    const ddp_tensor reversed[2] = {adjacent[1], adjacent[0]};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, reversed, 2, DDP_OP_AVG, nullptr), DDP_OK) << message();
    const ddp_tensor reaching[3] = {adjacent[1], {data.data() + 10, 10, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0},
                                    {data.data() + 15, 10, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0}};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, reaching, 3, DDP_OP_SUM, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1] and tensors[2] overlap")) << message();
    int32_t identical = 0;
    EXPECT_EQ(ddp_check_replicas(world, twice, 2, nullptr, &identical), DDP_OK) << message();
    EXPECT_EQ(identical, 1);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

// 10. Two threads in blocking collectives on one communicator.
TEST(Promises, ASecondThreadInACollectiveIsRefused) {
    ddp_comm* world = start_self();
    std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 2.0f);
    std::atomic<int> refused{0}, other_errors{0};
    // Calls on one rank are short, so the threads overlap only now and then:
    // they keep calling until one is refused (or 20 s have passed).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto hammer = [&](std::vector<float>& data) {
        ddp_tensor tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        for (int i = 0; i < 20000 || (refused.load() == 0 && std::chrono::steady_clock::now() < give_up); ++i) {
            const ddp_status status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
            if (status == DDP_ERR_INVALID_ARGUMENT && mentions("another thread")) ++refused;
            else if (status != DDP_OK) ++other_errors;
        }
    };
    std::thread first(hammer, std::ref(a)), second(hammer, std::ref(b));
    first.join();
    second.join();
    EXPECT_GT(refused.load(), 0) << "two threads calling for 20 s were never refused";
    EXPECT_EQ(other_errors.load(), 0);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

// The options structs can grow: _init never writes past the caller's size.
TEST(Promises, OptionsInitWritesOnlyTheCallersSize) {
    struct {
        ddp_collective_options opts;
        unsigned char canary[16];
    } guarded;
    std::memset(&guarded, 0xAB, sizeof guarded);
    const uint32_t first_layout = 16;  // struct_size and fusion_bytes: 0.1's layout
    ASSERT_EQ(ddp_collective_options_init(&guarded.opts, first_layout), DDP_OK) << message();
    EXPECT_EQ(guarded.opts.struct_size, first_layout);
    EXPECT_EQ(guarded.opts.fusion_bytes, 0);
    const auto* tail = reinterpret_cast<const unsigned char*>(&guarded.opts) + first_layout;
    for (size_t i = first_layout; i < sizeof guarded; ++i, ++tail) EXPECT_EQ(*tail, 0xAB) << "byte " << i;
    ddp_comm* world = start_self();
    float value = 2;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &guarded.opts), DDP_OK) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);

    ddp_collective_options opts;
    EXPECT_EQ(ddp_collective_options_init(&opts, 12), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("struct_size is 12")) << message();
    EXPECT_EQ(ddp_collective_options_init(&opts, sizeof opts + 8), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("newer ddp.h")) << message();
    EXPECT_EQ(ddp_init_options_init(nullptr, sizeof(ddp_init_options)), DDP_ERR_INVALID_ARGUMENT);
}

// 3. The environment is read once, at init: a bad value fails ddp_init.
TEST(Promises, BadEnvironmentFailsInitNotALaterCollective) {
    setenv("DDP_FUSION_BYTES", "bogus", 1);
    ddp_init_options opts;
    ASSERT_EQ(ddp_init_options_init(&opts, sizeof opts), DDP_OK);
    opts.backend = DDP_BACKEND_SELF;
    ddp_comm* world = nullptr;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_FUSION_BYTES='bogus'")) << message();
    unsetenv("DDP_FUSION_BYTES");
    setenv("DDP_STALL_WARN_S", "-3", 1);
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_STALL_WARN_S")) << message();
    unsetenv("DDP_STALL_WARN_S");
    EXPECT_EQ(ddp_init(&opts, &world), DDP_OK) << message();
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

// The experimental abort: every later call says who aborted and why.
TEST(Promises, AbortBreaksTheCommunicatorWithItsReason) {
    ddp_comm* world = start_self();
    ASSERT_EQ(ddp_comm_abort(world, "loss is NaN"), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
    EXPECT_TRUE(mentions("rank 0 aborted the communicator (loss is NaN)")) << message();
    float value = 1;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_request* request = nullptr;
    EXPECT_EQ(ddp_allreduce_tensor_list_async(world, &tensor, 1, DDP_OP_SUM, nullptr, &request), DDP_ERR_TIMEOUT);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

}  // namespace
