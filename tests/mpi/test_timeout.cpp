// A rank that never joins a collective: with DDP_TIMEOUT_S=1 the waiting
// rank gets DDP_ERR_TIMEOUT after about a second instead of hanging, and its
// communicator refuses further collectives. Run with 2 ranks.
#include <chrono>
#include <string>
#include <thread>

#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::world;

namespace {

TEST(Timeout, AMissingRankEndsInTimeoutNotAHang) {
    if (rank == 0) {
        const auto started = std::chrono::steady_clock::now();
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        EXPECT_NE(message().find("timeout"), std::string::npos) << message();
        EXPECT_GE(seconds, 0.9);
        EXPECT_LT(seconds, 5.0);
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("unusable"), std::string::npos) << message();
    } else {
        // Late: arrives after rank 0 gave up, so finalize can still end cleanly.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    }
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    return ddp_finalize(world) == DDP_OK ? result : 7;
}
