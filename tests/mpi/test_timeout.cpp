// A rank that never joins a collective in time: with DDP_TIMEOUT_S=1 the
// waiting rank gets DDP_ERR_TIMEOUT after about a second, naming the rank
// that did not join; the late rank, arriving after that, fails at once
// because its peer told it so (instead of waiting in a collective nobody
// else will join); later calls fail fast on both; and both finalize in
// bounded time with MPI finalized cleanly. Run with 2 ranks.
#include <chrono>
#include <string>
#include <thread>

#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::world;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(Timeout, AMissingRankEndsInTimeoutOnEveryRankNotAHang) {
    const auto started = std::chrono::steady_clock::now();
    if (rank == 0) {
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        const double seconds = seconds_since(started);
        EXPECT_NE(message().find("barrier #1 timed out on rank 0"), std::string::npos) << message();
        EXPECT_NE(message().find("rank 1 has not joined"), std::string::npos) << message();
        EXPECT_GE(seconds, 0.9);
        EXPECT_LT(seconds, 4.0);
    } else {
        // Late: arrives after rank 0 gave up.
        std::this_thread::sleep_for(std::chrono::seconds(3));
        const auto arrived = std::chrono::steady_clock::now();
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("rank 0 gave up on barrier #1"), std::string::npos) << message();
        EXPECT_LT(seconds_since(arrived), 0.5);
    }
    // Broken for good, on both ranks, without waiting.
    const auto again = std::chrono::steady_clock::now();
    float value = 1;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_ERR_TIMEOUT);
    EXPECT_LT(seconds_since(again), 0.5);
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    const auto started = std::chrono::steady_clock::now();
    const ddp_status finalized = ddp_finalize(world);
    if (seconds_since(started) > 5) return 8;
    return finalized == DDP_OK ? result : 7;
}
