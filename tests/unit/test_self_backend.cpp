// The public API on the self backend, in one process started without a
// launcher: the queries, every collective, async requests, logging, the
// init/finalize life cycle, and each kind of bad input.
#include <gtest/gtest.h>

#include <cmath>

#include <cstdlib>
#include <string>
#include <vector>

#include "ddp/ddp.h"
#include "self_world.hpp"

namespace {

class SelfBackend : public testing::Test {
protected:
    void SetUp() override { ASSERT_NE(world = start_self(), nullptr); }
    void TearDown() override { EXPECT_EQ(ddp_finalize(world), DDP_OK); }

    ddp_comm* world = nullptr;
    std::vector<float> data{1.5f, -2.0f, 3.25f};
    ddp_tensor good{data.data(), 3, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
};

TEST_F(SelfBackend, Queries) {
    int32_t value = -7;
    EXPECT_EQ(ddp_rank(world, &value), DDP_OK);
    EXPECT_EQ(value, 0);
    EXPECT_EQ(ddp_size(world, &value), DDP_OK);
    EXPECT_EQ(value, 1);
    EXPECT_EQ(ddp_local_rank(world, &value), DDP_OK);
    EXPECT_EQ(value, 0);
    EXPECT_EQ(ddp_local_size(world, &value), DDP_OK);
    EXPECT_EQ(value, 1);
    EXPECT_EQ(ddp_device(world, &value), DDP_OK);
    EXPECT_EQ(value, -1);
    const char* name = nullptr;
    EXPECT_EQ(ddp_backend_name(world, &name), DDP_OK);
    EXPECT_STREQ(name, "self");
    EXPECT_EQ(ddp_rank(world, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("rank is NULL"));
}

TEST_F(SelfBackend, CollectivesOnOneRankKeepTheData) {
    for (ddp_op op : {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_MIN, DDP_OP_MAX, DDP_OP_PROD}) {
        EXPECT_EQ(ddp_allreduce_tensor_list(world, &good, 1, op, nullptr), DDP_OK) << message();
        EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
        EXPECT_EQ(ddp_reduce_tensor_list(world, &good, 1, op, 0, nullptr), DDP_OK);
    }
    EXPECT_EQ(ddp_broadcast_tensor_list(world, &good, 1, 0, nullptr), DDP_OK);
    double scalars[2] = {3, 0.1};
    EXPECT_EQ(ddp_sync_optimizer_state(world, &good, 1, scalars, 2, 0, nullptr), DDP_OK);
    int32_t identical = 0;
    EXPECT_EQ(ddp_check_replicas(world, &good, 1, nullptr, &identical), DDP_OK);
    EXPECT_EQ(identical, 1);
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK);
    EXPECT_EQ(ddp_allreduce_tensor_list(world, nullptr, 0, DDP_OP_SUM, nullptr), DDP_OK);
    EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST_F(SelfBackend, AsyncRequests) {
    ddp_request* request = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, &good, 1, DDP_OP_AVG, nullptr, &request), DDP_OK);
    EXPECT_EQ(ddp_request_wait(request), DDP_OK);
    int32_t done = 0;
    EXPECT_EQ(ddp_request_test(request, &done), DDP_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(ddp_request_free(request), DDP_OK);
    EXPECT_EQ(ddp_request_free(nullptr), DDP_OK);
    EXPECT_EQ(ddp_request_wait(nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_allreduce_tensor_list_async(world, &good, 1, DDP_OP_SUM, nullptr, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("request is NULL"));
}

TEST_F(SelfBackend, BadTensorLists) {
    auto allreduce = [&](const ddp_tensor* list, int64_t n, int op = DDP_OP_SUM) {
        return ddp_allreduce_tensor_list(world, list, n, static_cast<ddp_op>(op), nullptr);
    };
    EXPECT_EQ(allreduce(nullptr, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors is NULL but its length is 2"));
    EXPECT_EQ(allreduce(&good, -1), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("-1"));

    std::vector<float> other{7.0f, 8.0f, 9.0f};
    const ddp_tensor second{other.data(), 3, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_tensor list[2] = {good, second};
    list[1].data = nullptr;
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1].data is NULL"));
    list[1] = second;
    list[1].count = -5;
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1].count is -5"));
    list[1] = second;
    list[1].dtype = static_cast<ddp_dtype>(0x999);
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1].dtype"));
    list[1] = second;
    list[1].device_type = static_cast<ddp_device_type>(42);
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1].device_type 42"));
    list[1] = second;
    list[1].device_type = DDP_DEVICE_CUDA;
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[0] is in host memory but tensors[1] is in device memory")) << message();
    list[1] = second;
    list[1].device_type = DDP_DEVICE_CUDA_MANAGED;
    EXPECT_EQ(allreduce(list, 2), DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("tensors[1] is cuda_managed memory")) << message();
    list[1] = second;
    EXPECT_EQ(allreduce(list, 2, 17), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("op 17"));
    int32_t ints[2] = {1, 2};
    list[1] = ddp_tensor{ints, 2, DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(allreduce(list, 2, DDP_OP_AVG), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[1] is i32"));
    // A zero-count tensor may have NULL data; pinned host memory counts as CPU.
    list[1] = ddp_tensor{nullptr, 0, DDP_DTYPE_I32, DDP_DEVICE_CUDA_HOST, 0, 0};
    EXPECT_EQ(allreduce(list, 2), DDP_OK) << message();
}

TEST_F(SelfBackend, BadRootsScalarsAndOptions) {
    EXPECT_EQ(ddp_broadcast_tensor_list(world, &good, 1, 1, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("root is 1; it must be in [0, 1)"));
    EXPECT_EQ(ddp_reduce_tensor_list(world, &good, 1, DDP_OP_SUM, -1, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("root is -1"));
    EXPECT_EQ(ddp_sync_optimizer_state(world, &good, 1, nullptr, 2, 0, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("scalars is NULL"));
    double scalar = 1;
    EXPECT_EQ(ddp_sync_optimizer_state(world, &good, 1, &scalar, -1, 0, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("n_scalars is -1"));
    EXPECT_EQ(ddp_check_replicas(world, &good, 1, nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("identical is NULL"));

    ddp_collective_options opts;
    ASSERT_EQ(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.struct_size = 2;
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &good, 1, DDP_OP_SUM, &opts), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("struct_size is 2"));
    ASSERT_EQ(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.fusion_bytes = -2;
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &good, 1, DDP_OP_SUM, &opts), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("opts->fusion_bytes is -2"));
    ASSERT_EQ(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.timeout_s = -1;
    EXPECT_EQ(ddp_barrier(world, &opts), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("opts->timeout_s"));
}

TEST_F(SelfBackend, Logging) {
    struct Captured {
        int level = 0;
        std::string line;
    } captured;
    ASSERT_EQ(ddp_set_log_callback(
                  [](int32_t level, const char* line, void* user) {
                      auto* c = static_cast<Captured*>(user);
                      c->level = level;
                      c->line = line;
                  },
                  &captured),
              DDP_OK);
    EXPECT_EQ(ddp_log(world, DDP_LOG_WARN, "loss 0.25"), DDP_OK);
    EXPECT_EQ(captured.level, DDP_LOG_WARN);
    EXPECT_EQ(captured.line.rfind("[ddp 0/1 ", 0), 0u) << captured.line;
    EXPECT_NE(captured.line.find("] loss 0.25"), std::string::npos);
    captured.line.clear();
    EXPECT_EQ(ddp_log(world, DDP_LOG_DEBUG, "hidden below the default info threshold"), DDP_OK);
    EXPECT_TRUE(captured.line.empty());
    EXPECT_EQ(ddp_log(world, static_cast<ddp_log_level>(15), "x"), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_log(world, DDP_LOG_INFO, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_set_log_callback(nullptr, nullptr), DDP_OK);
}

TEST_F(SelfBackend, SecondInitIsRefused) {
    ddp_comm* second = nullptr;
    EXPECT_EQ(ddp_init(nullptr, &second), DDP_ERR_ALREADY_INITIALIZED);
    EXPECT_TRUE(mentions("still live"));
    EXPECT_EQ(second, nullptr);
}

TEST(Lifecycle, CallsBeforeInitAndAfterFinalize) {
    int32_t rank = 0;
    float x = 1;
    ddp_tensor t{&x, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_rank(nullptr, &rank), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("call ddp_init first"));
    EXPECT_EQ(ddp_allreduce_tensor_list(nullptr, &t, 1, DDP_OP_SUM, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_barrier(nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);

    ddp_comm* world = nullptr;
    ASSERT_EQ(ddp_init(nullptr, &world), DDP_OK) << message();  // no launcher: self
    const char* name = nullptr;
    ASSERT_EQ(ddp_backend_name(world, &name), DDP_OK);
    EXPECT_STREQ(name, "self");
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);  // idempotent
    EXPECT_EQ(ddp_rank(world, &rank), DDP_ERR_NOT_INITIALIZED);
    EXPECT_TRUE(mentions("finalized"));
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &t, 1, DDP_OP_SUM, nullptr), DDP_ERR_NOT_INITIALIZED);
    EXPECT_EQ(ddp_log(world, DDP_LOG_INFO, "x"), DDP_ERR_NOT_INITIALIZED);
    EXPECT_EQ(ddp_finalize(nullptr), DDP_ERR_INVALID_ARGUMENT);

    // The self backend may start again after finalize.
    ASSERT_EQ(ddp_init(nullptr, &world), DDP_OK);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

TEST(Lifecycle, BadInitOptions) {
    ddp_comm* world = nullptr;
    EXPECT_EQ(ddp_init(nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("world is NULL"));
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.backend = static_cast<ddp_backend>(9);
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("backend 9"));
    ddp_init_options_init(&opts, sizeof opts);
    opts.backend = DDP_BACKEND_NCCL;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("nccl backend"));
    ddp_init_options_init(&opts, sizeof opts);
    opts.backend = DDP_BACKEND_SELF;
    opts.mpi_comm_fortran = 0;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("needs the mpi backend"));
    ddp_init_options_init(&opts, sizeof opts);
    opts.mpi_comm_fortran = -5;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    ddp_init_options_init(&opts, sizeof opts);
    opts.timeout_s = -1;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("timeout_s"));
    ddp_init_options_init(&opts, sizeof opts);
    opts.hang_watchdog_s = std::nan("");
    EXPECT_EQ(ddp_init(&opts, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("opts->hang_watchdog_s must be a finite number"));
    setenv("DDP_HANG_WATCHDOG_S", "soon", 1);
    EXPECT_EQ(ddp_init(nullptr, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_HANG_WATCHDOG_S='soon' is neither a positive number of seconds nor 0 or off"));
    unsetenv("DDP_HANG_WATCHDOG_S");
    setenv("DDP_BACKEND", "carrier-pigeon", 1);
    EXPECT_EQ(ddp_init(nullptr, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_BACKEND='carrier-pigeon'"));
    setenv("DDP_BACKEND", "self", 1);
    setenv("DDP_TIMEOUT_S", "soon", 1);
    EXPECT_EQ(ddp_init(nullptr, &world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("DDP_TIMEOUT_S='soon'"));
    unsetenv("DDP_TIMEOUT_S");
    unsetenv("DDP_BACKEND");
    EXPECT_EQ(world, nullptr);
}

TEST(Status, NamesAndVersion) {
    EXPECT_STREQ(ddp_status_name(DDP_ERR_MISMATCH), "DDP_ERR_MISMATCH");
    EXPECT_STREQ(ddp_status_name(static_cast<ddp_status>(99)), "DDP_ERR_UNKNOWN_STATUS");
    EXPECT_EQ(ddp_version(), static_cast<uint32_t>(DDP_VERSION_NUMBER));
    EXPECT_STREQ(ddp_version_string(), "1.3.0");
}

}  // namespace

TEST(Split, OnOneProcessASubIsRankZeroOfOne) {
    ddp_comm* world = start_self();
    ASSERT_NE(world, nullptr);
    ddp_comm* sub = nullptr;
    ASSERT_EQ(ddp_comm_split(world, 3, 0, nullptr, &sub), DDP_OK) << message();
    int32_t rank = -1, size = -1;
    EXPECT_EQ(ddp_rank(sub, &rank), DDP_OK);
    EXPECT_EQ(ddp_size(sub, &size), DDP_OK);
    EXPECT_EQ(rank, 0);
    EXPECT_EQ(size, 1);
    float value = 2;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(sub, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK) << message();
    EXPECT_EQ(value, 2);
    ddp_comm* none = world;
    EXPECT_EQ(ddp_comm_split(world, DDP_COLOR_UNDEFINED, 0, nullptr, &none), DDP_OK) << message();
    EXPECT_EQ(none, nullptr);
    EXPECT_EQ(ddp_comm_split(world, -2, 0, nullptr, &none), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("rank 0: color is -2")) << message();
    ddp_comm* node = nullptr;
    ASSERT_EQ(ddp_comm_split_node(sub, nullptr, &node), DDP_OK) << message();  // a split of a split
    EXPECT_EQ(ddp_comm_free(world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_finalize(sub), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_comm_free(sub), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(sub, nullptr), DDP_ERR_NOT_INITIALIZED);
    EXPECT_EQ(ddp_barrier(node, nullptr), DDP_OK) << message();  // outlives its parent
    // ddp_finalize frees what is still live.
    EXPECT_EQ(ddp_finalize(world), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(node, nullptr), DDP_ERR_NOT_INITIALIZED);
    EXPECT_EQ(ddp_comm_free(node), DDP_OK);
    EXPECT_EQ(ddp_comm_free(nullptr), DDP_OK);
}

TEST(Split, OptionsAreVersioned) {
    ddp_split_options opts;
    EXPECT_EQ(ddp_split_options_init(&opts, sizeof opts), DDP_OK);
    EXPECT_EQ(opts.struct_size, sizeof opts);
    EXPECT_EQ(opts.timeout_s, 0.0);
    EXPECT_EQ(ddp_split_options_init(&opts, 3), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_split_options_init(nullptr, sizeof opts), DDP_ERR_INVALID_ARGUMENT);
}
