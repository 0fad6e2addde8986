// Every collective on device buffers, on a real GPU: whatever backend
// DDP_BACKEND picks (nccl: on the GPU; mpi: staged through pinned host
// memory), on 2 to N ranks, for every dtype, op, list shape and stream
// kind, blocking and async. Run by scripts/gpu-proof; exits 77 on a
// machine without a GPU, and refuses one rank (nothing reaches the GPU).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#ifndef DDP_EXPERIMENTAL_API
#define DDP_EXPERIMENTAL_API
#endif
#include "ddp/ddp.h"
#include "device_values.hpp"

namespace {

ddp_comm* world = nullptr;
int rank = 0, size = 1, device = -1;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define DDP_OK_(call) ASSERT_EQ((call), DDP_OK) << #call << ": " << ddp_last_error_message()

double expected(ddp_op op, size_t tensor, size_t element) { return expected_value(op, size, tensor, element); }

/// Device tensors of the given element counts, filled with this rank's
/// values: each in a buffer of its own, or (Layout::views) back to back in
/// one buffer, as a bucket or a flattened model lays them; Layout::mixed is
/// views on rank 0 and apart elsewhere (the calls must not depend on it).
enum class Layout { apart, views, mixed };

/// Bytes to allocate for `bytes` of tensor data: NCCL reads user buffers in
/// whole 16-byte words (NVIDIA/nccl#265), which compute-sanitizer's memcheck
/// reports as out of bounds in a smaller allocation (harmless: the word never
/// leaves the allocation's granule). Allocations here are whole words.
size_t allocation_bytes(size_t bytes) { return (std::max<size_t>(bytes, 1) + 15) / 16 * 16; }

struct DeviceList {
    ddp_dtype dtype;
    std::vector<size_t> counts;
    std::vector<void*> buffers;
    std::vector<ddp_tensor> tensors;

    DeviceList(ddp_dtype type, std::vector<size_t> sizes, int fill_rank, cudaStream_t stream,
               Layout layout = Layout::apart)
        : dtype(type), counts(std::move(sizes)) {
        size_t total = 0;
        for (size_t count : counts) total += count;
        if (layout == Layout::mixed) layout = fill_rank == 0 ? Layout::views : Layout::apart;
        std::byte* next = nullptr;
        if (layout == Layout::views) {
            void* data = nullptr;
            EXPECT_EQ(cudaMalloc(&data, allocation_bytes(total * element_size(dtype))), cudaSuccess);
            buffers.push_back(data);
            next = static_cast<std::byte*>(data);
        }
        for (size_t t = 0; t < counts.size(); ++t) {
            void* data = next;
            if (layout == Layout::apart) {
                EXPECT_EQ(cudaMalloc(&data, allocation_bytes(counts[t] * element_size(dtype))), cudaSuccess);
                buffers.push_back(data);
            } else {
                next += counts[t] * element_size(dtype);
            }
            std::vector<std::byte> host(counts[t] * element_size(dtype));
            for (size_t e = 0; e < counts[t]; ++e) store(host, e, dtype, value_of(fill_rank, t, e));
            EXPECT_EQ(cudaMemcpyAsync(data, host.data(), host.size(), cudaMemcpyHostToDevice, stream), cudaSuccess);
            tensors.push_back(ddp_tensor{data, static_cast<int64_t>(counts[t]), dtype, DDP_DEVICE_CUDA, device, 0});
        }
    }
    ~DeviceList() {
        for (void* data : buffers) cudaFree(data);
    }

    /// Whether every element equals `want(tensor, element)` in `dtype` (read after the stream).
    template <typename Want>
    void expect(cudaStream_t stream, Want want, const std::string& what) const {
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        for (size_t t = 0; t < counts.size(); ++t) {
            std::vector<std::byte> got(counts[t] * element_size(dtype)), wanted(got.size());
            ASSERT_EQ(cudaMemcpy(got.data(), tensors[t].data, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
            for (size_t e = 0; e < counts[t]; ++e) store(wanted, e, dtype, want(t, e));
            ASSERT_EQ(std::memcmp(got.data(), wanted.data(), got.size()), 0)
                << what << ": tensor " << t << " differs on rank " << rank;
        }
    }
};

const ddp_dtype all_dtypes[] = {DDP_DTYPE_I8, DDP_DTYPE_U8, DDP_DTYPE_I32, DDP_DTYPE_I64,
                                DDP_DTYPE_F16, DDP_DTYPE_BF16, DDP_DTYPE_F32, DDP_DTYPE_F64};
const std::vector<std::vector<size_t>> list_shapes = {
    {1000}, {3, 0, 17, 4096}, std::vector<size_t>(300, 7), {1 << 22}, {}};

bool floating(ddp_dtype dtype) {
    return dtype == DDP_DTYPE_F16 || dtype == DDP_DTYPE_BF16 || dtype == DDP_DTYPE_F32 || dtype == DDP_DTYPE_F64;
}

ddp_collective_options on(cudaStream_t stream) {
    ddp_collective_options opts;
    ddp_collective_options_init(&opts, sizeof opts);
    opts.cuda_stream = stream;
    return opts;
}

class Streams : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        switch (GetParam()) {
        case 0: stream = nullptr; break;  // legacy default
        case 1: stream = cudaStreamPerThread; break;
        default: ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess); owned = true;
        }
    }
    void TearDown() override {
        if (owned) cudaStreamDestroy(stream);
    }
    cudaStream_t stream = nullptr;
    bool owned = false;
};

TEST_P(Streams, AllreduceEveryDtypeOpAndListShape) {
    const ddp_collective_options opts = on(stream);
    for (ddp_dtype dtype : all_dtypes)
        for (ddp_op op : {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_MIN, DDP_OP_MAX, DDP_OP_PROD})
            for (const auto& shape : list_shapes)
                for (Layout layout : {Layout::apart, Layout::views, Layout::mixed}) {
                    if (op == DDP_OP_AVG && !floating(dtype)) continue;
                    if (op == DDP_OP_PROD && size > 3) continue;  // keeps products exact in 8 bits
                    DeviceList list(dtype, shape, rank, stream, layout);
                    DDP_OK_(ddp_allreduce_tensor_list(world, list.tensors.data(),
                                                      static_cast<int64_t>(list.tensors.size()), op, &opts));
                    list.expect(stream, [&](size_t t, size_t e) { return expected(op, t, e); },
                                "allreduce dtype " + std::to_string(dtype) + " op " + std::to_string(op) +
                                    (layout == Layout::views   ? ", views of one buffer"
                                     : layout == Layout::mixed ? ", views on rank 0 only"
                                                               : ""));
                }
}

TEST_P(Streams, AsyncCompletesOnTheHostAndOnAStream) {
    const ddp_collective_options opts = on(stream);
    DeviceList list(DDP_DTYPE_F32, {5000, 3, 1 << 20}, rank, stream);
    ddp_request* request = nullptr;
    DDP_OK_(ddp_allreduce_tensor_list_async(world, list.tensors.data(), 3, DDP_OP_AVG, &opts, &request));
    DDP_OK_(ddp_request_stream_wait(request, stream));  // later work on `stream` sees the result
    list.expect(stream, [](size_t t, size_t e) { return expected(DDP_OP_AVG, t, e); }, "async, stream wait");
    DDP_OK_(ddp_request_wait(request));
    DDP_OK_(ddp_request_free(request));
}

TEST_P(Streams, BroadcastReduceSyncAndCheckReplicas) {
    const ddp_collective_options opts = on(stream);
    const int root = size - 1;
    {
        DeviceList list(DDP_DTYPE_BF16, {100, 0, 70000}, rank, stream, Layout::mixed);
        DDP_OK_(ddp_broadcast_tensor_list(world, list.tensors.data(), 3, root, &opts));
        list.expect(stream, [&](size_t t, size_t e) { return value_of(root, t, e); }, "broadcast");
        int32_t identical = 0;
        DDP_OK_(ddp_check_replicas(world, list.tensors.data(), 3, &opts, &identical));
        EXPECT_EQ(identical, 1);
    }
    {
        DeviceList list(DDP_DTYPE_F64, {9, 300000}, rank, stream, Layout::views);
        DDP_OK_(ddp_reduce_tensor_list(world, list.tensors.data(), 2, DDP_OP_AVG, root, &opts));
        list.expect(stream,
                    [&](size_t t, size_t e) { return rank == root ? expected(DDP_OP_AVG, t, e) : value_of(rank, t, e); },
                    "reduce");
        if (size > 1) {
            int32_t identical = 1;
            DDP_OK_(ddp_check_replicas(world, list.tensors.data(), 2, &opts, &identical));
            EXPECT_EQ(identical, 0);
        }
    }
    {
        DeviceList moments(DDP_DTYPE_F32, {64, 64}, rank, stream);
        double scalars[2] = {static_cast<double>(rank), 0.5 * rank};
        DDP_OK_(ddp_sync_optimizer_state(world, moments.tensors.data(), 2, scalars, 2, root, &opts));
        moments.expect(stream, [&](size_t t, size_t e) { return value_of(root, t, e); }, "sync_optimizer_state");
        EXPECT_EQ(scalars[0], root);
        EXPECT_EQ(scalars[1], 0.5 * root);
    }
}

TEST_P(Streams, AlltoallEveryDtypeAndListShape) {
    // Block j of each rank's input to rank j: on nccl a group of
    // ncclSend/ncclRecv, on mpi staged through the host planes.
    const ddp_collective_options opts = on(stream);
    for (ddp_dtype dtype : all_dtypes)
        for (const std::vector<size_t>& shape : list_shapes) {
            std::vector<size_t> counts;
            for (size_t count : shape) counts.push_back(count * static_cast<size_t>(size));
            DeviceList inputs(dtype, counts, rank, stream), outputs(dtype, counts, rank, stream);
            DDP_OK_(ddp_alltoall_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(),
                                             static_cast<int64_t>(counts.size()), &opts));
            outputs.expect(
                stream,
                [&](size_t t, size_t e) {
                    const size_t block = shape[t], from = e / block;
                    return value_of(static_cast<int>(from), t, static_cast<size_t>(rank) * block + e % block);
                },
                "alltoall of " + std::to_string(counts.size()) + " tensors, dtype " + std::to_string(dtype));
        }
}

INSTANTIATE_TEST_SUITE_P(Gpu, Streams, ::testing::Values(0, 1, 2),
                         [](const auto& info) { return std::string(info.param == 0 ? "LegacyDefault"
                                                                   : info.param == 1 ? "PerThread"
                                                                                     : "Created"); });

TEST(GpuErrors, ACapturedStreamAWrongDeviceAndAMixedListAreRefused) {
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DeviceList list(DDP_DTYPE_F32, {16}, rank, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const ddp_collective_options opts = on(stream);
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    EXPECT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, &opts), DDP_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ddp_last_error_message()).find("captured into a CUDA graph"), std::string::npos)
        << ddp_last_error_message();
    cudaGraph_t graph;
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphDestroy(graph);
    ddp_tensor elsewhere = list.tensors[0];
    elsewhere.device_id = device + 1;
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &elsewhere, 1, DDP_OP_SUM, &opts), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("this communicator's GPU is cuda:"), std::string::npos);
    float host = 1;
    const ddp_tensor mixed[2] = {list.tensors[0], {&host, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, mixed, 2, DDP_OP_SUM, &opts), DDP_ERR_INVALID_ARGUMENT);
    cudaStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    // libddp starts first, so that a run without a GPU shows it loads and
    // starts (nccl: loads NCCL, then names the missing GPU).
    if (ddp_init(nullptr, &world) != DDP_OK) {
        std::fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 1;
    }
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    ddp_device(world, &device);
    const char* backend = "";
    ddp_backend_name(world, &backend);
    int count = 0;
    const cudaError_t counted = cudaGetDeviceCount(&count);
    if (counted != cudaSuccess || count == 0 || device < 0) {
        std::printf("no GPU here (%s): nothing to test\n", cudaGetErrorName(counted));
        ddp_finalize(world);
        return 77;
    }
    if (size == 1) {  // core/collectives.cpp: one rank's results are its inputs, untouched
        std::printf("one rank: every collective returns before touching the GPU; run 2 or more ranks\n");
        ddp_finalize(world);
        return 2;
    }
    std::printf("rank %d of %d, backend %s, cuda:%d\n", rank, size, backend, device);
    const int failed = RUN_ALL_TESTS();
    // A rank whose tests failed still finalizes with its peers.
    const ddp_status finalized = ddp_finalize(world);
    return failed != 0 || finalized != DDP_OK ? 1 : 0;
}
