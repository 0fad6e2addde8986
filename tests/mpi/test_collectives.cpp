// Every collective on real MPI ranks (run under mpirun with 1 to 4 ranks
// over shared memory and over TCP), checked against a serial reference that
// the test computes from what every rank contributed.
#define DDP_EXPERIMENTAL_API  // ddp_report_invalid_call
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device/cpu/half.hpp"
#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::all_dtypes;
using mpi_test::rank;
using mpi_test::size;
using mpi_test::world;

namespace {

const ddp_op all_ops[] = {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_MIN, DDP_OP_MAX, DDP_OP_PROD};

size_t width(int32_t dtype) { return (static_cast<unsigned>(dtype) & 0xffu) / 8; }
bool floating(int32_t d) {
    return d == DDP_DTYPE_F16 || d == DDP_DTYPE_BF16 || d == DDP_DTYPE_F32 || d == DDP_DTYPE_F64;
}

// Small integers, exact in every dtype, whose products over 4 ranks fit i8.
double value(int r, int64_t i, int32_t dtype) {
    if (dtype == DDP_DTYPE_U8) return static_cast<double>((r * 7 + i * 3) % 4);
    return static_cast<double>((r * 7 + i * 3) % 7 - 3);
}

// Element access through memcpy: tensors may start at any address.
template <typename T>
void put(void* data, int64_t i, T v) {
    std::memcpy(static_cast<char*>(data) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T>
T get(const void* data, int64_t i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(data) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
}

void store(void* data, int64_t i, int32_t dtype, double v) {
    switch (dtype) {
    case DDP_DTYPE_I8: put(data, i, static_cast<int8_t>(v)); break;
    case DDP_DTYPE_U8: put(data, i, static_cast<uint8_t>(v)); break;
    case DDP_DTYPE_I32: put(data, i, static_cast<int32_t>(v)); break;
    case DDP_DTYPE_I64: put(data, i, static_cast<int64_t>(v)); break;
    case DDP_DTYPE_F32: put(data, i, static_cast<float>(v)); break;
    case DDP_DTYPE_F64: put(data, i, v); break;
    case DDP_DTYPE_F16: put(data, i, ddp::float_to_f16(static_cast<float>(v))); break;
    case DDP_DTYPE_BF16: put(data, i, ddp::float_to_bf16(static_cast<float>(v))); break;
    }
}

double load(const void* data, int64_t i, int32_t dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return get<int8_t>(data, i);
    case DDP_DTYPE_U8: return get<uint8_t>(data, i);
    case DDP_DTYPE_I32: return get<int32_t>(data, i);
    case DDP_DTYPE_I64: return static_cast<double>(get<int64_t>(data, i));
    case DDP_DTYPE_F32: return get<float>(data, i);
    case DDP_DTYPE_F64: return get<double>(data, i);
    case DDP_DTYPE_F16: return ddp::f16_to_float(get<uint16_t>(data, i));
    case DDP_DTYPE_BF16: return ddp::bf16_to_float(get<uint16_t>(data, i));
    }
    return 0;
}

double reference(ddp_op op, int64_t i, int32_t dtype) {
    double result = value(0, i, dtype);
    for (int r = 1; r < size; ++r) {
        const double v = value(r, i, dtype);
        switch (op) {
        case DDP_OP_SUM: case DDP_OP_AVG: result += v; break;
        case DDP_OP_MIN: result = std::min(result, v); break;
        case DDP_OP_MAX: result = std::max(result, v); break;
        case DDP_OP_PROD: result *= v; break;
        }
    }
    return op == DDP_OP_AVG ? result / size : result;
}

double tolerance(int32_t dtype, double expected) {
    switch (dtype) {
    case DDP_DTYPE_F16: return 1e-3 * std::max(1.0, std::abs(expected));
    case DDP_DTYPE_BF16: return 8e-3 * std::max(1.0, std::abs(expected));
    case DDP_DTYPE_F32: return 1e-6 * std::max(1.0, std::abs(expected));
    default: return 1e-12;
    }
}

// A list of tensors of one dtype, owning its buffers: one buffer per tensor,
// or (`views`) one flat buffer that the tensors are back-to-back views into.
struct TensorList {
    std::vector<std::vector<unsigned char>> buffers;
    std::vector<ddp_tensor> tensors;

    TensorList(ddp_dtype dtype, const std::vector<int64_t>& counts, bool views = false) {
        if (views) {
            int64_t total = 0;
            for (int64_t count : counts) total += count;
            buffers.emplace_back(static_cast<size_t>(total) * width(dtype));
        } else {
            for (int64_t count : counts) buffers.emplace_back(static_cast<size_t>(count) * width(dtype));
        }
        size_t offset = 0;
        for (size_t t = 0; t < counts.size(); ++t) {
            unsigned char* data = views ? buffers[0].data() + offset : buffers[t].data();
            tensors.push_back({counts[t] ? data : nullptr, counts[t], dtype, DDP_DEVICE_CPU, 0, 0});
            offset += static_cast<size_t>(counts[t]) * width(dtype);
        }
    }
    // Rank r's contribution; `offset` distinguishes tensors of one list.
    void fill(int r) {
        for (size_t t = 0; t < tensors.size(); ++t)
            for (int64_t i = 0; i < tensors[t].count; ++i)
                store(tensors[t].data, i, tensors[t].dtype, value(r, i + static_cast<int64_t>(t), tensors[t].dtype));
    }
    int64_t n() const { return static_cast<int64_t>(tensors.size()); }
};

// Odd sizes, empty tensors, and tensors larger than the default fusion size.
const std::vector<int64_t> mixed_counts = {1, 0, 3, 17, 1000, 0, 20011, 300007};

void expect_reduced(const TensorList& list, ddp_op op, const char* what) {
    for (size_t t = 0; t < list.tensors.size(); ++t) {
        const ddp_tensor& tensor = list.tensors[t];
        for (int64_t i = 0; i < tensor.count; ++i) {
            const double expected = reference(op, i + static_cast<int64_t>(t), tensor.dtype);
            const double got = load(tensor.data, i, tensor.dtype);
            if (std::abs(got - expected) > tolerance(tensor.dtype, expected)) {
                ADD_FAILURE() << what << ": rank " << rank << " tensor " << t << "[" << i << "] is " << got
                              << ", expected " << expected;
                return;
            }
        }
    }
}

TEST(Queries, MatchTheLauncher) {
    int32_t local_rank = -1, local_size = -1;
    ASSERT_EQ(ddp_local_rank(world, &local_rank), DDP_OK);
    ASSERT_EQ(ddp_local_size(world, &local_size), DDP_OK);
    // The launcher's own count per node (tests/multinode runs these on several).
    EXPECT_EQ(local_size, atoi(getenv("OMPI_COMM_WORLD_LOCAL_SIZE")));
    EXPECT_EQ(local_rank, atoi(getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
    const char* name = nullptr;
    ASSERT_EQ(ddp_backend_name(world, &name), DDP_OK);
    EXPECT_STREQ(name, "mpi");
    EXPECT_EQ(size, atoi(getenv("OMPI_COMM_WORLD_SIZE")));
}

TEST(Allreduce, EveryDtypeAndOpAgainstASerialReference) {
    ddp_collective_options small_buckets, no_fusion;
    ddp_collective_options_init(&small_buckets, sizeof small_buckets);
    small_buckets.fusion_bytes = 4096;
    ddp_collective_options_init(&no_fusion, sizeof no_fusion);
    no_fusion.fusion_bytes = -1;
    for (ddp_dtype dtype : all_dtypes) {
        for (ddp_op op : all_ops) {
            if (op == DDP_OP_AVG && !floating(dtype)) continue;
            const ddp_collective_options* choices[] = {nullptr, &small_buckets, &no_fusion};
            for (const ddp_collective_options* opts : choices) {
                SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec << " op " << op
                                                << " fusion " << (opts ? opts->fusion_bytes : 0));
                TensorList list(dtype, mixed_counts);
                list.fill(rank);
                ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), list.n(), op, opts), DDP_OK)
                    << message();
                expect_reduced(list, op, "allreduce");
            }
        }
    }
}

// Small lists travel inside agreement (through shared memory up to 4 KiB,
// over the MPI channel up to 16 KiB: each edge, and one element past it, in
// every dtype's width) and small buffers go by recursive doubling (up to
// 16 KiB): every dtype and op, on any number of ranks, with the same bits on
// every rank.
TEST(Allreduce, SmallListsEveryDtypeAndOpBitwiseEqualOnEveryRank) {
    for (ddp_dtype dtype : all_dtypes) {
        const auto edge = [dtype](int64_t bytes) { return bytes / static_cast<int64_t>(width(dtype)); };
        const std::vector<std::vector<int64_t>> shapes = {
            {1}, {3, 1, 17}, {512}, {edge(4096)}, {edge(4096) + 1}, {edge(16384)}, {edge(16384) + 1}};
        for (ddp_op op : all_ops) {
            if (op == DDP_OP_AVG && !floating(dtype)) continue;
            for (const std::vector<int64_t>& counts : shapes) {
                SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec << " op " << op
                                                << " first count " << counts[0]);
                TensorList list(dtype, counts);
                list.fill(rank);
                ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), list.n(), op, nullptr), DDP_OK)
                    << message();
                expect_reduced(list, op, "small allreduce");
                int32_t identical = -1;
                ASSERT_EQ(ddp_check_replicas(world, list.tensors.data(), list.n(), nullptr, &identical), DDP_OK)
                    << message();
                EXPECT_EQ(identical, 1) << message();
            }
        }
    }
}

TEST(Allreduce, AvgOnIntegersIsRejectedOnEveryRank) {
    TensorList list(DDP_DTYPE_I32, {4});
    EXPECT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_AVG, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("AVG"), std::string::npos);
}

TEST(Allreduce, AThousandTinyTensorsAndAnEmptyList) {
    std::vector<int64_t> counts;
    for (int i = 0; i < 1000; ++i) counts.push_back(1 + i % 5);
    TensorList list(DDP_DTYPE_F32, counts);
    list.fill(rank);
    ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), list.n(), DDP_OP_SUM, nullptr), DDP_OK)
        << message();
    expect_reduced(list, DDP_OP_SUM, "1000 tensors");
    EXPECT_EQ(ddp_allreduce_tensor_list(world, nullptr, 0, DDP_OP_SUM, nullptr), DDP_OK) << message();
}

// Views into one flat buffer are reduced where they lie, without packing;
// ranks with different layouts (views on even ranks, separate buffers on
// odd ones) must still issue the same operations and agree.
TEST(Allreduce, ViewsIntoOneFlatBufferOnSomeRanks) {
    const bool views = rank % 2 == 0;
    ddp_collective_options small_buckets;
    ddp_collective_options_init(&small_buckets, sizeof small_buckets);
    small_buckets.fusion_bytes = 4096;
    for (ddp_dtype dtype : {DDP_DTYPE_F32, DDP_DTYPE_BF16, DDP_DTYPE_I32}) {
        const ddp_op op = floating(dtype) ? DDP_OP_AVG : DDP_OP_SUM;
        for (const ddp_collective_options* opts : {static_cast<const ddp_collective_options*>(nullptr),
                                                 static_cast<const ddp_collective_options*>(&small_buckets)}) {
            SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec
                                            << (opts ? " 4 KiB buckets" : " default buckets"));
            TensorList list(dtype, mixed_counts, views);
            list.fill(rank);
            ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), list.n(), op, opts), DDP_OK)
                << message();
            expect_reduced(list, op, "allreduce of views");
        }
    }
    const int root = size - 1;
    TensorList list(DDP_DTYPE_F64, mixed_counts, views), expected(DDP_DTYPE_F64, mixed_counts, views);
    list.fill(rank);
    expected.fill(root);
    ASSERT_EQ(ddp_broadcast_tensor_list(world, list.tensors.data(), list.n(), root, nullptr), DDP_OK) << message();
    EXPECT_EQ(list.buffers, expected.buffers) << "broadcast of views, rank " << rank;
    list.fill(rank);
    ASSERT_EQ(ddp_reduce_tensor_list(world, list.tensors.data(), list.n(), DDP_OP_SUM, root, nullptr), DDP_OK) << message();
    if (rank == root) expect_reduced(list, DDP_OP_SUM, "reduce of views at root");
}

// MIN and MAX propagate NaN whichever rank holds it, for every floating
// dtype, fused or not (0.1: MIN of {1, NaN, 2} on 3 ranks gave 2).
TEST(Allreduce, MinAndMaxPropagateNaNFromAnyRank) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    ddp_collective_options no_fusion;
    ddp_collective_options_init(&no_fusion, sizeof no_fusion);
    no_fusion.fusion_bytes = -1;
    for (ddp_dtype dtype : {DDP_DTYPE_F16, DDP_DTYPE_BF16, DDP_DTYPE_F32, DDP_DTYPE_F64}) {
        for (ddp_op op : {DDP_OP_MIN, DDP_OP_MAX}) {
            for (int holder = 0; holder < size; ++holder) {
                for (const ddp_collective_options* opts : {static_cast<const ddp_collective_options*>(nullptr),
                                                           static_cast<const ddp_collective_options*>(&no_fusion)}) {
                    // Two small tensors (fused by default) and one large (in place).
                    TensorList list(dtype, {3, 3, 70000});
                    for (ddp_tensor& tensor : list.tensors)
                        for (int64_t i = 0; i < tensor.count; ++i)
                            store(tensor.data, i, dtype, rank == holder && i == 1 ? nan : rank + 1.0);
                    ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), list.n(), op, opts), DDP_OK)
                        << message();
                    for (size_t t = 0; t < list.tensors.size(); ++t) {
                        EXPECT_TRUE(std::isnan(load(list.tensors[t].data, 1, dtype)))
                            << "dtype " << dtype << " op " << op << " NaN on rank " << holder << " tensor " << t;
                        EXPECT_EQ(load(list.tensors[t].data, 0, dtype), op == DDP_OP_MIN ? 1.0 : size)
                            << "dtype " << dtype << " op " << op << " tensor " << t;
                    }
                }
            }
        }
    }
}

// AVG divides in place wherever the tensor starts, odd addresses included.
TEST(Allreduce, AvgOfTensorsAtOddAddresses) {
    std::vector<unsigned char> bytes(1 + 8 * 5 + 1 + 4 * 7);
    ddp_tensor tensors[2] = {{bytes.data() + 1, 5, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0},
                             {bytes.data() + 1 + 8 * 5 + 1, 7, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    for (const ddp_tensor& tensor : tensors)
        for (int64_t i = 0; i < tensor.count; ++i) store(tensor.data, i, tensor.dtype, value(rank, i, tensor.dtype));
    ASSERT_EQ(ddp_allreduce_tensor_list(world, tensors, 2, DDP_OP_AVG, nullptr), DDP_OK) << message();
    for (const ddp_tensor& tensor : tensors)
        for (int64_t i = 0; i < tensor.count; ++i)
            EXPECT_NEAR(load(tensor.data, i, tensor.dtype), reference(DDP_OP_AVG, i, tensor.dtype), 1e-6);
}

TEST(Broadcast, FromTheLastRank) {
    const int root = size - 1;
    for (ddp_dtype dtype : {DDP_DTYPE_F32, DDP_DTYPE_BF16, DDP_DTYPE_I64}) {
        TensorList list(dtype, mixed_counts), expected(dtype, mixed_counts);
        list.fill(rank);
        expected.fill(root);
        ASSERT_EQ(ddp_broadcast_tensor_list(world, list.tensors.data(), list.n(), root, nullptr), DDP_OK) << message();
        EXPECT_EQ(list.buffers, expected.buffers) << "rank " << rank;
    }
}

TEST(Reduce, ToTheLastRankLeavesOthersUnchanged) {
    const int root = size - 1;
    for (ddp_op op : {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_MAX}) {
        TensorList list(DDP_DTYPE_F64, mixed_counts), mine(DDP_DTYPE_F64, mixed_counts);
        list.fill(rank);
        mine.fill(rank);
        ASSERT_EQ(ddp_reduce_tensor_list(world, list.tensors.data(), list.n(), op, root, nullptr), DDP_OK) << message();
        if (rank == root)
            expect_reduced(list, op, "reduce at root");
        else
            EXPECT_EQ(list.buffers, mine.buffers);
    }
}

TEST(SyncOptimizerState, LeavesAndScalarsFromRoot) {
    const int root = size - 1;
    TensorList leaves(DDP_DTYPE_F32, {10, 0, 70000}), expected(DDP_DTYPE_F32, {10, 0, 70000});
    leaves.fill(rank);
    expected.fill(root);
    double scalars[2] = {100.0 + rank, 0.001 * (rank + 1)};
    ASSERT_EQ(ddp_sync_optimizer_state(world, leaves.tensors.data(), leaves.n(), scalars, 2, root, nullptr), DDP_OK)
        << message();
    EXPECT_EQ(leaves.buffers, expected.buffers);
    EXPECT_EQ(scalars[0], 100.0 + root);
    EXPECT_EQ(scalars[1], 0.001 * (root + 1));
}

TEST(Async, OverlapsWithComputeAndCompletesInOrder) {
    TensorList a(DDP_DTYPE_F32, mixed_counts), b(DDP_DTYPE_F64, {5, 6});
    a.fill(rank);
    b.fill(rank);
    ddp_request *first = nullptr, *second = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, a.tensors.data(), a.n(), DDP_OP_AVG, nullptr, &first),
              DDP_OK) << message();
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, b.tensors.data(), b.n(), DDP_OP_SUM, nullptr, &second),
              DDP_OK) << message();
    // The host computes while the requests progress; test() never blocks.
    volatile double sink = 0;
    int32_t done = 0;
    int polls = 0;
    while (!done) {
        for (int i = 0; i < 100000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
        ASSERT_EQ(ddp_request_test(second, &done), DDP_OK) << message();
        ++polls;
    }
    EXPECT_GE(polls, 1);
    EXPECT_EQ(ddp_request_wait(first), DDP_OK) << message();
    EXPECT_EQ(ddp_request_free(first), DDP_OK);
    EXPECT_EQ(ddp_request_free(second), DDP_OK);
    expect_reduced(a, DDP_OP_AVG, "async a");
    expect_reduced(b, DDP_OP_SUM, "async b");
    // A blocking call after async ones runs after them.
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, b.tensors.data(), b.n(), DDP_OP_MAX, nullptr, &first),
              DDP_OK);
    TensorList c(DDP_DTYPE_I32, {3});
    c.fill(rank);
    ASSERT_EQ(ddp_allreduce_tensor_list(world, c.tensors.data(), 1, DDP_OP_MIN, nullptr), DDP_OK);
    EXPECT_EQ(ddp_request_free(first), DDP_OK);
    expect_reduced(c, DDP_OP_MIN, "blocking after async");
}

TEST(CheckReplicas, IdenticalAndDifferent) {
    TensorList list(DDP_DTYPE_F32, {8, 100000, 3});
    list.fill(0);
    int32_t identical = -1;
    ASSERT_EQ(ddp_check_replicas(world, list.tensors.data(), list.n(), nullptr, &identical), DDP_OK) << message();
    EXPECT_EQ(identical, 1);
    if (size == 1) return;
    if (rank == size - 1) static_cast<float*>(list.tensors[1].data)[99999] += 1.0f;
    ASSERT_EQ(ddp_check_replicas(world, list.tensors.data(), list.n(), nullptr, &identical), DDP_OK) << message();
    EXPECT_EQ(identical, 0);
    EXPECT_NE(message().find("tensor 1"), std::string::npos) << message();
    EXPECT_NE(message().find("rank " + std::to_string(size - 1)), std::string::npos) << message();
}

TEST(Barrier, Works) { EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message(); }

// Fusion choices every allgather and reduce_scatter test runs with: the
// default, small buckets, none.
std::vector<ddp_collective_options> fusion_choices() {
    std::vector<ddp_collective_options> choices(3);
    for (ddp_collective_options& opts : choices) ddp_collective_options_init(&opts, sizeof opts);
    choices[1].fusion_bytes = 4096;
    choices[2].fusion_bytes = -1;
    return choices;
}

std::vector<int64_t> times(const std::vector<int64_t>& counts, int factor) {
    std::vector<int64_t> scaled;
    for (int64_t count : counts) scaled.push_back(count * factor);
    return scaled;
}

TEST(Allgather, EveryDtypeFusedAndNotInRankOrder) {
    for (ddp_dtype dtype : all_dtypes) {
        for (const ddp_collective_options& opts : fusion_choices()) {
            SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec << " fusion "
                                            << opts.fusion_bytes);
            TensorList inputs(dtype, mixed_counts), outputs(dtype, times(mixed_counts, size));
            inputs.fill(rank);
            ASSERT_EQ(ddp_allgather_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), inputs.n(), &opts),
                      DDP_OK)
                << message();
            for (size_t t = 0; t < mixed_counts.size(); ++t)
                for (int r = 0; r < size; ++r)
                    for (int64_t i = 0; i < mixed_counts[t]; ++i) {
                        const double expected = value(r, i + static_cast<int64_t>(t), dtype);
                        const double got = load(outputs.tensors[t].data, r * mixed_counts[t] + i, dtype);
                        ASSERT_EQ(got, expected) << "tensor " << t << ", rank " << r << "'s element " << i;
                    }
        }
    }
}

TEST(Allgather, InPlaceFromItsOwnBlock) {
    for (const ddp_collective_options& opts : fusion_choices()) {
        TensorList outputs(DDP_DTYPE_F32, times({3, 50000}, size));
        std::vector<ddp_tensor> inputs = outputs.tensors;
        for (ddp_tensor& input : inputs) {
            input.count /= size;
            input.data = static_cast<float*>(input.data) + rank * input.count;
            for (int64_t i = 0; i < input.count; ++i) put(input.data, i, static_cast<float>(rank * 100000 + i));
        }
        ASSERT_EQ(ddp_allgather_tensor_list(world, inputs.data(), outputs.tensors.data(), 2, &opts), DDP_OK)
            << message();
        for (size_t t = 0; t < inputs.size(); ++t)
            for (int64_t i = 0; i < outputs.tensors[t].count; ++i) {
                const int64_t r = i / inputs[t].count, j = i % inputs[t].count;
                ASSERT_EQ(get<float>(outputs.tensors[t].data, i), static_cast<float>(r * 100000 + j))
                    << "fusion " << opts.fusion_bytes << " tensor " << t << " element " << i;
            }
    }
}

TEST(ReduceScatter, EveryDtypeAndOpGivesEachRankItsShard) {
    const std::vector<int64_t> shards = {1, 0, 3, 17, 1000, 20011, 300007};
    for (ddp_dtype dtype : all_dtypes) {
        for (ddp_op op : all_ops) {
            if (op == DDP_OP_AVG && !floating(dtype)) continue;
            for (const ddp_collective_options& opts : fusion_choices()) {
                SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec << " op " << op
                                                << " fusion " << opts.fusion_bytes);
                TensorList inputs(dtype, times(shards, size)), outputs(dtype, shards);
                inputs.fill(rank);
                const std::vector<std::vector<unsigned char>> before = inputs.buffers;
                ASSERT_EQ(ddp_reduce_scatter_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(),
                                                         inputs.n(), op, &opts),
                          DDP_OK)
                    << message();
                ASSERT_EQ(inputs.buffers, before) << "reduce_scatter wrote into its inputs";
                for (size_t t = 0; t < shards.size(); ++t)
                    for (int64_t i = 0; i < shards[t]; ++i) {
                        // Element rank × shard + i of the reduction (fill offsets tensor t by t).
                        const double expected = reference(op, rank * shards[t] + i + static_cast<int64_t>(t), dtype);
                        const double got = load(outputs.tensors[t].data, i, dtype);
                        ASSERT_LE(std::abs(got - expected), tolerance(dtype, expected))
                            << "tensor " << t << "[" << i << "] is " << got << ", expected " << expected;
                    }
            }
        }
    }
}

TEST(ReduceScatter, ThenAllgatherEqualsAllreduce) {
    // ZeRO's step: the two halves together are one allreduce.
    const std::vector<int64_t> counts = {8, 3000, 100};
    TensorList whole(DDP_DTYPE_F64, times(counts, size)), shard(DDP_DTYPE_F64, counts),
        gathered(DDP_DTYPE_F64, times(counts, size));
    whole.fill(rank);
    ASSERT_EQ(ddp_reduce_scatter_tensor_list(world, whole.tensors.data(), shard.tensors.data(), 3, DDP_OP_AVG, nullptr),
              DDP_OK)
        << message();
    ASSERT_EQ(ddp_allgather_tensor_list(world, shard.tensors.data(), gathered.tensors.data(), 3, nullptr), DDP_OK)
        << message();
    ASSERT_EQ(ddp_allreduce_tensor_list(world, whole.tensors.data(), 3, DDP_OP_AVG, nullptr), DDP_OK) << message();
    EXPECT_EQ(gathered.buffers, whole.buffers);
}

TEST(ReduceScatter, UnevenCountIsRefusedNamingTheTensor) {
    if (size == 1) GTEST_SKIP() << "every count divides by one rank";
    TensorList inputs(DDP_DTYPE_F32, {static_cast<int64_t>(size) * 2, static_cast<int64_t>(size) * 3 + 1}),
        outputs(DDP_DTYPE_F32, {2, 3});
    EXPECT_EQ(ddp_reduce_scatter_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 2, DDP_OP_SUM,
                                             nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("inputs[1].count is " + std::to_string(size * 3 + 1) + ", not a multiple of the " +
                             std::to_string(size) + " ranks"),
              std::string::npos)
        << message();
    EXPECT_NE(message().find("pad it to " + std::to_string(size * 4)), std::string::npos) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

TEST(Allgather, ArgumentErrorsNameTheTensor) {
    TensorList inputs(DDP_DTYPE_F32, {4, 4}), outputs(DDP_DTYPE_F32, {4L * size, 4L * size + 1}),
        wide(DDP_DTYPE_F64, {4L * size, 4L * size});
    EXPECT_EQ(ddp_allgather_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 2, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("outputs[1].count is " + std::to_string(4 * size + 1)), std::string::npos) << message();
    EXPECT_EQ(ddp_allgather_tensor_list(world, inputs.tensors.data(), wide.tensors.data(), 2, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("outputs[0].dtype is f64 but inputs[0].dtype is f32"), std::string::npos) << message();
    EXPECT_EQ(ddp_allgather_tensor_list(world, inputs.tensors.data(), nullptr, 2, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("outputs is NULL"), std::string::npos) << message();
    if (size > 1) {  // an input inside another rank's block of its output
        std::vector<ddp_tensor> inside = {outputs.tensors[0]};
        inside[0].count = 4;
        inside[0].data = static_cast<float*>(inside[0].data) + 4 * ((rank + 1) % size);
        EXPECT_EQ(ddp_allgather_tensor_list(world, inside.data(), outputs.tensors.data(), 1, nullptr),
                  DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(message().find("inputs[0] overlaps outputs[0]"), std::string::npos) << message();
    }
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

TEST(Async, AllgatherAndReduceScatterRequests) {
    TensorList inputs(DDP_DTYPE_F32, {5, 70000}), gathered(DDP_DTYPE_F32, times({5, 70000}, size)),
        whole(DDP_DTYPE_F32, times({5, 70000}, size)), shard(DDP_DTYPE_F32, {5, 70000});
    inputs.fill(rank);
    whole.fill(rank);
    ddp_request *gather = nullptr, *scatter = nullptr;
    ASSERT_EQ(ddp_allgather_tensor_list_async(world, inputs.tensors.data(), gathered.tensors.data(), 2, nullptr,
                                              &gather),
              DDP_OK)
        << message();
    ASSERT_EQ(ddp_reduce_scatter_tensor_list_async(world, whole.tensors.data(), shard.tensors.data(), 2, DDP_OP_SUM,
                                                   nullptr, &scatter),
              DDP_OK)
        << message();
    ASSERT_EQ(ddp_request_free(gather), DDP_OK) << message();
    ASSERT_EQ(ddp_request_free(scatter), DDP_OK) << message();
    for (int r = 0; r < size; ++r)
        EXPECT_EQ(load(gathered.tensors[1].data, r * 70000 + 7, DDP_DTYPE_F32), value(r, 8, DDP_DTYPE_F32));
    EXPECT_EQ(load(shard.tensors[1].data, 7, DDP_DTYPE_F32), reference(DDP_OP_SUM, rank * 70000 + 8, DDP_DTYPE_F32));
}

// alltoall's value for element i of block `to` that rank `from` sends: the
// pair and the position, so a block delivered to the wrong rank, from the
// wrong rank or at the wrong place shows.
double exchanged(int from, int to, int64_t i, int32_t dtype) { return value(from * 5 + to, i, dtype); }

TEST(Alltoall, EveryDtypeFusedAndNotInRankOrder) {
    const std::vector<int64_t> blocks = {1, 0, 3, 17, 1000, 20011, 300007};
    for (ddp_dtype dtype : all_dtypes) {
        for (const ddp_collective_options& opts : fusion_choices()) {
            SCOPED_TRACE(testing::Message() << "dtype 0x" << std::hex << dtype << std::dec << " fusion "
                                            << opts.fusion_bytes);
            TensorList inputs(dtype, times(blocks, size)), outputs(dtype, times(blocks, size));
            for (size_t t = 0; t < blocks.size(); ++t)
                for (int to = 0; to < size; ++to)
                    for (int64_t i = 0; i < blocks[t]; ++i)
                        store(inputs.tensors[t].data, to * blocks[t] + i, dtype,
                              exchanged(rank, to, i + static_cast<int64_t>(t), dtype));
            const std::vector<std::vector<unsigned char>> before = inputs.buffers;
            ASSERT_EQ(ddp_alltoall_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), inputs.n(), &opts),
                      DDP_OK)
                << message();
            ASSERT_EQ(inputs.buffers, before) << "alltoall wrote into its inputs";
            for (size_t t = 0; t < blocks.size(); ++t)
                for (int from = 0; from < size; ++from)
                    for (int64_t i = 0; i < blocks[t]; ++i)
                        ASSERT_EQ(load(outputs.tensors[t].data, from * blocks[t] + i, dtype),
                                  exchanged(from, rank, i + static_cast<int64_t>(t), dtype))
                            << "tensor " << t << ", the block from rank " << from << ", element " << i;
        }
    }
}

TEST(Alltoall, AsyncTwiceIsTheIdentity) {
    // Exchanging back undoes the exchange: block r from rank r returns to rank r's block r.
    TensorList inputs(DDP_DTYPE_F32, times({5, 70000}, size)), middle(DDP_DTYPE_F32, times({5, 70000}, size)),
        back(DDP_DTYPE_F32, times({5, 70000}, size));
    inputs.fill(rank);
    ddp_request* there = nullptr;
    ASSERT_EQ(ddp_alltoall_tensor_list_async(world, inputs.tensors.data(), middle.tensors.data(), 2, nullptr, &there),
              DDP_OK)
        << message();
    ASSERT_EQ(ddp_request_free(there), DDP_OK) << message();
    ASSERT_EQ(ddp_alltoall_tensor_list(world, middle.tensors.data(), back.tensors.data(), 2, nullptr), DDP_OK)
        << message();
    EXPECT_EQ(back.buffers, inputs.buffers);
}

TEST(Alltoall, ArgumentErrorsNameTheTensor) {
    TensorList inputs(DDP_DTYPE_F32, {4L * size, 4L * size}), longer(DDP_DTYPE_F32, {4L * size, 4L * size + 1}),
        wide(DDP_DTYPE_F64, {4L * size, 4L * size});
    EXPECT_EQ(ddp_alltoall_tensor_list(world, inputs.tensors.data(), longer.tensors.data(), 2, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("outputs[1].count is " + std::to_string(4 * size + 1)), std::string::npos) << message();
    EXPECT_EQ(ddp_alltoall_tensor_list(world, inputs.tensors.data(), wide.tensors.data(), 2, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("outputs[0].dtype is f64 but inputs[0].dtype is f32"), std::string::npos) << message();
    EXPECT_EQ(ddp_alltoall_tensor_list(world, inputs.tensors.data(), inputs.tensors.data(), 2, nullptr),
              DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("alltoall's inputs and outputs must be apart"), std::string::npos) << message();
    if (size > 1) {
        TensorList uneven(DDP_DTYPE_F32, {4L * size + 1});
        EXPECT_EQ(ddp_alltoall_tensor_list(world, uneven.tensors.data(), uneven.tensors.data(), 1, nullptr),
                  DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(message().find("inputs[0].count is " + std::to_string(4 * size + 1) + ", not a multiple of the " +
                                 std::to_string(size) + " ranks alltoall sends its blocks to"),
                  std::string::npos)
            << message();
    }
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

// Every rank passes a valid list, but one rank's differs in one way. Every
// rank must return DDP_ERR_MISMATCH quickly, naming two ranks and what
// differs, and the communicator must stay usable.
class Mismatch : public testing::Test {
protected:
    void SetUp() override {
        if (size == 1) GTEST_SKIP() << "needs two ranks";
        started = std::chrono::steady_clock::now();
    }
    void expect_mismatch(ddp_status status, const std::string& detail) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        EXPECT_EQ(status, DDP_ERR_MISMATCH) << message();
        EXPECT_NE(message().find("rank 0"), std::string::npos) << message();
        EXPECT_NE(message().find("rank " + std::to_string(odd)), std::string::npos) << message();
        EXPECT_NE(message().find(detail), std::string::npos) << message();
        EXPECT_LT(seconds, 2.0);
        expect_usable();
    }
    static void expect_usable() {
        TensorList list(DDP_DTYPE_F32, {5});
        list.fill(rank);
        EXPECT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, nullptr), DDP_OK);
        expect_reduced(list, DDP_OP_SUM, "after mismatch");
    }
    const int odd = size - 1;  // the rank that passes something else
    std::chrono::steady_clock::time_point started;
};

TEST_F(Mismatch, TensorCount) {
    TensorList list(DDP_DTYPE_F32, {4, 4, 4});
    expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), rank == odd ? 2 : 3, DDP_OP_SUM, nullptr),
                    "tensor 2");
}

TEST_F(Mismatch, Dtype) {
    TensorList list(rank == odd ? DDP_DTYPE_F64 : DDP_DTYPE_F32, {4, 4});
    expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), 2, DDP_OP_SUM, nullptr),
                    "tensor 0 is f32[4]");
}

TEST_F(Mismatch, Size) {
    TensorList list(DDP_DTYPE_F32, {4, rank == odd ? 6 : 5, 4});
    expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), 3, DDP_OP_SUM, nullptr),
                    "tensor 1 is f32[5]");
}

// One rank's list small enough to ride in agreement's messages, the other's
// just past it (the shm route's 4 KiB edge, the MPI channel's 16 KiB one):
// their messages differ in layout, which reads as a mismatch, not a sum.
TEST_F(Mismatch, CarriedBesideNotCarried) {
    for (int64_t edge : {1024, 4096}) {
        started = std::chrono::steady_clock::now();
        TensorList list(DDP_DTYPE_F32, {rank == odd ? edge + 1 : edge});
        expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, nullptr),
                        "tensor 0 is f32[" + std::to_string(edge) + "]");
    }
}

TEST_F(Mismatch, Op) {
    TensorList list(DDP_DTYPE_F32, {4});
    expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, rank == odd ? DDP_OP_MAX : DDP_OP_SUM,
                                              nullptr),
                    "op SUM");
}

TEST_F(Mismatch, Root) {
    TensorList list(DDP_DTYPE_F32, {4});
    expect_mismatch(ddp_broadcast_tensor_list(world, list.tensors.data(), 1, rank == odd ? odd : 0, nullptr), "root 0");
}

TEST_F(Mismatch, Collective) {
    TensorList list(DDP_DTYPE_F32, {4});
    expect_mismatch(rank == odd ? ddp_broadcast_tensor_list(world, list.tensors.data(), 1, 0, nullptr)
                                : ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, nullptr),
                    "called allreduce");
}

TEST_F(Mismatch, FusionSize) {
    TensorList list(DDP_DTYPE_F32, {4});
    ddp_collective_options opts;
    ddp_collective_options_init(&opts, sizeof opts);
    opts.fusion_bytes = rank == odd ? 8192 : 0;
    expect_mismatch(ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, &opts), "fusion_bytes");
}

TEST_F(Mismatch, OptimizerStateLeaves) {
    TensorList leaves(DDP_DTYPE_F32, {3, rank == odd ? 9 : 8});
    double scalar = 1;
    expect_mismatch(ddp_sync_optimizer_state(world, leaves.tensors.data(), 2, &scalar, 1, 0, nullptr), "leaf 1");
}

TEST_F(Mismatch, OptimizerStateScalars) {
    TensorList leaves(DDP_DTYPE_F32, {3});
    double scalars[2] = {1, 2};
    expect_mismatch(ddp_sync_optimizer_state(world, leaves.tensors.data(), 1, scalars, rank == odd ? 1 : 2, 0, nullptr),
                    "scalars");
}

TEST_F(Mismatch, InvalidArgumentsOnOneRank) {
    TensorList list(DDP_DTYPE_F32, {4});
    if (rank == odd) list.tensors[0].data = nullptr;
    const ddp_status status = ddp_allreduce_tensor_list(world, list.tensors.data(), 1, DDP_OP_SUM, nullptr);
    if (rank == odd) {
        EXPECT_EQ(status, DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(message().find("tensors[0].data is NULL"), std::string::npos) << message();
        expect_usable();
    } else {
        expect_mismatch(status, "rank " + std::to_string(odd) + " passed invalid arguments to allreduce");
        EXPECT_NE(message().find("tensors[0].data is NULL"), std::string::npos) << message();  // its reason
    }
}

TEST_F(Mismatch, BindingReportsAnInvalidCallOfItsOwn) {
    TensorList list(DDP_DTYPE_F32, {4});
    if (rank == odd) {
        EXPECT_EQ(ddp_report_invalid_call(world, "broadcast", "params['w']: the array is not contiguous", nullptr),
                  DDP_OK);
        expect_usable();
    } else {
        expect_mismatch(ddp_broadcast_tensor_list(world, list.tensors.data(), 1, 0, nullptr),
                        "rank " + std::to_string(odd) + " passed invalid arguments to broadcast");
        EXPECT_NE(message().find("params['w']: the array is not contiguous"), std::string::npos) << message();
    }
    EXPECT_EQ(ddp_report_invalid_call(world, "gather", "", nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("\"gather\" is not one of"), std::string::npos) << message();
}

TEST_F(Mismatch, AllgatherInputSize) {
    TensorList inputs(DDP_DTYPE_F32, {4, rank == odd ? 6 : 5}), outputs(DDP_DTYPE_F32, times({4, rank == odd ? 6 : 5}, size));
    expect_mismatch(ddp_allgather_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 2, nullptr),
                    "tensor 1 is f32[5]");
}

TEST_F(Mismatch, ReduceScatterAgainstAllreduce) {
    TensorList inputs(DDP_DTYPE_F32, {4L * size}), outputs(DDP_DTYPE_F32, {4});
    expect_mismatch(rank == odd ? ddp_allreduce_tensor_list(world, inputs.tensors.data(), 1, DDP_OP_SUM, nullptr)
                                : ddp_reduce_scatter_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 1,
                                                                 DDP_OP_SUM, nullptr),
                    "called reduce_scatter");
}

TEST_F(Mismatch, ReduceScatterOutputCountOnOneRank) {
    TensorList inputs(DDP_DTYPE_F32, {4L * size}), outputs(DDP_DTYPE_F32, {rank == odd ? 3 : 4});
    const ddp_status status = ddp_reduce_scatter_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 1,
                                                             DDP_OP_SUM, nullptr);
    if (rank == odd) {
        EXPECT_EQ(status, DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(message().find("outputs[0].count is 3"), std::string::npos) << message();
        expect_usable();
    } else {
        expect_mismatch(status, "rank " + std::to_string(odd) + " passed invalid arguments to reduce_scatter");
    }
}

TEST_F(Mismatch, AlltoallOutputCountOnOneRank) {
    TensorList inputs(DDP_DTYPE_F32, {4L * size}), outputs(DDP_DTYPE_F32, {rank == odd ? 4L * size - 1 : 4L * size});
    const ddp_status status =
        ddp_alltoall_tensor_list(world, inputs.tensors.data(), outputs.tensors.data(), 1, nullptr);
    if (rank == odd) {
        EXPECT_EQ(status, DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(message().find("outputs[0].count is " + std::to_string(4 * size - 1)), std::string::npos)
            << message();
        expect_usable();
    } else {
        expect_mismatch(status, "rank " + std::to_string(odd) + " passed invalid arguments to alltoall");
    }
}

TEST_F(Mismatch, AlltoallAgainstAllgather) {
    TensorList inputs(DDP_DTYPE_F32, {4L * size}), exchanged(DDP_DTYPE_F32, {4L * size}),
        gathered(DDP_DTYPE_F32, {4L * size * size});
    const ddp_status status =
        rank == odd ? ddp_alltoall_tensor_list(world, inputs.tensors.data(), exchanged.tensors.data(), 1, nullptr)
                    : ddp_allgather_tensor_list(world, inputs.tensors.data(), gathered.tensors.data(), 1, nullptr);
    expect_mismatch(status, "called alltoall");
}

TEST_F(Mismatch, AsyncRequestReportsIt) {
    TensorList list(DDP_DTYPE_F32, {4, 4});
    ddp_request* request = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, list.tensors.data(), rank == odd ? 1 : 2, DDP_OP_SUM, nullptr,
                                              &request),
              DDP_OK);
    expect_mismatch(ddp_request_free(request), "tensor 1");
}

}  // namespace

// Views of one flat buffer move in one step, in place, when every rank's
// list is one region; a rank whose list is scattered makes every rank take
// the fused plan instead (voted in agreement), and results stay exact.
namespace regions {

// 40 tensors of 1000 to 40000 floats (some above the fusion threshold).
std::vector<int64_t> counts() {
    std::vector<int64_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(1000 + 1000 * (i % 40));
    return out;
}

// Transfer events on this rank's timeline while `body` runs.
int transfers_while(const std::function<void()>& body) {
    const std::string path = "/tmp/ddp-regions-" + std::to_string(getppid()) + ".json";
    EXPECT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << message();
    body();
    EXPECT_EQ(ddp_timeline_stop(world), DDP_OK) << message();
    const std::string file = "/tmp/ddp-regions-" + std::to_string(getppid()) + ".rank" + std::to_string(rank) + ".json";
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(file.c_str());
    int found = 0;
    for (size_t at = text.str().find("\"name\":\"transfer\""); at != std::string::npos;
         at = text.str().find("\"name\":\"transfer\"", at + 1))
        ++found;
    return found;
}

// Allreduces the list (views into one buffer when `one_region`, else each
// tensor in its own vector) and checks the sums exactly. In 1 MiB buckets:
// with the size chosen by measurement, calls in a row would try different ones.
void allreduce_list(bool one_region) {
    ddp_collective_options options;
    ddp_collective_options_init(&options, sizeof options);
    options.fusion_bytes = 1 << 20;
    const std::vector<int64_t> sizes = counts();
    int64_t total = 0;
    for (int64_t c : sizes) total += c;
    std::vector<float> flat(static_cast<size_t>(total));
    std::vector<std::vector<float>> separate(sizes.size());
    std::vector<ddp_tensor> list;
    int64_t offset = 0;
    for (size_t t = 0; t < sizes.size(); ++t) {
        float* data = flat.data() + offset;
        if (!one_region) {
            separate[t].resize(static_cast<size_t>(sizes[t]));
            data = separate[t].data();
        }
        for (int64_t i = 0; i < sizes[t]; ++i) data[i] = static_cast<float>((rank + 1) * ((i + static_cast<int64_t>(t)) % 5));
        list.push_back({data, sizes[t], DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
        offset += sizes[t];
    }
    ASSERT_EQ(ddp_allreduce_tensor_list(world, list.data(), static_cast<int64_t>(list.size()), DDP_OP_AVG, &options),
              DDP_OK)
        << message();
    const double ranks_sum = size * (size + 1) / 2.0;
    for (size_t t = 0; t < sizes.size(); ++t)
        for (int64_t i = 0; i < sizes[t]; ++i)
            ASSERT_EQ(static_cast<const float*>(list[t].data)[i],
                      static_cast<float>(ranks_sum * ((i + static_cast<int64_t>(t)) % 5) / size))
                << "tensor " << t << " element " << i;
}

}  // namespace regions

TEST(Regions, ViewsOfOneBufferMoveInOneStep) {
    const int steps = regions::transfers_while([] { regions::allreduce_list(true); });
    if (size > 1) {
        EXPECT_EQ(steps, 1);
    }
}

TEST(Regions, OneScatteredRankMakesEveryRankTakeTheFusedPlan) {
    const int one = regions::transfers_while([] { regions::allreduce_list(rank != size - 1); });
    const int scattered = regions::transfers_while([] { regions::allreduce_list(false); });
    if (size > 1) {
        EXPECT_GT(scattered, 1);
        EXPECT_EQ(one, scattered);  // the same steps as a fully scattered call, on every rank
    }
}

// This process's resident memory in bytes.
long resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    long pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * sysconf(_SC_PAGESIZE);
}

TEST(Regions, ARegionRunsWhereItLiesWithNoBucketMemory) {
    // A flat model's gradients (96 MiB of views into one buffer) move in
    // place: libddp takes no fusion buffer for them (two buckets of the
    // whole region were 192 MiB).
    const int64_t quarter = int64_t{6} << 20;
    std::vector<float> flat(static_cast<size_t>(4 * quarter), 1.0f);
    std::vector<ddp_tensor> views;
    for (int64_t q = 0; q < 4; ++q) views.push_back({flat.data() + q * quarter, quarter, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    const long before = resident_bytes();
    ASSERT_EQ(ddp_allreduce_tensor_list(world, views.data(), 4, DDP_OP_SUM, nullptr), DDP_OK) << message();
    const long grown = resident_bytes() - before;
    EXPECT_LT(grown, long{32} << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
    EXPECT_EQ(flat[0], static_cast<float>(size));
    EXPECT_EQ(flat.back(), static_cast<float>(size));
}

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    ddp_comm* second = nullptr;
    // A second init while the world is live, then calls after finalize.
    if (ddp_init(nullptr, &second) != DDP_ERR_ALREADY_INITIALIZED) return 3;
    if (ddp_finalize(world) != DDP_OK || ddp_finalize(world) != DDP_OK) return 4;
    if (ddp_barrier(world, nullptr) != DDP_ERR_NOT_INITIALIZED) return 5;
    // MPI, which libddp started and finalized, cannot start again.
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.backend = DDP_BACKEND_MPI;
    if (ddp_init(&opts, &second) != DDP_ERR_ALREADY_INITIALIZED) return 6;
    return result;
}
