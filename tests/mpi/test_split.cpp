// Sub-communicators on real MPI ranks (1 to 4, shared memory and TCP): 4
// ranks as 2x2, split by a node-like color (rank / 2, "rows") and by replica
// (rank % 2, "columns"); collectives on both, at once from two threads where
// MPI allows it; a timeout in one that leaves the other and the world
// working; DDP_COLOR_UNDEFINED, an invalid color on one rank, key order,
// free, the node communicator. Fewer ranks run the same tests on smaller
// grids.
#define DDP_EXPERIMENTAL_API  // ddp_reducer_*, ddp_comm_abort
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::seconds_since;
using mpi_test::size;
using mpi_test::world;

namespace {

ddp_tensor f64_tensor(std::vector<double>& values) {
    return ddp_tensor{values.data(), static_cast<int64_t>(values.size()), DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
}

/// A split that must succeed; its handle (NULL for DDP_COLOR_UNDEFINED).
ddp_comm* split(int32_t color, int32_t key, double timeout_s = 0) {
    ddp_split_options opts;
    EXPECT_EQ(ddp_split_options_init(&opts, sizeof opts), DDP_OK);
    opts.timeout_s = timeout_s;
    ddp_comm* sub = nullptr;
    EXPECT_EQ(ddp_comm_split(world, color, key, &opts, &sub), DDP_OK) << message();
    return sub;
}

int32_t rank_in(const ddp_comm* comm) {
    int32_t r = -1;
    EXPECT_EQ(ddp_rank(comm, &r), DDP_OK) << message();
    return r;
}

int32_t size_of(const ddp_comm* comm) {
    int32_t s = -1;
    EXPECT_EQ(ddp_size(comm, &s), DDP_OK) << message();
    return s;
}

/// The world ranks that share this rank's color, in world order.
std::vector<int> members(int (*color)(int)) {
    std::vector<int> ranks;
    for (int r = 0; r < size; ++r)
        if (color(r) == color(rank)) ranks.push_back(r);
    return ranks;
}

int row_of(int r) { return r / 2; }
int column_of(int r) { return r % 2; }

/// Allreduces (world rank + 1) * 10^round on `comm` and checks the sum
/// over `ranks`; returns the status.
ddp_status check_sum(ddp_comm* comm, const std::vector<int>& ranks, int round) {
    double scale = 1;
    for (int i = 0; i < round % 4; ++i) scale *= 10;
    std::vector<double> values(300, (rank + 1) * scale);  // 2400 bytes: beyond what agreement carries
    ddp_tensor tensor = f64_tensor(values);
    const ddp_status status = ddp_allreduce_tensor_list(comm, &tensor, 1, DDP_OP_SUM, nullptr);
    if (status != DDP_OK) return status;
    double expected = 0;
    for (int r : ranks) expected += (r + 1) * scale;
    for (double v : values)
        if (v != expected) {
            ADD_FAILURE() << "got " << v << ", expected " << expected << " (round " << round << ")";
            break;
        }
    return status;
}

bool thread_multiple() {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level >= MPI_THREAD_MULTIPLE;
}

TEST(Split, RowsAndColumnsHaveTheirRanksAndSizes) {
    ddp_comm* rows = split(row_of(rank), rank);
    ddp_comm* columns = split(column_of(rank), rank);
    ASSERT_NE(rows, nullptr);
    ASSERT_NE(columns, nullptr);
    const std::vector<int> row = members(row_of), column = members(column_of);
    EXPECT_EQ(size_of(rows), static_cast<int32_t>(row.size()));
    EXPECT_EQ(rank_in(rows), rank % 2);
    EXPECT_EQ(size_of(columns), static_cast<int32_t>(column.size()));
    EXPECT_EQ(rank_in(columns), rank / 2);
    // One machine: every rank of a sub-communicator shares this node.
    int32_t local_rank = -1, local_size = -1;
    EXPECT_EQ(ddp_local_rank(rows, &local_rank), DDP_OK);
    EXPECT_EQ(ddp_local_size(rows, &local_size), DDP_OK);
    EXPECT_EQ(local_rank, rank_in(rows));
    EXPECT_EQ(local_size, size_of(rows));
    const char* backend = nullptr;
    EXPECT_EQ(ddp_backend_name(rows, &backend), DDP_OK);
    EXPECT_STREQ(backend, "mpi");
    EXPECT_EQ(ddp_comm_free(rows), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(columns), DDP_OK) << message();
}

TEST(Split, KeyOrdersTheRanks) {
    ddp_comm* reversed = split(0, size - rank);
    ASSERT_NE(reversed, nullptr);
    EXPECT_EQ(rank_in(reversed), size - 1 - rank);
    // Equal keys: the parent's order.
    ddp_comm* same = split(0, 7);
    EXPECT_EQ(rank_in(same), rank);
    EXPECT_EQ(ddp_comm_free(reversed), DDP_OK);
    EXPECT_EQ(ddp_comm_free(same), DDP_OK);
}

TEST(Split, CollectivesOnRowsAndColumnsGiveTheirOwnSums) {
    ddp_comm* rows = split(row_of(rank), rank);
    ddp_comm* columns = split(column_of(rank), rank);
    const std::vector<int> row = members(row_of), column = members(column_of);
    for (int round = 0; round < 3; ++round) {
        EXPECT_EQ(check_sum(rows, row, round), DDP_OK) << message();
        EXPECT_EQ(check_sum(columns, column, round), DDP_OK) << message();
        EXPECT_EQ(check_sum(world, members([](int) { return 0; }), round), DDP_OK) << message();
    }
    // Broadcast from the sub-communicator's last rank, reduce to its first, a barrier.
    std::vector<double> values(5, rank);
    ddp_tensor tensor = f64_tensor(values);
    EXPECT_EQ(ddp_broadcast_tensor_list(rows, &tensor, 1, size_of(rows) - 1, nullptr), DDP_OK) << message();
    EXPECT_EQ(values[0], row.back());
    values.assign(5, rank);
    EXPECT_EQ(ddp_reduce_tensor_list(columns, &tensor, 1, DDP_OP_MAX, 0, nullptr), DDP_OK) << message();
    if (rank_in(columns) == 0) {
        EXPECT_EQ(values[0], column.back());
    }
    EXPECT_EQ(ddp_barrier(rows, nullptr), DDP_OK) << message();
    // An async request and a reducer on a sub-communicator.
    values.assign(5, 1.0);
    ddp_request* request = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(columns, &tensor, 1, DDP_OP_SUM, nullptr, &request), DDP_OK)
        << message();
    EXPECT_EQ(ddp_request_free(request), DDP_OK) << message();
    EXPECT_EQ(values[0], static_cast<double>(column.size()));
    ddp_tensor shape{nullptr, 3, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_reducer* reducer = nullptr;
    ASSERT_EQ(ddp_reducer_create(rows, &shape, 1, DDP_OP_AVG, nullptr, &reducer), DDP_OK) << message();
    ddp_tensor gradient;
    ASSERT_EQ(ddp_reducer_gradient(reducer, 0, &gradient), DDP_OK);
    for (int i = 0; i < 3; ++i) static_cast<float*>(gradient.data)[i] = static_cast<float>(rank);
    EXPECT_EQ(ddp_reducer_mark_ready(reducer, 0), DDP_OK);
    EXPECT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
    double mean = 0;
    for (int r : row) mean += r;
    EXPECT_FLOAT_EQ(static_cast<float*>(gradient.data)[2], static_cast<float>(mean / row.size()));
    EXPECT_EQ(ddp_reducer_free(reducer), DDP_OK);
    EXPECT_EQ(ddp_comm_free(rows), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(columns), DDP_OK) << message();
}

TEST(Split, RowsAndColumnsRunAtOnceFromTwoThreads) {
    if (!thread_multiple()) GTEST_SKIP() << "MPI runs below MPI_THREAD_MULTIPLE: one thread at a time";
    ddp_comm* rows = split(row_of(rank), rank);
    ddp_comm* columns = split(column_of(rank), rank);
    const std::vector<int> row = members(row_of), column = members(column_of);
    ddp_status row_status = DDP_OK;
    std::string row_message;
    std::thread on_rows([&] {
        for (int round = 0; round < 50 && row_status == DDP_OK; ++round) row_status = check_sum(rows, row, round);
        if (row_status != DDP_OK) row_message = ddp_last_error_message();
    });
    ddp_status column_status = DDP_OK;
    for (int round = 0; round < 50 && column_status == DDP_OK; ++round)
        column_status = check_sum(columns, column, round);
    on_rows.join();
    EXPECT_EQ(row_status, DDP_OK) << row_message;
    EXPECT_EQ(column_status, DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(rows), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(columns), DDP_OK) << message();
}

TEST(Split, ATimeoutInRowsBreaksRowsAloneAndSaysWhich) {
    if (size < 2) GTEST_SKIP() << "needs a row of two ranks";
    ddp_comm* rows = split(row_of(rank), rank, 1.0);  // the rows' own timeout: 1 s
    ddp_comm* columns = split(column_of(rank), rank);
    const std::vector<int> row = members(row_of), column = members(column_of);
    // The ranks' sequence numbers on the world agree; the split was its
    // collective number 1 + what earlier tests ran, which the name quotes.
    const bool in_first_row = row_of(rank) == 0;
    if (in_first_row && rank == 0) {  // world rank 1 never joins this allreduce
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(check_sum(rows, row, 0), DDP_ERR_TIMEOUT);
        const std::string text = message();
        EXPECT_LT(seconds_since(start), 10.0);
        EXPECT_EQ(text.rfind("sub-communicator color 0 (comm_split #", 0), 0u) << text;
        EXPECT_NE(text.find("allreduce #1 timed out on rank 0"), std::string::npos) << text;
        EXPECT_NE(text.find("rank 1 has not joined"), std::string::npos) << text;
    } else if (!in_first_row && row.size() > 1) {
        EXPECT_EQ(check_sum(rows, row, 0), DDP_OK) << message();  // the second row works
    }
    // The world and the columns still work while rows 0 is broken.
    EXPECT_EQ(check_sum(world, members([](int) { return 0; }), 1), DDP_OK) << message();
    EXPECT_EQ(check_sum(columns, column, 2), DDP_OK) << message();
    if (in_first_row) {
        // Rank 1 learns at its next call, from rank 0's notice; rank 0 from the broken state.
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(ddp_barrier(rows, nullptr), DDP_ERR_TIMEOUT);
        const std::string text = message();
        EXPECT_LT(seconds_since(start), 5.0);
        EXPECT_EQ(text.rfind("sub-communicator color 0 (comm_split #", 0), 0u) << text;
        if (rank == 1) {
            EXPECT_NE(text.find("rank 0 gave up on allreduce #1"), std::string::npos) << text;
        }
    }
    EXPECT_EQ(check_sum(columns, column, 3), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(rows), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(columns), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

TEST(Split, AnAbortedSubLeavesTheWorldWorking) {
    ddp_comm* all = split(0, rank);
    if (rank == 0) {
        EXPECT_EQ(ddp_comm_abort(all, "test"), DDP_OK);
    }
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(all, nullptr), DDP_ERR_TIMEOUT);  // aborted here, told there
    EXPECT_EQ(check_sum(world, members([](int) { return 0; }), 0), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(all), DDP_OK) << message();
}

TEST(Split, UndefinedColorJoinsNone) {
    ddp_comm* sub = split(rank == 0 ? DDP_COLOR_UNDEFINED : 0, rank);
    if (rank == 0) {
        EXPECT_EQ(sub, nullptr);
    } else {
        ASSERT_NE(sub, nullptr);
        EXPECT_EQ(size_of(sub), size - 1);
        EXPECT_EQ(rank_in(sub), rank - 1);
        std::vector<int> others;
        for (int r = 1; r < size; ++r) others.push_back(r);
        EXPECT_EQ(check_sum(sub, others, 2), DDP_OK) << message();
    }
    EXPECT_EQ(ddp_comm_free(sub), DDP_OK) << message();  // NULL on rank 0: a no-op
}

TEST(Split, AnInvalidColorOnOneRankFailsItsPeersAtOnce) {
    const int bad = size - 1;
    ddp_comm* sub = nullptr;
    const auto start = std::chrono::steady_clock::now();
    const ddp_status status = ddp_comm_split(world, rank == bad ? -5 : 0, 0, nullptr, &sub);
    const std::string text = message();
    EXPECT_LT(seconds_since(start), 5.0);
    EXPECT_EQ(sub, nullptr);
    if (rank == bad) {
        EXPECT_EQ(status, DDP_ERR_INVALID_ARGUMENT);
        EXPECT_NE(text.find("color is -5"), std::string::npos) << text;
    } else {
        EXPECT_EQ(status, DDP_ERR_MISMATCH);
        EXPECT_NE(text.find("rank " + std::to_string(bad) + " passed invalid arguments to comm_split"),
                  std::string::npos)
            << text;
        EXPECT_NE(text.find("color is -5"), std::string::npos) << text;
    }
    // NULL out-pointer and a bad option are refused the same way.
    EXPECT_EQ(ddp_comm_split(world, 0, 0, nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    ddp_split_options opts;
    ddp_split_options_init(&opts, sizeof opts);
    opts.timeout_s = -1;
    EXPECT_EQ(ddp_comm_split_node(world, &opts, &sub), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("opts->timeout_s"), std::string::npos) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();  // the world is intact
}

TEST(Split, AFreedSubIsNotInitializedAndTheWorldIsNotFreed) {
    ddp_comm* sub = split(0, rank);
    EXPECT_EQ(ddp_comm_free(sub), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(sub), DDP_OK) << message();  // idempotent
    EXPECT_EQ(ddp_barrier(sub, nullptr), DDP_ERR_NOT_INITIALIZED);
    EXPECT_NE(message().find("sub-communicator that was freed"), std::string::npos) << message();
    int32_t r = -1;
    EXPECT_EQ(ddp_rank(sub, &r), DDP_ERR_NOT_INITIALIZED);
    EXPECT_EQ(ddp_comm_free(world), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("ddp_finalize"), std::string::npos) << message();
    ddp_comm* other = split(0, rank);
    EXPECT_EQ(ddp_finalize(other), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("ddp_comm_free"), std::string::npos) << message();
    EXPECT_EQ(ddp_comm_free(other), DDP_OK) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

TEST(Split, TheNodeCommunicatorHoldsThisNodesRanks) {
    ddp_comm* node = nullptr;
    ASSERT_EQ(ddp_comm_split_node(world, nullptr, &node), DDP_OK) << message();
    ASSERT_NE(node, nullptr);
    int32_t local_rank = -1, local_size = -1;
    ddp_local_rank(world, &local_rank);
    ddp_local_size(world, &local_size);
    EXPECT_EQ(size_of(node), local_size);
    EXPECT_EQ(rank_in(node), local_rank);
    EXPECT_EQ(check_sum(node, members([](int) { return 0; }), 1), DDP_OK) << message();
    // A split of a sub-communicator: rows of the node.
    ddp_comm* rows = nullptr;
    ASSERT_EQ(ddp_comm_split(node, row_of(rank), rank, nullptr, &rows), DDP_OK) << message();
    EXPECT_EQ(check_sum(rows, members(row_of), 2), DDP_OK) << message();
    EXPECT_EQ(ddp_comm_free(node), DDP_OK) << message();
    EXPECT_EQ(check_sum(rows, members(row_of), 3), DDP_OK) << message();  // outlives its parent
    EXPECT_EQ(ddp_comm_free(rows), DDP_OK) << message();
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    // ddp_finalize frees the sub-communicators still live.
    ddp_comm* left = nullptr;
    if (ddp_comm_split(world, column_of(rank), rank, nullptr, &left) != DDP_OK) return 3;
    std::vector<double> values(4, 1.0);
    ddp_tensor tensor = f64_tensor(values);
    if (ddp_allreduce_tensor_list(left, &tensor, 1, DDP_OP_SUM, nullptr) != DDP_OK) return 4;
    if (ddp_finalize(world) != DDP_OK) return 5;
    if (ddp_barrier(left, nullptr) != DDP_ERR_NOT_INITIALIZED) return 6;
    if (std::string(ddp_last_error_message()).find("whose world was finalized") == std::string::npos) return 8;
    if (ddp_comm_free(left) != DDP_OK) return 7;
    return result;
}
