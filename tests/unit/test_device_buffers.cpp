// Device buffers and the nccl backend through the public API, on a machine
// without a GPU (this test skips what it cannot check where one is present):
// every case says exactly why it cannot work, and no list mixes host and
// device memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#ifndef DDP_EXPERIMENTAL_API
#define DDP_EXPERIMENTAL_API
#endif
#include "ddp/ddp.h"
#include "self_world.hpp"

namespace {

class DeviceBuffers : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(world = start_self(), nullptr);
        ASSERT_EQ(ddp_device(world, &device), DDP_OK);
        if (device >= 0) GTEST_SKIP() << "this machine has a GPU (cuda:" << device << "): see scripts/gpu-proof";
    }
    void TearDown() override { EXPECT_EQ(ddp_finalize(world), DDP_OK); }

    ddp_comm* world = nullptr;
    int32_t device = -1;
    std::vector<float> host = std::vector<float>(8, 1.0f);
    // Device memory as a caller describes it; never dereferenced, as validation refuses it first.
    ddp_tensor on_gpu{reinterpret_cast<void*>(0x1000), 8, DDP_DTYPE_F32, DDP_DEVICE_CUDA, 0, 0};
};

TEST_F(DeviceBuffers, DeviceListsOnARankWithoutAGpuSayWhy) {
    EXPECT_EQ(device, -1);
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &on_gpu, 1, DDP_OP_AVG, nullptr), DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("rank 0: tensors[0] is on cuda:0 but this rank has no GPU: ")) << message();
    // The reason itself: built without CUDA, no driver, or no device.
    EXPECT_TRUE(mentions("built without CUDA") || mentions("no NVIDIA driver is installed") ||
                mentions("the NVIDIA driver is older") || mentions("no GPU is visible"))
        << message();
    EXPECT_EQ(ddp_broadcast_tensor_list(world, &on_gpu, 1, 0, nullptr), DDP_ERR_UNSUPPORTED);
    double scalar = 1;
    EXPECT_EQ(ddp_sync_optimizer_state(world, &on_gpu, 1, &scalar, 1, 0, nullptr), DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("leaves[0] is on cuda:0")) << message();
    ddp_request* request = nullptr;
    EXPECT_EQ(ddp_allreduce_tensor_list_async(world, &on_gpu, 1, DDP_OP_SUM, nullptr, &request), DDP_ERR_UNSUPPORTED);
    EXPECT_EQ(request, nullptr);
}

TEST_F(DeviceBuffers, AListIsAllHostOrAllDevice) {
    const ddp_tensor mixed[2] = {on_gpu, {host.data(), 8, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, mixed, 2, DDP_OP_SUM, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tensors[0] is in device memory but tensors[1] is in host memory")) << message();
    // Pinned host memory is host memory.
    const ddp_tensor pinned[2] = {{host.data(), 4, DDP_DTYPE_F32, DDP_DEVICE_CUDA_HOST, 0, 0},
                                  {host.data() + 4, 4, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, pinned, 2, DDP_OP_SUM, nullptr), DDP_OK) << message();
}

TEST_F(DeviceBuffers, TheReducerRefusesDeviceGradients) {
    ddp_reducer* reducer = nullptr;
    EXPECT_EQ(ddp_reducer_create(world, &on_gpu, 1, DDP_OP_AVG, nullptr, &reducer), DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("gradients[0] is in device memory, but the reducer keeps its buckets in host memory"))
        << message();
    EXPECT_EQ(reducer, nullptr);
}

TEST_F(DeviceBuffers, TheStreamOptionIsLocalAndIgnoredForHostBuffers) {
    ddp_collective_options opts;
    ASSERT_EQ(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    EXPECT_EQ(opts.cuda_stream, nullptr);  // the legacy default stream
    opts.cuda_stream = reinterpret_cast<void*>(DDP_CUDA_STREAM_PER_THREAD);
    ddp_tensor tensor{host.data(), 8, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &opts), DDP_OK) << message();
    // 1.0's layout (without cuda_stream) is still read; a size between layouts is not.
    opts.struct_size = offsetof(ddp_collective_options, cuda_stream);
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &opts), DDP_OK) << message();
    opts.struct_size = offsetof(ddp_collective_options, cuda_stream) + 4;
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &opts), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("accepts 16, 24, 32, 40, 48 bytes")) << message();
}

TEST_F(DeviceBuffers, StreamWaitOnAHostRequestWaitsOnTheHost) {
    ddp_tensor tensor{host.data(), 8, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_request* request = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, &tensor, 1, DDP_OP_SUM, nullptr, &request), DDP_OK);
    EXPECT_EQ(ddp_request_stream_wait(request, nullptr), DDP_OK) << message();
    int32_t done = 0;
    EXPECT_EQ(ddp_request_test(request, &done), DDP_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(ddp_request_free(request), DDP_OK);
    EXPECT_EQ(ddp_request_stream_wait(nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("request is NULL"));
}

// ddp_init with the nccl backend says what is missing, in this order: the
// nccl backend in this build, NCCL itself, a GPU.
ddp_status init_nccl(ddp_comm** world) {
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.backend = DDP_BACKEND_NCCL;
    return ddp_init(&opts, world);
}

TEST(NcclBackend, SaysWhyItCannotStartHere) {
    ddp_comm* world = nullptr;
    setenv("DDP_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    EXPECT_EQ(init_nccl(&world), DDP_ERR_UNSUPPORTED);
    EXPECT_EQ(world, nullptr);
    if (mentions("the nccl backend is not in this libddp")) {  // a build without CUDA
        EXPECT_TRUE(mentions("rebuild with -Dcuda=enabled -Dnccl=enabled")) << message();
        return;
    }
    EXPECT_TRUE(mentions("rank 0: NCCL could not be loaded: dlopen(\"/nonexistent/libnccl.so.2\") failed"))
        << message();
    const char* real = std::getenv("REAL_NCCL");
    if (real == nullptr || *real == '\0') GTEST_SKIP() << "no NCCL library on this machine to load";
    setenv("DDP_NCCL_LIBRARY", real, 1);
    const ddp_status status = init_nccl(&world);
    if (status == DDP_OK) {
        ddp_finalize(world);
        GTEST_SKIP() << "NCCL started: this machine has a GPU";
    }
    EXPECT_EQ(status, DDP_ERR_UNSUPPORTED);
    EXPECT_TRUE(mentions("rank 0: the nccl backend needs a GPU on every rank: ")) << message();
    // After a failed start, the world can still start with another backend.
    ASSERT_NE(world = start_self(), nullptr);
    EXPECT_EQ(ddp_finalize(world), DDP_OK);
}

}  // namespace
