// Several ranks in one process (ddp_init_local), each driven by a thread of
// its own: every collective's results on 1-8 ranks, and the faults that
// hold across processes (a thread passing another list, a thread's invalid
// argument, a thread that never calls) ending every rank in bounded time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "ddp/ddp.h"

namespace {

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
    void record(ddp_status status) {
        statuses.push_back(status);
        messages.emplace_back(status == DDP_OK ? "" : ddp_last_error_message());
    }
};

/// Starts a group of `n` with `opts` (nullptr: defaults), runs `body(rank,
/// comm, seen)` on a thread per rank, finalizes each rank on its thread.
std::vector<Seen> run_group(int n, const std::function<void(int, ddp_comm*, Seen&)>& body,
                            const ddp_init_options* opts = nullptr) {
    std::vector<ddp_comm*> comms(static_cast<size_t>(n), nullptr);
    EXPECT_EQ(ddp_init_local(n, nullptr, opts, comms.data()), DDP_OK) << ddp_last_error_message();
    std::vector<Seen> seen(static_cast<size_t>(n));
    {
        std::vector<std::jthread> threads;
        for (int rank = 0; rank < n; ++rank)
            threads.emplace_back([&, rank] {
                Seen& mine = seen[static_cast<size_t>(rank)];
                body(rank, comms[static_cast<size_t>(rank)], mine);
                mine.record(ddp_finalize(comms[static_cast<size_t>(rank)]));
            });
    }
    return seen;
}

// Every call of every rank returned DDP_OK.
void expect_all_ok(const std::vector<Seen>& seen) {
    for (size_t rank = 0; rank < seen.size(); ++rank)
        for (size_t k = 0; k < seen[rank].statuses.size(); ++k)
            EXPECT_EQ(seen[rank].statuses[k], DDP_OK) << "rank " << rank << ", call " << k << ": "
                                                      << seen[rank].messages[k];
}

class LocalGroup : public ::testing::TestWithParam<int> {};

TEST_P(LocalGroup, RanksAndSizeAreTheThreads) {
    const int n = GetParam();
    run_group(n, [n](int rank, ddp_comm* comm, Seen&) {
        int32_t got_rank = -1, got_size = -1;
        EXPECT_EQ(ddp_rank(comm, &got_rank), DDP_OK);
        EXPECT_EQ(ddp_size(comm, &got_size), DDP_OK);
        EXPECT_EQ(got_rank, rank);
        EXPECT_EQ(got_size, n);
    });
}

TEST_P(LocalGroup, AllreduceOfAListGivesEveryRankTheSum) {
    const int n = GetParam();
    run_group(n, [n](int rank, ddp_comm* comm, Seen& seen) {
        // Sizes around the plane's tiles and the ranks' parts; values exact in f32.
        std::vector<std::vector<float>> floats = {std::vector<float>(1, 0), std::vector<float>(1000, 0),
                                                  std::vector<float>(70001, 0)};
        std::vector<ddp_tensor> list;
        for (auto& t : floats) {
            for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 97));
            list.push_back(f32(t));
        }
        seen.record(ddp_allreduce_tensor_list(comm, list.data(), static_cast<int64_t>(list.size()), DDP_OP_SUM,
                                              nullptr));
        const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
        for (const auto& t : floats)
            for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(t[i], ranks_sum * static_cast<float>(i % 97)) << i;
        std::vector<int32_t> ints(5000);
        std::vector<double> doubles(3000);
        for (size_t i = 0; i < ints.size(); ++i) ints[i] = rank * 1000 + static_cast<int32_t>(i);
        for (size_t i = 0; i < doubles.size(); ++i) doubles[i] = rank == 1 ? -1.5 : static_cast<double>(i);
        ddp_tensor one = i32(ints);
        seen.record(ddp_allreduce_tensor_list(comm, &one, 1, DDP_OP_MAX, nullptr));
        for (size_t i = 0; i < ints.size(); ++i) ASSERT_EQ(ints[i], (n - 1) * 1000 + static_cast<int32_t>(i));
        one = f64(doubles);
        seen.record(ddp_allreduce_tensor_list(comm, &one, 1, DDP_OP_AVG, nullptr));
        for (size_t i = 0; i < doubles.size(); ++i) {
            double sum = 0;
            for (int r = 0; r < n; ++r) sum += r == 1 ? -1.5 : static_cast<double>(i);
            ASSERT_DOUBLE_EQ(doubles[i], sum / n) << i;
        }
    });
}

TEST_P(LocalGroup, BroadcastReduceAndBarrier) {
    const int n = GetParam();
    const int root = n - 1;
    run_group(n, [n, root](int rank, ddp_comm* comm, Seen& seen) {
        std::vector<float> params(40000, static_cast<float>(rank));
        ddp_tensor t = f32(params);
        seen.record(ddp_broadcast_tensor_list(comm, &t, 1, root, nullptr));
        for (float value : params) ASSERT_EQ(value, static_cast<float>(root));
        std::vector<int32_t> counts(3000, rank + 1);
        ddp_tensor c = i32(counts);
        seen.record(ddp_reduce_tensor_list(comm, &c, 1, DDP_OP_SUM, 0, nullptr));
        for (int32_t value : counts) ASSERT_EQ(value, rank == 0 ? n * (n + 1) / 2 : rank + 1);
        seen.record(ddp_barrier(comm, nullptr));
    });
}

TEST_P(LocalGroup, AllgatherReduceScatterAndAlltoall) {
    const int n = GetParam();
    run_group(n, [n](int rank, ddp_comm* comm, Seen& seen) {
        const int64_t block = 1001;
        std::vector<float> mine(block), all(static_cast<size_t>(block * n));
        for (int64_t i = 0; i < block; ++i) mine[static_cast<size_t>(i)] = static_cast<float>(rank * 10000 + i);
        ddp_tensor in = f32(mine), out = f32(all);
        seen.record(ddp_allgather_tensor_list(comm, &in, &out, 1, nullptr));
        for (int r = 0; r < n; ++r)
            for (int64_t i = 0; i < block; ++i)
                ASSERT_EQ(all[static_cast<size_t>(r * block + i)], static_cast<float>(r * 10000 + i));
        // reduce_scatter: every rank's full buffer summed, block `rank` kept.
        std::vector<float> full(static_cast<size_t>(block * n)), part(static_cast<size_t>(block));
        for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i % 1000 + rank);
        in = f32(full), out = f32(part);
        seen.record(ddp_reduce_scatter_tensor_list(comm, &in, &out, 1, DDP_OP_SUM, nullptr));
        for (int64_t i = 0; i < block; ++i)
            ASSERT_EQ(part[static_cast<size_t>(i)],
                      static_cast<float>(n * ((rank * block + i) % 1000) + n * (n - 1) / 2));
        // alltoall: block j of rank r's input goes to rank j's block r.
        std::vector<int32_t> send(static_cast<size_t>(block * n)), recv(static_cast<size_t>(block * n));
        for (int j = 0; j < n; ++j)
            for (int64_t i = 0; i < block; ++i) send[static_cast<size_t>(j * block + i)] = rank * 1000000 + j * 10000 + static_cast<int32_t>(i);
        ddp_tensor s = i32(send), r = i32(recv);
        seen.record(ddp_alltoall_tensor_list(comm, &s, &r, 1, nullptr));
        for (int from = 0; from < n; ++from)
            for (int64_t i = 0; i < block; ++i)
                ASSERT_EQ(recv[static_cast<size_t>(from * block + i)],
                          from * 1000000 + rank * 10000 + static_cast<int32_t>(i));
    });
}

TEST_P(LocalGroup, AsyncRequestsAndTheReducer) {
    const int n = GetParam();
    run_group(n, [n](int rank, ddp_comm* comm, Seen& seen) {
        std::vector<float> grads(300000, static_cast<float>(rank));
        ddp_tensor g = f32(grads);
        ddp_request* request = nullptr;
        seen.record(ddp_allreduce_tensor_list_async(comm, &g, 1, DDP_OP_SUM, nullptr, &request));
        seen.record(ddp_request_wait(request));
        seen.record(ddp_request_free(request));
        for (float value : grads) ASSERT_EQ(value, static_cast<float>(n * (n - 1) / 2));
        std::vector<std::vector<float>> layers = {std::vector<float>(5000), std::vector<float>(200000),
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
                    ASSERT_EQ(data[k], static_cast<float>(n - 1 + step)) << "step " << step;
            }
        }
        seen.record(ddp_reducer_free(reducer));
    });
}

TEST_P(LocalGroup, SplitsMakeSubGroupsOfThreadsThatReduceApart) {
    const int n = GetParam();
    expect_all_ok(run_group(n, [n](int rank, ddp_comm* comm, Seen& seen) {
        // Even and odd ranks apart, ranked backwards by key; rank 2 joins none.
        const bool joins = rank != 2;
        ddp_comm* sub = nullptr;
        seen.record(ddp_comm_split(comm, joins ? rank % 2 : DDP_COLOR_UNDEFINED, -rank, nullptr, &sub));
        if (!joins) {
            EXPECT_EQ(sub, nullptr);
        } else {
            ASSERT_NE(sub, nullptr);
            std::vector<int> members;
            for (int r = n - 1; r >= 0; --r)
                if (r != 2 && r % 2 == rank % 2) members.push_back(r);
            int32_t sub_rank = -1, sub_size = -1;
            EXPECT_EQ(ddp_rank(sub, &sub_rank), DDP_OK);
            EXPECT_EQ(ddp_size(sub, &sub_size), DDP_OK);
            EXPECT_EQ(sub_size, static_cast<int32_t>(members.size()));
            EXPECT_EQ(members[static_cast<size_t>(sub_rank)], rank);
            std::vector<int32_t> value(20000, rank);
            ddp_tensor t = i32(value);
            seen.record(ddp_allreduce_tensor_list(sub, &t, 1, DDP_OP_SUM, nullptr));
            int32_t sum = 0;
            for (int member : members) sum += member;
            for (int32_t v : value) ASSERT_EQ(v, sum);
        }
        // The world still works beside its sub-groups, and the node is every thread.
        seen.record(ddp_barrier(comm, nullptr));
        ddp_comm* node = nullptr;
        seen.record(ddp_comm_split_node(comm, nullptr, &node));
        ASSERT_NE(node, nullptr);
        int32_t node_size = -1;
        EXPECT_EQ(ddp_size(node, &node_size), DDP_OK);
        EXPECT_EQ(node_size, n);
        seen.record(ddp_barrier(node, nullptr));
        seen.record(ddp_comm_free(node));
        // Rank 0 leaves its sub-group to ddp_finalize, which frees it with the rank.
        if (sub != nullptr && rank != 0) seen.record(ddp_comm_free(sub));
    }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalGroup, ::testing::Values(1, 2, 3, 4, 8));

TEST(LocalGroupFaults, AThreadPassingAnotherListFailsEveryRankNamingIt) {
    const auto seen = run_group(3, [](int rank, ddp_comm* comm, Seen& seen) {
        std::vector<float> a(100, 1), b(200, 1);
        std::vector<ddp_tensor> list = {f32(a), f32(b)};
        seen.record(ddp_allreduce_tensor_list(comm, list.data(), rank == 1 ? 1 : 2, DDP_OP_SUM, nullptr));
    });
    for (int rank = 0; rank < 3; ++rank) {
        EXPECT_EQ(seen[rank].statuses[0], DDP_ERR_MISMATCH) << seen[rank].messages[0];
        EXPECT_NE(seen[rank].messages[0].find("rank 1"), std::string::npos) << seen[rank].messages[0];
        EXPECT_EQ(seen[rank].statuses[1], DDP_OK) << seen[rank].messages[1];  // finalize
    }
}

TEST(LocalGroupFaults, AThreadsInvalidArgumentFailsItsPeersAtOnce) {
    const auto started = std::chrono::steady_clock::now();
    const auto seen = run_group(4, [](int rank, ddp_comm* comm, Seen& seen) {
        std::vector<float> data(1000, 1);
        ddp_tensor t = f32(data);
        if (rank == 2) t.data = nullptr;
        seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
    });
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    EXPECT_EQ(seen[2].statuses[0], DDP_ERR_INVALID_ARGUMENT) << seen[2].messages[0];
    for (int rank : {0, 1, 3}) {
        EXPECT_EQ(seen[rank].statuses[0], DDP_ERR_MISMATCH) << seen[rank].messages[0];
        EXPECT_NE(seen[rank].messages[0].find("rank 2"), std::string::npos) << seen[rank].messages[0];
    }
}

TEST(LocalGroupFaults, AThreadThatNeverCallsIsNamedInItsPeersTimeout) {
    ddp_init_options opts;
    ASSERT_EQ(ddp_init_options_init(&opts, sizeof opts), DDP_OK);
    opts.timeout_s = 1;
    const auto started = std::chrono::steady_clock::now();
    const auto seen = run_group(
        3,
        [](int rank, ddp_comm* comm, Seen& seen) {
            if (rank == 2) {  // computes past its peers' timeout
                std::this_thread::sleep_for(std::chrono::seconds(3));
                return;
            }
            std::vector<float> data(1000, 1);
            ddp_tensor t = f32(data);
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
        },
        &opts);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    // The first to give up names rank 2 and tells the other, which names it.
    int naming = 0;
    for (int rank : {0, 1}) {
        const std::string& message = seen[rank].messages[0];
        EXPECT_EQ(seen[rank].statuses[0], DDP_ERR_TIMEOUT) << message;
        if (message.find("rank 2 has not joined") != std::string::npos) ++naming;
        else EXPECT_NE(message.find("gave up on allreduce #1"), std::string::npos) << message;
    }
    EXPECT_GE(naming, 1);
}

TEST(LocalGroupFaults, AThreadThatEndsEarlyFailsItsPeersCallAtOnce) {
    const auto started = std::chrono::steady_clock::now();
    const auto seen = run_group(3, [](int rank, ddp_comm* comm, Seen& seen) {
        if (rank == 0) return;  // finalizes at once
        std::vector<float> data(1000, 1);
        ddp_tensor t = f32(data);
        seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
    });
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    EXPECT_EQ(seen[0].statuses[0], DDP_OK) << seen[0].messages[0];  // its finalize
    for (int rank : {1, 2}) {
        EXPECT_NE(seen[rank].statuses[0], DDP_OK);
        EXPECT_NE(seen[rank].messages[0].find("rank 0"), std::string::npos) << seen[rank].messages[0];
    }
}

// A rank's finalize frees its sub-groups too: a peer waiting in one learns it at once.
TEST(LocalGroupFaults, AThreadThatEndsItsRankEndsItsSubGroupsPeersCallAtOnce) {
    const auto started = std::chrono::steady_clock::now();
    const auto seen = run_group(3, [](int rank, ddp_comm* comm, Seen& seen) {
        ddp_comm* sub = nullptr;
        seen.record(ddp_comm_split(comm, rank == 2 ? DDP_COLOR_UNDEFINED : 0, 0, nullptr, &sub));
        if (rank != 1) return;  // rank 0 finalizes at once, with its sub-group; rank 2 joined none
        std::vector<float> data(1000, 1);
        ddp_tensor t = f32(data);
        seen.record(ddp_allreduce_tensor_list(sub, &t, 1, DDP_OP_SUM, nullptr));
        seen.record(ddp_comm_free(sub));
    });
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    for (int rank : {0, 2}) EXPECT_EQ(seen[rank].statuses, (std::vector<ddp_status>{DDP_OK, DDP_OK}));
    ASSERT_EQ(seen[1].statuses.size(), 4u);
    EXPECT_NE(seen[1].statuses[1], DDP_OK);
    EXPECT_NE(seen[1].messages[1].find("rank 0"), std::string::npos) << seen[1].messages[1];
    EXPECT_EQ(seen[1].statuses[2], DDP_OK) << seen[1].messages[2];  // its sub is still freed
}

// A thread that never splits is named in its peers' timeout.
TEST(LocalGroupFaults, AThreadThatNeverSplitsIsNamedInItsPeersTimeout) {
    ddp_init_options opts{};
    ddp_init_options_init(&opts, sizeof opts);
    opts.timeout_s = 1.5;
    const auto seen = run_group(2, [](int rank, ddp_comm* comm, Seen& seen) {
        if (rank == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2500));
            return;
        }
        ddp_comm* sub = nullptr;
        seen.record(ddp_comm_split(comm, 0, 0, nullptr, &sub));
        EXPECT_EQ(sub, nullptr);
    }, &opts);
    EXPECT_EQ(seen[0].statuses[0], DDP_ERR_TIMEOUT);
    EXPECT_NE(seen[0].messages[0].find("rank 1"), std::string::npos) << seen[0].messages[0];
}

TEST(LocalGroupFaults, RanksSharingABufferAreRefusedOnEveryRank) {
    std::vector<float> shared(5000, 1);
    const auto seen = run_group(3, [&](int rank, ddp_comm* comm, Seen& seen) {
        std::vector<float> own(5000, 1);
        ddp_tensor t = rank == 2 ? f32(own) : f32(shared);  // ranks 0 and 1 pass one array
        seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
    });
    // Found in the data phase, where the pointers meet: the first rank to
    // find it breaks the communicator, and a peer may hear only that it did.
    int naming = 0;
    for (int rank = 0; rank < 3; ++rank) {
        const ddp_status status = seen[rank].statuses[0];
        const std::string& message = seen[rank].messages[0];
        EXPECT_TRUE(status == DDP_ERR_INVALID_ARGUMENT || status == DDP_ERR_TIMEOUT) << message;
        if (message.find("ranks 0 and 1 passed overlapping buffers") != std::string::npos) ++naming;
        else EXPECT_NE(message.find("aborted the communicator"), std::string::npos) << message;
    }
    EXPECT_GE(naming, 1);
    for (float value : shared) ASSERT_EQ(value, 1.0f);  // refused before any write
}

// A rank that gave up has returned: a peer arriving later must not write
// into its buffers (withdrawn rounds).
TEST(LocalGroupFaults, APeerArrivingAfterATimeoutLeavesTheBuffersAlone) {
    ddp_init_options opts;
    ASSERT_EQ(ddp_init_options_init(&opts, sizeof opts), DDP_OK);
    opts.timeout_s = 1;
    std::vector<float> rank0(300000, 1);  // several steps: a peer may be inside any of them
    std::atomic<bool> rank0_returned{false};
    const auto seen = run_group(
        2,
        [&](int rank, ddp_comm* comm, Seen& seen) {
            if (rank == 0) {
                ddp_tensor t = f32(rank0);
                seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
                rank0_returned = true;
                return;
            }
            while (!rank0_returned) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            std::vector<float> mine(300000, 5);
            ddp_tensor t = f32(mine);
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
        },
        &opts);
    EXPECT_EQ(seen[0].statuses[0], DDP_ERR_TIMEOUT) << seen[0].messages[0];
    EXPECT_NE(seen[1].statuses[0], DDP_OK);
    for (float value : rank0) ASSERT_EQ(value, 1.0f);
}

// Every dtype, summed, where every sum is exact in the dtype.
TEST(LocalGroupDtypes, EveryDtypeSums) {
    const int n = 3;
    const std::vector<std::pair<ddp_dtype, size_t>> dtypes = {
        {DDP_DTYPE_I8, 1}, {DDP_DTYPE_U8, 1}, {DDP_DTYPE_I32, 4}, {DDP_DTYPE_I64, 8},
        {DDP_DTYPE_F16, 2}, {DDP_DTYPE_BF16, 2}, {DDP_DTYPE_F32, 4}, {DDP_DTYPE_F64, 8}};
    const auto seen = run_group(n, [&](int, ddp_comm* comm, Seen& seen) {
        for (const auto& [dtype, element] : dtypes) {
            // Ones in every dtype: 0x3c00 (f16), 0x3f80 (bf16), 1.0f, 1.0, 1 (integers).
            const int64_t count = 20000;
            std::vector<unsigned char> bytes(static_cast<size_t>(count) * element);
            for (int64_t i = 0; i < count; ++i) {
                unsigned char* at = bytes.data() + i * static_cast<int64_t>(element);
                switch (dtype) {
                case DDP_DTYPE_F16: { const uint16_t one = 0x3c00; std::memcpy(at, &one, 2); break; }
                case DDP_DTYPE_BF16: { const uint16_t one = 0x3f80; std::memcpy(at, &one, 2); break; }
                case DDP_DTYPE_F32: { const float one = 1; std::memcpy(at, &one, 4); break; }
                case DDP_DTYPE_F64: { const double one = 1; std::memcpy(at, &one, 8); break; }
                default: at[0] = 1; break;  // little-endian integers
                }
            }
            ddp_tensor t{bytes.data(), count, dtype, DDP_DEVICE_CPU, 0, 0};
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
            for (int64_t i = 0; i < count; ++i) {
                const unsigned char* at = bytes.data() + i * static_cast<int64_t>(element);
                double got = 0;
                switch (dtype) {
                case DDP_DTYPE_F16: { uint16_t v; std::memcpy(&v, at, 2); got = v == 0x4200 ? 3 : -1; break; }
                case DDP_DTYPE_BF16: { uint16_t v; std::memcpy(&v, at, 2); got = v == 0x4040 ? 3 : -1; break; }
                case DDP_DTYPE_F32: { float v; std::memcpy(&v, at, 4); got = v; break; }
                case DDP_DTYPE_F64: { double v; std::memcpy(&v, at, 8); got = v; break; }
                default: got = at[0]; break;
                }
                ASSERT_EQ(got, 3.0) << "dtype " << dtype << ", element " << i;
            }
        }
    });
    expect_all_ok(seen);
}

// One thread drives every rank (NCCL's group calls): inside ddp_group_start
// and ddp_group_end each call returns at once and they run together.
TEST(LocalGroupCalls, OneThreadDrivesEveryRank) {
    for (int n : {1, 2, 4, 8}) {
        std::vector<ddp_comm*> comms(static_cast<size_t>(n));
        ASSERT_EQ(ddp_init_local(n, nullptr, nullptr, comms.data()), DDP_OK) << ddp_last_error_message();
        std::vector<std::vector<float>> replicas;
        for (int rank = 0; rank < n; ++rank) replicas.emplace_back(100000, static_cast<float>(rank + 1));
        for (int step = 0; step < 3; ++step) {
            ASSERT_EQ(ddp_group_start(), DDP_OK);
            for (int rank = 0; rank < n; ++rank) {
                ddp_tensor t = f32(replicas[static_cast<size_t>(rank)]);
                ASSERT_EQ(ddp_allreduce_tensor_list(comms[static_cast<size_t>(rank)], &t, 1, DDP_OP_AVG, nullptr),
                          DDP_OK)
                    << ddp_last_error_message();
            }
            ASSERT_EQ(ddp_group_end(), DDP_OK) << ddp_last_error_message();
        }
        for (const auto& replica : replicas)
            for (float value : replica) ASSERT_EQ(value, static_cast<float>(n + 1) / 2) << n;
        // Groups nest; a broadcast and a barrier in one.
        ASSERT_EQ(ddp_group_start(), DDP_OK);
        ASSERT_EQ(ddp_group_start(), DDP_OK);
        for (int rank = 0; rank < n; ++rank) {
            replicas[static_cast<size_t>(rank)].assign(1000, static_cast<float>(rank));
            ddp_tensor t = f32(replicas[static_cast<size_t>(rank)]);
            ASSERT_EQ(ddp_broadcast_tensor_list(comms[static_cast<size_t>(rank)], &t, 1, 0, nullptr), DDP_OK);
            ASSERT_EQ(ddp_barrier(comms[static_cast<size_t>(rank)], nullptr), DDP_OK);
        }
        ASSERT_EQ(ddp_group_end(), DDP_OK);  // the inner end: nothing waited for yet
        ASSERT_EQ(ddp_group_end(), DDP_OK);
        for (const auto& replica : replicas)
            for (float value : replica) ASSERT_EQ(value, 0.0f);
        for (ddp_comm* comm : comms) ASSERT_EQ(ddp_finalize(comm), DDP_OK);  // in turn: none waits for peers
    }
}

TEST(LocalGroupCalls, ABadCallInsideAGroupFailsItAtOnceAndItsPeersAtTheEnd) {
    std::vector<ddp_comm*> comms(3);
    ASSERT_EQ(ddp_init_local(3, nullptr, nullptr, comms.data()), DDP_OK);
    std::vector<std::vector<float>> replicas(3, std::vector<float>(1000, 1));
    const auto started = std::chrono::steady_clock::now();
    ASSERT_EQ(ddp_group_start(), DDP_OK);
    for (int rank = 0; rank < 3; ++rank) {
        ddp_tensor t = f32(replicas[static_cast<size_t>(rank)]);
        if (rank == 0) t.data = nullptr;  // the first one issued: its peers are not started yet
        const ddp_status status = ddp_allreduce_tensor_list(comms[static_cast<size_t>(rank)], &t, 1, DDP_OP_SUM, nullptr);
        EXPECT_EQ(status, rank == 0 ? DDP_ERR_INVALID_ARGUMENT : DDP_OK) << ddp_last_error_message();
    }
    EXPECT_EQ(ddp_group_end(), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("of the group"), std::string::npos) << ddp_last_error_message();
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    // A reducer call, ddp_check_replicas and the splits are refused inside a group; an end without a start too.
    ASSERT_EQ(ddp_group_start(), DDP_OK);
    int32_t identical = 0;
    ddp_tensor t = f32(replicas[0]);
    EXPECT_EQ(ddp_check_replicas(comms[0], &t, 1, nullptr, &identical), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("inside a group"), std::string::npos);
    ddp_reducer* reducer = nullptr;
    EXPECT_EQ(ddp_reducer_create(comms[0], &t, 1, DDP_OP_SUM, nullptr, &reducer), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("inside a group"), std::string::npos);
    ddp_comm* sub = nullptr;
    EXPECT_EQ(ddp_comm_split(comms[0], 0, 0, nullptr, &sub), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("ddp_comm_split returns the new communicator at once"),
              std::string::npos) << ddp_last_error_message();
    EXPECT_EQ(ddp_comm_split_node(comms[0], nullptr, &sub), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(sub, nullptr);
    EXPECT_EQ(ddp_group_end(), DDP_OK);  // nothing was started
    EXPECT_EQ(ddp_group_end(), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("without an open group"), std::string::npos);
    for (ddp_comm* comm : comms) EXPECT_EQ(ddp_finalize(comm), DDP_OK) << ddp_last_error_message();
}

TEST(LocalGroupCalls, ABindingsReportInsideAGroupTakesPartAsTheGroupRuns) {
    // A binding refusing one rank's arguments (ddp_report_invalid_call) while
    // one thread drives every rank: it must not wait for peers not started yet.
    std::vector<ddp_comm*> comms(3);
    ASSERT_EQ(ddp_init_local(3, nullptr, nullptr, comms.data()), DDP_OK);
    std::vector<std::vector<float>> replicas(3, std::vector<float>(100, 1));
    const auto started = std::chrono::steady_clock::now();
    ASSERT_EQ(ddp_group_start(), DDP_OK);
    EXPECT_EQ(ddp_report_invalid_call(comms[0], "allreduce", "op :median is not an op", nullptr), DDP_OK);
    for (int rank = 1; rank < 3; ++rank) {
        ddp_tensor t = f32(replicas[static_cast<size_t>(rank)]);
        EXPECT_EQ(ddp_allreduce_tensor_list(comms[static_cast<size_t>(rank)], &t, 1, DDP_OP_SUM, nullptr), DDP_OK);
    }
    EXPECT_EQ(ddp_group_end(), DDP_ERR_MISMATCH);
    const std::string message = ddp_last_error_message();
    EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find("op :median is not an op"), std::string::npos) << message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    for (int rank = 1; rank < 3; ++rank) EXPECT_EQ(replicas[static_cast<size_t>(rank)][0], 1.0f) << "untouched";
    for (ddp_comm* comm : comms) EXPECT_EQ(ddp_finalize(comm), DDP_OK) << ddp_last_error_message();
}

TEST(LocalGroupStart, BadArgumentsAreRefusedNamingThem) {
    ddp_comm* comms[2] = {nullptr, nullptr};
    EXPECT_EQ(ddp_init_local(0, nullptr, nullptr, comms), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("n is 0"), std::string::npos) << ddp_last_error_message();
    EXPECT_EQ(ddp_init_local(2, nullptr, nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("comms"), std::string::npos) << ddp_last_error_message();
    const int32_t bad_devices[2] = {0, -1};
    EXPECT_EQ(ddp_init_local(2, bad_devices, nullptr, comms), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("devices[1] is -1"), std::string::npos)
        << ddp_last_error_message();
    ddp_init_options opts;
    ASSERT_EQ(ddp_init_options_init(&opts, sizeof opts), DDP_OK);
    opts.backend = DDP_BACKEND_MPI;
    EXPECT_EQ(ddp_init_local(2, nullptr, &opts, comms), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("opts->backend"), std::string::npos)
        << ddp_last_error_message();
    EXPECT_EQ(comms[0], nullptr);  // nothing started
}

// With devices each rank sets up NCCL on its GPU; where it cannot (no GPU,
// no NCCL, no CUDA: the machines CI runs on), every rank fails together
// saying why, and nothing is started.
TEST(LocalGroupStart, DevicesWithoutAGpuOrNcclFailEveryRankSayingWhy) {
    ddp_comm* comms[2] = {nullptr, nullptr};
    const int32_t devices[2] = {0, 0};
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(ddp_init_local(2, devices, nullptr, comms), DDP_ERR_UNSUPPORTED);
    const std::string message = ddp_last_error_message();
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
    const bool says_why = message.find("needs a GPU on every rank") != std::string::npos ||
                          message.find("libnccl") != std::string::npos ||
                          message.find("built without CUDA") != std::string::npos;
    EXPECT_TRUE(says_why) << message;
    EXPECT_EQ(comms[0], nullptr);
    EXPECT_EQ(comms[1], nullptr);
}

// Ranks of one process that launch NCCL from threads of their own must be
// connected at set-up (NVIDIA/nccl#787: a rank connecting in its first
// collective waits for the kernel of a rank that launched before it): a
// group with devices sets NCCL_RUNTIME_CONNECT=0 before NCCL reads it, and
// leaves a value the user set. A host-only group leaves NCCL alone.
TEST(LocalGroupStart, RanksWithDevicesAreConnectedAtSetUpUnlessTheUserSaysOtherwise) {
    ddp_comm* comms[2] = {nullptr, nullptr};
    const int32_t devices[2] = {0, 0};
    unsetenv("NCCL_RUNTIME_CONNECT");
    ASSERT_EQ(ddp_init_local(2, nullptr, nullptr, comms), DDP_OK) << ddp_last_error_message();
    for (ddp_comm* comm : comms) ddp_finalize(comm);
    EXPECT_EQ(std::getenv("NCCL_RUNTIME_CONNECT"), nullptr);

    ddp_init_local(2, devices, nullptr, comms);  // fails here, with no GPU, after the variable is set
    const char* chosen = std::getenv("NCCL_RUNTIME_CONNECT");
    ASSERT_NE(chosen, nullptr);
    EXPECT_STREQ(chosen, "0");

    setenv("NCCL_RUNTIME_CONNECT", "1", 1);
    ddp_init_local(2, devices, nullptr, comms);
    EXPECT_STREQ(std::getenv("NCCL_RUNTIME_CONNECT"), "1");
    unsetenv("NCCL_RUNTIME_CONNECT");
}

// DDP_TIMELINE names one path for every rank: each group's files carry its name.
TEST(LocalGroupStart, TwoGroupsTimelinesGoToFilesOfTheirOwn) {
    const std::filesystem::path dir =
        std::filesystem::path(testing::TempDir()) / ("local-group-timelines-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    setenv("DDP_TIMELINE", (dir / "trace.json").c_str(), 1);
    for (int group = 0; group < 2; ++group) {
        std::vector<ddp_comm*> comms(2);
        ASSERT_EQ(ddp_init_local(2, nullptr, nullptr, comms.data()), DDP_OK) << ddp_last_error_message();
        for (ddp_comm* comm : comms) EXPECT_EQ(ddp_finalize(comm), DDP_OK) << ddp_last_error_message();
    }
    unsetenv("DDP_TIMELINE");
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().filename());
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 4u);  // 2 groups x 2 ranks, none overwritten
    for (size_t i = 0; i < files.size(); ++i) {
        EXPECT_EQ(files[i].rfind("trace.local_group_", 0), 0u) << files[i];
        EXPECT_NE(files[i].find(i % 2 == 0 ? ".rank0.json" : ".rank1.json"), std::string::npos) << files[i];
    }
    std::filesystem::remove_all(dir);
}

TEST(LocalGroupStart, TwoGroupsLiveAtOnceAndBesideTheWorld) {
    std::vector<Seen> first, second;
    std::jthread a([&] {
        first = run_group(2, [](int rank, ddp_comm* comm, Seen& seen) {
            std::vector<float> x(10, static_cast<float>(rank));
            ddp_tensor t = f32(x);
            seen.record(ddp_allreduce_tensor_list(comm, &t, 1, DDP_OP_SUM, nullptr));
        });
    });
    std::jthread b([&] {
        second = run_group(3, [](int, ddp_comm* comm, Seen& seen) { seen.record(ddp_barrier(comm, nullptr)); });
    });
    a.join();
    b.join();
    expect_all_ok(first);
    expect_all_ok(second);
}

}  // namespace
