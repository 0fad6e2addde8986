// ddp_init_local with devices, on a real GPU: each rank of a group in this
// process runs NCCL on its own device (two ranks on one GPU where there is
// only one: NCCL 2.30 or newer with NCCL_MULTI_RANK_GPU_ENABLE=1), driven by
// a thread per rank and by one thread through ddp_group_start/end; host
// buffers go through the in-process plane beside it. Under mpirun the
// threads of every process make one group (rank process x 2 + thread), all
// in one NCCL communicator. Run by scripts/gpu-proof, alone and under
// mpirun -np 2; exits 77 on a machine without a GPU, after showing that
// the group starts as far as the missing GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifndef DDP_EXPERIMENTAL_API
#define DDP_EXPERIMENTAL_API
#endif
#include "ddp/ddp.h"

namespace {

constexpr int ranks = 2;  ///< this process's threads
std::vector<int32_t> devices;
std::vector<ddp_comm*> comms(ranks, nullptr);
int size = ranks;              ///< the group's ranks, in every process
std::vector<int> group_rank;   ///< each thread's rank in the group

/// `count` floats on `device`, each `value`.
struct DeviceFloats {
    DeviceFloats(int device, size_t count, float value) : device(device), count(count) {
        cudaSetDevice(device);
        EXPECT_EQ(cudaMalloc(&data, count * sizeof(float)), cudaSuccess);
        const std::vector<float> host(count, value);
        EXPECT_EQ(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ~DeviceFloats() { cudaFree(data); }
    ddp_tensor tensor() const { return {data, static_cast<int64_t>(count), DDP_DTYPE_F32, DDP_DEVICE_CUDA, device, 0}; }
    /// The values once the legacy default stream, where the calls were enqueued, has run them.
    std::vector<float> values() const {
        cudaSetDevice(device);
        std::vector<float> host(count);
        EXPECT_EQ(cudaMemcpy(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        return host;
    }
    int device;
    size_t count;
    void* data = nullptr;
};

/// body(thread) on a thread per rank of this process, each with its device current.
void on_threads(const std::function<void(int)>& body) {
    std::vector<std::jthread> threads;
    for (int thread = 0; thread < ranks; ++thread)
        threads.emplace_back([&, thread] {
            cudaSetDevice(devices[static_cast<size_t>(thread)]);
            body(thread);
        });
}

TEST(LocalDevices, EachRankRunsNccl) {
    for (ddp_comm* comm : comms) {
        const char* backend = "";
        ASSERT_EQ(ddp_backend_name(comm, &backend), DDP_OK);
        EXPECT_EQ(std::string(backend), "nccl");
    }
}

TEST(LocalDevices, ThreadsReduceDeviceAndHostBuffers) {
    on_threads([](int thread) {
        const int rank = group_rank[static_cast<size_t>(thread)];
        const DeviceFloats grads(devices[static_cast<size_t>(thread)], 1 << 20, static_cast<float>(rank + 1));
        ddp_tensor t = grads.tensor();
        ASSERT_EQ(ddp_allreduce_tensor_list(comms[static_cast<size_t>(thread)], &t, 1, DDP_OP_SUM, nullptr), DDP_OK)
            << ddp_last_error_message();
        for (float value : grads.values()) ASSERT_EQ(value, static_cast<float>(size * (size + 1) / 2));
        const DeviceFloats params(devices[static_cast<size_t>(thread)], 1000, static_cast<float>(rank));
        t = params.tensor();
        ASSERT_EQ(ddp_broadcast_tensor_list(comms[static_cast<size_t>(thread)], &t, 1, size - 1, nullptr), DDP_OK)
            << ddp_last_error_message();
        for (float value : params.values()) ASSERT_EQ(value, static_cast<float>(size - 1));
        std::vector<float> host(5000, static_cast<float>(rank));
        ddp_tensor h{host.data(), 5000, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        ASSERT_EQ(ddp_allreduce_tensor_list(comms[static_cast<size_t>(thread)], &h, 1, DDP_OP_AVG, nullptr), DDP_OK)
            << ddp_last_error_message();
        for (float value : host) ASSERT_EQ(value, static_cast<float>(size - 1) / 2);
    });
}

TEST(LocalDevices, OneThreadDrivesEveryRankInAGroup) {
    std::vector<std::unique_ptr<DeviceFloats>> grads;
    for (int thread = 0; thread < ranks; ++thread)
        grads.push_back(std::make_unique<DeviceFloats>(devices[static_cast<size_t>(thread)], 300000,
                                                       static_cast<float>(group_rank[static_cast<size_t>(thread)] + 1)));
    for (int step = 0; step < 3; ++step) {
        ASSERT_EQ(ddp_group_start(), DDP_OK);
        for (int thread = 0; thread < ranks; ++thread) {
            ddp_tensor t = grads[static_cast<size_t>(thread)]->tensor();
            ASSERT_EQ(ddp_allreduce_tensor_list(comms[static_cast<size_t>(thread)], &t, 1, DDP_OP_AVG, nullptr), DDP_OK)
                << ddp_last_error_message();
        }
        ASSERT_EQ(ddp_group_end(), DDP_OK) << ddp_last_error_message();
    }
    for (const auto& replica : grads)
        for (float value : replica->values()) ASSERT_EQ(value, static_cast<float>(size + 1) / 2);
}

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    int count = 0;
    const cudaError_t counted = cudaGetDeviceCount(&count);
    for (int rank = 0; rank < ranks; ++rank) devices.push_back(count > 0 ? rank % count : 0);
    // libddp starts first, so that a run without a GPU shows it loads NCCL
    // and names the missing GPU.
    if (ddp_init_local(ranks, devices.data(), nullptr, comms.data()) != DDP_OK) {
        std::fprintf(stderr, "ddp_init_local: %s\n", ddp_last_error_message());
        if (counted != cudaSuccess || count == 0) {
            std::printf("no GPU here (%s): nothing to test\n", cudaGetErrorName(counted));
            return 77;
        }
        return 1;
    }
    for (ddp_comm* comm : comms) {
        int32_t rank = 0;
        ddp_rank(comm, &rank);
        group_rank.push_back(rank);
    }
    int32_t group_size = 0;
    ddp_size(comms[0], &group_size);
    size = group_size;
    std::printf("ranks %d and %d of a group of %d on cuda:%d and cuda:%d\n", group_rank[0], group_rank[1], size,
                devices[0], devices[1]);
    const int failed = RUN_ALL_TESTS();
    ddp_status finalized = DDP_OK;
    for (ddp_comm* comm : comms)
        if (const ddp_status status = ddp_finalize(comm); status != DDP_OK) finalized = status;
    return failed != 0 || finalized != DDP_OK ? 1 : 0;
}
