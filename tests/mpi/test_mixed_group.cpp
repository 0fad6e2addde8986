// One group across processes x threads: ddp_init_local under mpirun, each
// process's threads ranks process x n + i of one group. Every collective's
// results on 1-3 threads per process against the exact expected values,
// and the faults that hold across processes (a thread passing another
// list, a thread's invalid argument, a thread that never calls, processes
// starting different counts, a process refusing its arguments) ending
// every rank of every process in bounded time. MPI is the test's (started
// here at MPI_THREAD_MULTIPLE), so that every test can start a new group.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#define DDP_EXPERIMENTAL_API  // ddp_init_local, ddp_reducer_*
#include "ddp/ddp.h"

namespace {

int process = 0, processes = 1;

ddp_tensor f32(std::vector<float>& data) {
    return ddp_tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
}
ddp_tensor i32(std::vector<int32_t>& data) {
    return ddp_tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0};
}
ddp_tensor f64(std::vector<double>& data) {
    return ddp_tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
}

/// What one rank's thread saw: each call's status and message, in order.
struct Seen {
    std::vector<ddp_status> statuses;
    std::vector<std::string> messages;
    std::vector<double> seconds;  ///< how long each call took
    void record(ddp_status status, std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now()) {
        statuses.push_back(status);
        messages.emplace_back(status == DDP_OK ? "" : ddp_last_error_message());
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
};

/// Starts this process's `n` threads of the group (timeout `timeout_s`),
/// runs `body(rank, size, comm, seen)` on a thread per rank, finalizes each
/// rank on its thread.
std::vector<Seen> run_group(int n, const std::function<void(int, int, ddp_comm*, Seen&)>& body,
                            double timeout_s = 60) {
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.timeout_s = timeout_s;
    std::vector<ddp_comm*> comms(static_cast<size_t>(n), nullptr);
    const ddp_status started = ddp_init_local(n, nullptr, &opts, comms.data());
    EXPECT_EQ(started, DDP_OK) << ddp_last_error_message();
    std::vector<Seen> seen(static_cast<size_t>(n));
    if (started != DDP_OK) return seen;
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < n; ++i)
            threads.emplace_back([&, i] {
                int32_t rank = -1, size = -1;
                ddp_rank(comms[static_cast<size_t>(i)], &rank);
                ddp_size(comms[static_cast<size_t>(i)], &size);
                Seen& mine = seen[static_cast<size_t>(i)];
                body(rank, size, comms[static_cast<size_t>(i)], mine);
                mine.record(ddp_finalize(comms[static_cast<size_t>(i)]));
            });
    }
    return seen;
}

void expect_all_ok(const std::vector<Seen>& seen) {
    for (size_t i = 0; i < seen.size(); ++i)
        for (size_t k = 0; k < seen[i].statuses.size(); ++k)
            EXPECT_EQ(seen[i].statuses[k], DDP_OK) << "process " << process << " thread " << i << ", call " << k
                                                   << ": " << seen[i].messages[k];
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class MixedGroup : public ::testing::TestWithParam<int> {};

TEST_P(MixedGroup, RanksAreNumberedProcessByProcess) {
    const int n = GetParam();
    std::vector<int> ranks(static_cast<size_t>(n), -1);
    expect_all_ok(run_group(n, [&](int rank, int size, ddp_comm*, Seen&) {
        EXPECT_EQ(size, processes * n);
        ranks[static_cast<size_t>(rank % n)] = rank;
    }));
    for (int i = 0; i < n; ++i) EXPECT_EQ(ranks[static_cast<size_t>(i)], process * n + i);
}

TEST_P(MixedGroup, AllreduceOfAListGivesEveryRankTheSum) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        std::vector<std::vector<float>> floats = {std::vector<float>(1), std::vector<float>(1000),
                                                  std::vector<float>(300001)};
        std::vector<ddp_tensor> list;
        for (auto& t : floats) {
            for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 97));
            list.push_back(f32(t));
        }
        seen.record(ddp_allreduce_tensor_list(comm, list.data(), 3, DDP_OP_SUM, nullptr));
        const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
        for (const auto& t : floats)
            for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(t[i], ranks_sum * static_cast<float>(i % 97)) << i;
        std::vector<int32_t> ints(5000);
        for (size_t i = 0; i < ints.size(); ++i) ints[i] = rank * 1000 + static_cast<int32_t>(i);
        ddp_tensor one = i32(ints);
        seen.record(ddp_allreduce_tensor_list(comm, &one, 1, DDP_OP_MAX, nullptr));
        for (size_t i = 0; i < ints.size(); ++i) ASSERT_EQ(ints[i], (size - 1) * 1000 + static_cast<int32_t>(i));
        std::vector<double> doubles(3000);
        for (size_t i = 0; i < doubles.size(); ++i) doubles[i] = rank == 1 ? -1.5 : static_cast<double>(i);
        one = f64(doubles);
        seen.record(ddp_allreduce_tensor_list(comm, &one, 1, DDP_OP_AVG, nullptr));
        for (size_t i = 0; i < doubles.size(); ++i) {
            double sum = 0;
            for (int r = 0; r < size; ++r) sum += r == 1 ? -1.5 : static_cast<double>(i);
            ASSERT_DOUBLE_EQ(doubles[i], sum / size) << i;
        }
    }));
}

TEST_P(MixedGroup, BroadcastFromEveryRootReduceToEveryRootAndBarrier) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        for (int root = 0; root < size; ++root) {
            std::vector<float> params(40000, static_cast<float>(rank));
            ddp_tensor t = f32(params);
            seen.record(ddp_broadcast_tensor_list(comm, &t, 1, root, nullptr));
            for (float value : params) ASSERT_EQ(value, static_cast<float>(root)) << "root " << root;
            std::vector<int32_t> counts(3000, rank + 1);
            ddp_tensor c = i32(counts);
            seen.record(ddp_reduce_tensor_list(comm, &c, 1, DDP_OP_SUM, root, nullptr));
            for (int32_t value : counts) ASSERT_EQ(value, rank == root ? size * (size + 1) / 2 : rank + 1);
        }
        seen.record(ddp_barrier(comm, nullptr));
    }));
}

TEST_P(MixedGroup, AllgatherAndReduceScatter) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        const int64_t block = 1001;
        std::vector<float> mine(block), all(static_cast<size_t>(block * size));
        for (int64_t i = 0; i < block; ++i) mine[static_cast<size_t>(i)] = static_cast<float>(rank * 10000 + i);
        ddp_tensor in = f32(mine), out = f32(all);
        seen.record(ddp_allgather_tensor_list(comm, &in, &out, 1, nullptr));
        for (int r = 0; r < size; ++r)
            for (int64_t i = 0; i < block; ++i)
                ASSERT_EQ(all[static_cast<size_t>(r * block + i)], static_cast<float>(r * 10000 + i));
        std::vector<float> full(static_cast<size_t>(block * size)), part(static_cast<size_t>(block));
        for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i % 1000 + rank);
        const std::vector<float> kept = full;
        in = f32(full), out = f32(part);
        seen.record(ddp_reduce_scatter_tensor_list(comm, &in, &out, 1, DDP_OP_SUM, nullptr));
        for (int64_t i = 0; i < block; ++i)
            ASSERT_EQ(part[static_cast<size_t>(i)],
                      static_cast<float>(size * ((rank * block + i) % 1000) + size * (size - 1) / 2));
        EXPECT_EQ(full, kept) << "the input of reduce_scatter changed";
    }));
}

// Block j of a rank's input goes to rank j, and a rank's output holds the
// blocks addressed to it in the senders' rank order, whichever process
// and thread sent them; a list of two tensors of other block sizes and
// dtypes is exchanged in one call, twice: the second time in blocks large
// enough that the processes exchange through shared memory where it is on.
TEST_P(MixedGroup, AlltoallSendsEachBlockToItsRank) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        const int64_t ints_block = 3;
        for (int round = 0; round < 2; ++round) {
            const int64_t doubles_block = round == 0 ? 2001 : 140001;
            std::vector<int32_t> ints(static_cast<size_t>(ints_block * size)), ints_out(ints.size(), -1);
            std::vector<double> doubles(static_cast<size_t>(doubles_block * size)), doubles_out(doubles.size(), -1);
            // An element says who sent it, to whom, and where in the block.
            for (int to = 0; to < size; ++to) {
                for (int64_t i = 0; i < ints_block; ++i)
                    ints[static_cast<size_t>(to * ints_block + i)] = round * 1000000 + rank * 10000 + to * 100 + static_cast<int32_t>(i);
                for (int64_t i = 0; i < doubles_block; ++i)
                    doubles[static_cast<size_t>(to * doubles_block + i)] = rank * 1e6 + to * 1e4 + static_cast<double>(i) / 4;
            }
            ddp_tensor inputs[2] = {i32(ints), f64(doubles)}, outputs[2] = {i32(ints_out), f64(doubles_out)};
            seen.record(ddp_alltoall_tensor_list(comm, inputs, outputs, 2, nullptr));
            for (int from = 0; from < size; ++from) {
                for (int64_t i = 0; i < ints_block; ++i)
                    ASSERT_EQ(ints_out[static_cast<size_t>(from * ints_block + i)],
                              round * 1000000 + from * 10000 + rank * 100 + static_cast<int32_t>(i))
                        << "from rank " << from;
                for (int64_t i = 0; i < doubles_block; ++i)
                    ASSERT_EQ(doubles_out[static_cast<size_t>(from * doubles_block + i)],
                              from * 1e6 + rank * 1e4 + static_cast<double>(i) / 4)
                        << "from rank " << from;
            }
        }
    }));
}

/// This rank's sum of `values` over `comm`'s ranks, and its rank and size there.
struct InSub {
    int rank = -1, size = -1;
    int32_t sum = 0;
};
InSub reduce_in(ddp_comm* comm, int32_t value, Seen& seen) {
    InSub in;
    ddp_rank(comm, &in.rank);
    ddp_size(comm, &in.size);
    std::vector<int32_t> data(1000, value);
    ddp_tensor t = i32(data);
    seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
    in.sum = data[999];
    return in;
}

// Splits make groups of processes x threads again: by thread (a group per
// thread number, across the processes; again with the processes in reverse
// order by key), by process with the threads
// ranked backwards by key, a color that leaves thread 0 of every process
// out, and the node split; each reduces apart, and each rank frees its subs
// before it finalizes the parent.
TEST_P(MixedGroup, SplitsMakeGroupsOfProcessesTimesThreads) {
    const int n = GetParam();
    expect_all_ok(run_group(n, [n](int rank, int size, ddp_comm* comm, Seen& seen) {
        const int thread = rank % n, proc = rank / n;
        ddp_comm *by_thread = nullptr, *backwards = nullptr, *by_process = nullptr, *without_0 = nullptr,
                 *node = nullptr;
        seen.record(ddp_comm_split(comm, thread, rank, nullptr, &by_thread));
        seen.record(ddp_comm_split(comm, thread, -rank, nullptr, &backwards));
        seen.record(ddp_comm_split(comm, proc, -rank, nullptr, &by_process));
        seen.record(ddp_comm_split(comm, thread == 0 ? -1 : 7, rank, nullptr, &without_0));
        seen.record(ddp_comm_split_node(comm, nullptr, &node));
        ASSERT_NE(by_thread, nullptr);
        ASSERT_NE(backwards, nullptr);
        ASSERT_NE(by_process, nullptr);
        ASSERT_NE(node, nullptr);
        EXPECT_EQ(without_0 == nullptr, thread == 0);

        InSub in = reduce_in(by_thread, rank, seen);
        EXPECT_EQ(in.rank, proc);
        EXPECT_EQ(in.size, processes);
        EXPECT_EQ(in.sum, processes * (processes - 1) / 2 * n + processes * thread);

        in = reduce_in(backwards, rank + 1, seen);  // the processes in reverse order
        EXPECT_EQ(in.rank, processes - 1 - proc);
        EXPECT_EQ(in.size, processes);
        EXPECT_EQ(in.sum, processes * (processes - 1) / 2 * n + processes * (thread + 1));

        in = reduce_in(by_process, rank, seen);
        EXPECT_EQ(in.rank, n - 1 - thread);
        EXPECT_EQ(in.size, n);
        EXPECT_EQ(in.sum, proc * n * n + n * (n - 1) / 2);

        if (without_0 != nullptr) {
            in = reduce_in(without_0, 1, seen);
            EXPECT_EQ(in.rank, proc * (n - 1) + thread - 1);
            EXPECT_EQ(in.size, processes * (n - 1));
            EXPECT_EQ(in.sum, processes * (n - 1));
            seen.record(ddp_comm_free(without_0));
        }

        in = reduce_in(node, 1, seen);  // every process of this test runs on one node
        EXPECT_EQ(in.rank, rank);
        EXPECT_EQ(in.sum, size);
        seen.record(ddp_comm_free(node));
        seen.record(ddp_comm_free(by_process));
        seen.record(ddp_comm_free(backwards));
        seen.record(ddp_comm_free(by_thread));
    }));
}

TEST_P(MixedGroup, AsyncRequestsAndTheReducer) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        std::vector<float> grads(300000, static_cast<float>(rank));
        ddp_tensor g = f32(grads);
        ddp_request* request = nullptr;
        seen.record(ddp_allreduce_tensor_list_async(comm, &g, 1, DDP_OP_SUM, nullptr, &request));
        seen.record(ddp_request_wait(request));
        seen.record(ddp_request_free(request));
        for (float value : grads) ASSERT_EQ(value, static_cast<float>(size * (size - 1) / 2));
        std::vector<std::vector<float>> layers = {std::vector<float>(5000), std::vector<float>(400000),
                                                  std::vector<float>(7)};
        std::vector<ddp_tensor> list;
        for (auto& layer : layers) list.push_back(f32(layer));
        ddp_reducer* reducer = nullptr;
        seen.record(ddp_reducer_create(comm, list.data(), 3, DDP_OP_AVG, nullptr, &reducer));
        for (int step = 0; step < 3; ++step) {
            for (int64_t i = 2; i >= 0; --i) {
                ddp_tensor gradient{};
                seen.record(ddp_reducer_gradient(reducer, i, &gradient));
                auto* data = static_cast<float*>(gradient.data);
                for (int64_t k = 0; k < gradient.count; ++k) data[k] = static_cast<float>(rank * 2 + step);
                seen.record(ddp_reducer_mark_ready(reducer, i));
            }
            seen.record(ddp_reducer_wait(reducer));
            for (int64_t i = 0; i < 3; ++i) {
                ddp_tensor gradient{};
                seen.record(ddp_reducer_gradient(reducer, i, &gradient));
                const auto* data = static_cast<const float*>(gradient.data);
                for (int64_t k = 0; k < gradient.count; ++k)
                    ASSERT_EQ(data[k], static_cast<float>(size - 1 + step)) << "step " << step;
            }
        }
        seen.record(ddp_reducer_free(reducer));
    }));
}

TEST_P(MixedGroup, EveryDtypeSums) {
    expect_all_ok(run_group(GetParam(), [](int rank, int size, ddp_comm* comm, Seen& seen) {
        // Small values whose sums every dtype holds exactly (i8 included).
        const ddp_dtype dtypes[] = {DDP_DTYPE_I8,  DDP_DTYPE_I32, DDP_DTYPE_I64, DDP_DTYPE_U8,
                                    DDP_DTYPE_F16, DDP_DTYPE_F32, DDP_DTYPE_F64, DDP_DTYPE_BF16};
        for (ddp_dtype dtype : dtypes) {
            std::vector<double> expected_values(2000), values(2000);
            for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i + rank) % 5);
            for (size_t i = 0; i < values.size(); ++i) {
                double sum = 0;
                for (int r = 0; r < size; ++r) sum += static_cast<double>((i + r) % 5);
                expected_values[i] = sum;
            }
            // The bytes of each dtype written through ddp_cast-free helpers: f64 -> dtype.
            std::vector<std::byte> buffer(values.size() * 8);
            ddp_tensor t{buffer.data(), static_cast<int64_t>(values.size()), dtype, DDP_DEVICE_CPU, 0, 0};
            for (size_t i = 0; i < values.size(); ++i) {
                const double v = values[i];
                switch (dtype) {
                case DDP_DTYPE_I8: reinterpret_cast<int8_t*>(buffer.data())[i] = static_cast<int8_t>(v); break;
                case DDP_DTYPE_U8: reinterpret_cast<uint8_t*>(buffer.data())[i] = static_cast<uint8_t>(v); break;
                case DDP_DTYPE_I32: reinterpret_cast<int32_t*>(buffer.data())[i] = static_cast<int32_t>(v); break;
                case DDP_DTYPE_I64: reinterpret_cast<int64_t*>(buffer.data())[i] = static_cast<int64_t>(v); break;
                case DDP_DTYPE_F32: reinterpret_cast<float*>(buffer.data())[i] = static_cast<float>(v); break;
                case DDP_DTYPE_F64: reinterpret_cast<double*>(buffer.data())[i] = v; break;
                // Small integers: f16 and bf16 hold them exactly in their upper bits.
                case DDP_DTYPE_F16: {
                    const uint16_t table[] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400};
                    reinterpret_cast<uint16_t*>(buffer.data())[i] = table[static_cast<int>(v)];
                    break;
                }
                case DDP_DTYPE_BF16: {
                    const uint16_t table[] = {0x0000, 0x3F80, 0x4000, 0x4040, 0x4080};
                    reinterpret_cast<uint16_t*>(buffer.data())[i] = table[static_cast<int>(v)];
                    break;
                }
                }
            }
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
            for (size_t i = 0; i < values.size(); ++i) {
                double got = 0;
                switch (dtype) {
                case DDP_DTYPE_I8: got = reinterpret_cast<int8_t*>(buffer.data())[i]; break;
                case DDP_DTYPE_U8: got = reinterpret_cast<uint8_t*>(buffer.data())[i]; break;
                case DDP_DTYPE_I32: got = reinterpret_cast<int32_t*>(buffer.data())[i]; break;
                case DDP_DTYPE_I64: got = static_cast<double>(reinterpret_cast<int64_t*>(buffer.data())[i]); break;
                case DDP_DTYPE_F32: got = reinterpret_cast<float*>(buffer.data())[i]; break;
                case DDP_DTYPE_F64: got = reinterpret_cast<double*>(buffer.data())[i]; break;
                case DDP_DTYPE_F16:
                case DDP_DTYPE_BF16: {
                    // Read back through f32: bf16 is f32's upper half; f16 exact for these integers.
                    const uint16_t bits = reinterpret_cast<uint16_t*>(buffer.data())[i];
                    if (dtype == DDP_DTYPE_BF16) {
                        const uint32_t wide = static_cast<uint32_t>(bits) << 16;
                        float f;
                        std::memcpy(&f, &wide, 4);
                        got = f;
                    } else {
                        const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
                        got = bits == 0 ? 0.0 : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
                    }
                    break;
                }
                }
                ASSERT_EQ(got, expected_values[i]) << "dtype " << dtype << ", element " << i;
            }
        }
    }));
}

INSTANTIATE_TEST_SUITE_P(Threads, MixedGroup, ::testing::Values(1, 2, 3));

// Every rank of every process fails with the same status; returns the messages.
std::vector<std::string> expect_every_rank(const std::vector<Seen>& seen, size_t call, ddp_status status) {
    std::vector<std::string> messages;
    for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].statuses.at(call), status) << "thread " << i << ": " << seen[i].messages.at(call);
        messages.push_back(seen[i].messages.at(call));
    }
    return messages;
}

TEST(MixedGroupFaults, AThreadPassingAnotherListFailsEveryRankNamingIt) {
    // The last process's thread 1, then its thread 0 (which carries the
    // process's part to the others); small lists ride in agreement's messages.
    for (const int odd_one : {2 * processes - 1, 2 * processes - 2}) {
        auto seen = run_group(2, [odd_one](int rank, int, ddp_comm* comm, Seen& seen) {
            std::vector<float> data(rank == odd_one ? 11 : 10, 1.0f);
            ddp_tensor t = f32(data);
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
        });
        for (const std::string& message : expect_every_rank(seen, 0, DDP_ERR_MISMATCH))
            EXPECT_TRUE(mentions(message, "rank " + std::to_string(odd_one))) << message;
    }
}

TEST(MixedGroupFaults, AThreadsInvalidArgumentFailsItsPeersAtOnce) {
    auto seen = run_group(2, [](int rank, int, ddp_comm* comm, Seen& seen) {
        std::vector<float> data(10, 1.0f);
        ddp_tensor t = f32(data);
        if (rank == 1) t.data = nullptr;
        const auto started = std::chrono::steady_clock::now();
        seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr), started);
    });
    for (size_t i = 0; i < seen.size(); ++i) {
        const bool bad = process == 0 && i == 1;
        EXPECT_EQ(seen[i].statuses[0], bad ? DDP_ERR_INVALID_ARGUMENT : DDP_ERR_MISMATCH) << seen[i].messages[0];
        if (!bad) {
            EXPECT_TRUE(mentions(seen[i].messages[0], "rank 1")) << seen[i].messages[0];
        }
        EXPECT_LT(seen[i].seconds[0], 10) << "the peers must not wait for the 60 s timeout";
    }
}

// Rank 0 times out first (its call's timeout is the shortest) and names
// the late rank; every other rank fails at once on its notice.
TEST(MixedGroupFaults, AThreadThatNeverCallsIsNamedInItsPeersTimeout) {
    const int late = 2 * processes - 1;
    auto seen = run_group(2, [late](int rank, int, ddp_comm* comm, Seen& seen) {
        if (rank == late) {  // busy elsewhere past its peers' timeout
            std::this_thread::sleep_for(std::chrono::seconds(3));
            return;
        }
        ddp_collective_options opts;
        ddp_collective_options_init(&opts, sizeof opts);
        opts.timeout_s = rank == 0 ? 1 : 20;
        const auto started = std::chrono::steady_clock::now();
        seen.record(ddp_barrier(comm, &opts), started);
    });
    for (size_t i = 0; i < seen.size(); ++i) {
        const int rank = process * 2 + static_cast<int>(i);
        if (rank == late) continue;
        EXPECT_EQ(seen[i].statuses.at(0), DDP_ERR_TIMEOUT) << seen[i].messages.at(0);
        EXPECT_LT(seen[i].seconds.at(0), 10) << seen[i].messages.at(0);
        if (rank == 0) {
            EXPECT_TRUE(mentions(seen[i].messages.at(0), "rank " + std::to_string(late) + " has not joined"))
                << seen[i].messages.at(0);
            // Its process answers for each thread: the one beside it joined.
            EXPECT_FALSE(mentions(seen[i].messages.at(0), "rank " + std::to_string(late - 1) + " has not joined"))
                << seen[i].messages.at(0);
            std::printf("rank 0's timeout: %s\n", seen[i].messages.at(0).c_str());
        }
    }
}

// A split whose colors' ranks, ordered by key, interleave the processes
// cannot be a group of processes x threads: refused on every rank, naming
// the color, and the parent stays usable.
TEST(MixedGroupFaults, ASplitInterleavingProcessesIsRefusedOnEveryRankSayingSo) {
    auto seen = run_group(2, [](int rank, int size, ddp_comm* comm, Seen& seen) {
        ddp_comm* sub = nullptr;
        // Key: thread first, then process: p0t0, p1t0, ..., p0t1, p1t1, ...
        seen.record(ddp_comm_split(comm, 0, (rank % 2) * 100 + rank / 2, nullptr, &sub));
        EXPECT_EQ(sub, nullptr);
        std::vector<int32_t> one(10, 1);
        ddp_tensor t = i32(one);
        seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
        EXPECT_EQ(one[0], size);
    });
    if (processes == 1) return expect_all_ok(seen);  // one process: no interleaving
    for (const std::string& message : expect_every_rank(seen, 0, DDP_ERR_UNSUPPORTED))
        EXPECT_TRUE(mentions(message, "color 0")) << message;
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].statuses.at(1), DDP_OK) << seen[i].messages.at(1);
}

// Color 1 holds one thread of process 0 and both of every other process:
// unequal counts, refused on every rank naming it.
TEST(MixedGroupFaults, ASplitWithUnequalThreadsPerProcessIsRefusedOnEveryRank) {
    auto seen = run_group(2, [](int rank, int, ddp_comm* comm, Seen& seen) {
        ddp_comm* sub = nullptr;
        seen.record(ddp_comm_split(comm, rank == 0 ? 0 : 1, rank, nullptr, &sub));
        if (sub != nullptr) ddp_comm_free(sub);
    });
    if (processes == 1) return expect_all_ok(seen);  // one process: one run of threads per color
    for (const std::string& message : expect_every_rank(seen, 0, DDP_ERR_UNSUPPORTED))
        EXPECT_TRUE(mentions(message, "color 1")) << message;
}

// With devices each rank sets up NCCL on its process's GPU; where it
// cannot (no GPU, no NCCL, no CUDA: the machines CI runs on), every rank of
// every process fails together saying why (tests/gpu's nccl_mixed_np2 shows
// the set-up itself against the NCCL stand-in).
TEST(MixedGroupStart, DevicesWithoutAGpuOrNcclFailEveryProcessSayingWhy) {
    std::vector<ddp_comm*> comms(2, nullptr);
    const int32_t devices[2] = {0, 0};
    const auto started = std::chrono::steady_clock::now();
    const ddp_status status = ddp_init_local(2, devices, nullptr, comms.data());
    if (status == DDP_OK) {  // a GPU machine: nothing to show here
        for (ddp_comm* comm : comms) ddp_finalize(comm);
        GTEST_SKIP() << "this machine has a GPU and NCCL";
    }
    const std::string message = ddp_last_error_message();
    EXPECT_EQ(status, DDP_ERR_UNSUPPORTED) << message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    EXPECT_TRUE(mentions(message, "needs a GPU on every rank") || mentions(message, "libnccl") ||
                mentions(message, "built without CUDA"))
        << message;
    EXPECT_EQ(comms[0], nullptr);
    EXPECT_EQ(comms[1], nullptr);
}

TEST(MixedGroupStart, ProcessesStartingDifferentCountsAllFailSayingSo) {
    const int n = process == 0 ? 2 : 3;
    std::vector<ddp_comm*> comms(3, nullptr);
    EXPECT_EQ(ddp_init_local(n, nullptr, nullptr, comms.data()), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions(ddp_last_error_message(), "every process must start as many ranks"))
        << ddp_last_error_message();
    if (process == 0) std::printf("%s\n", ddp_last_error_message());
}

TEST(MixedGroupStart, OneProcessRefusingItsArgumentsFailsEveryProcessAtOnce) {
    std::vector<ddp_comm*> comms(2, nullptr);
    const auto started = std::chrono::steady_clock::now();
    const ddp_status status = ddp_init_local(process == 0 ? 0 : 2, nullptr, nullptr, comms.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string message = ddp_last_error_message();
    if (process == 0) {
        EXPECT_EQ(status, DDP_ERR_INVALID_ARGUMENT) << message;
        EXPECT_TRUE(mentions(message, "n is 0")) << message;
    } else {
        EXPECT_EQ(status, DDP_ERR_MISMATCH) << message;
        EXPECT_TRUE(mentions(message, "rank(s) 0 ")) << message;
    }
    EXPECT_LT(seconds, 10);
}

}  // namespace

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    MPI_Comm_size(MPI_COMM_WORLD, &processes);
    if (process != 0) {
        auto& listeners = testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    const int failed = RUN_ALL_TESTS();
    MPI_Finalize();
    return failed;
}
