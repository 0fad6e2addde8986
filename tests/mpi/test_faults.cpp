// Faults that used to hang or mislead, each run by its own meson test (a
// broken communicator stays broken, so each needs a fresh process):
//  - Faults.QueuedRequestsFailAtOnce: after a timeout, async requests
//    already queued fail at once instead of each waiting a fresh timeout.
//  - Faults.StallNamesTheMissingRank: past DDP_STALL_WARN_S a waiting rank
//    logs which rank has not joined and what it last called.
//  - Faults.AFinalizedPeerFailsLaterCollectivesAtOnce: a rank that calls one
//    collective more than its finalized peer fails at once, not at its timeout.
//  - Faults.AbortFromAWatchdogThreadEndsTheCallInProgress: ddp_comm_abort
//    from another thread ends this rank's own waiting call and its peers'.
//  - Faults.ALateRankFailsASmallAllreduceItsPeerGaveUpOn: a small allreduce
//    rides in agreement's one round, so a rank arriving just after its peer
//    gave up finds all it needs; it must still report the timeout, not success.
//  - Faults.AReducerStepThatTimesOutEndsOnBothRanks: a rank whose peer stops
//    marking mid-step times out and frees its reducer while its bucket
//    reductions are still posted (the abandoned operations hold the buckets'
//    storage); the late peer is told, and its wait posts the matching
//    reductions, which complete into that storage.
// Run with 2 ranks; the meson test sets DDP_TIMEOUT_S and DDP_STALL_WARN_S.
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define DDP_EXPERIMENTAL_API
#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::world;

using mpi_test::seconds_since;

namespace {

TEST(Faults, QueuedRequestsFailAtOnce) {
    std::vector<float> data(40 * 256, 1.0f);
    if (rank == 0) {
        const auto started = std::chrono::steady_clock::now();
        std::vector<ddp_request*> requests(40);
        for (size_t i = 0; i < requests.size(); ++i) {
            ddp_tensor tensor{data.data() + 256 * i, 256, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
            ASSERT_EQ(ddp_allreduce_tensor_list_async(world, &tensor, 1, DDP_OP_SUM, nullptr, &requests[i]), DDP_OK)
                << message();
        }
        for (size_t i = 0; i < requests.size(); ++i) {
            EXPECT_EQ(ddp_request_free(requests[i]), DDP_ERR_TIMEOUT) << "request " << i;
            if (i == 0) {
                EXPECT_NE(message().find("rank 1 has not joined"), std::string::npos) << message();
            }
        }
        // 0.1 took 40 timeouts here; now one timeout plus asking the peer.
        EXPECT_LT(seconds_since(started), 3.5);
    } else {
        std::this_thread::sleep_for(std::chrono::seconds(4));
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("rank 0 gave up on allreduce #1"), std::string::npos) << message();
    }
}

std::mutex lines_mutex;
std::vector<std::string> lines;

void keep_line(int32_t level, const char* line, void*) {
    std::lock_guard lock(lines_mutex);
    if (level >= DDP_LOG_WARN) lines.emplace_back(line);
}

TEST(Faults, StallNamesTheMissingRank) {
    float value = 1;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK) << message();
    if (rank == 0) {
        ddp_set_log_callback(&keep_line, nullptr);
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
        ddp_set_log_callback(nullptr, nullptr);
        std::lock_guard lock(lines_mutex);
        ASSERT_EQ(lines.size(), 1u) << "expected one stall warning";
        EXPECT_NE(lines[0].find("barrier #2 has waited"), std::string::npos) << lines[0];
        EXPECT_NE(lines[0].find("rank 1 has not joined (its last call: allreduce #1, finished)"), std::string::npos)
            << lines[0];
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    }
}

TEST(Faults, AFinalizedPeerFailsLaterCollectivesAtOnce) {
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
    if (rank == 0) return;  // main() finalizes rank 0 now
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
    EXPECT_NE(message().find("rank 0 finalized the communicator after barrier #1"), std::string::npos) << message();
    EXPECT_LT(seconds_since(started), 1.0);  // the timeout is 8 s
}

TEST(Faults, AbortFromAWatchdogThreadEndsTheCallInProgress) {
    const auto started = std::chrono::steady_clock::now();
    if (rank == 0) {
        std::thread watchdog([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            ddp_comm_abort(world, "watchdog: loss is NaN");
        });
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);  // rank 1 is late: only the abort ends this
        watchdog.join();
        EXPECT_NE(message().find("aborted the communicator (watchdog: loss is NaN)"), std::string::npos)
            << message();
        EXPECT_LT(seconds_since(started), 2.0);
    } else {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("rank 0 aborted the communicator (ddp_comm_abort"), std::string::npos)
            << message();
    }
}

TEST(Faults, ALateRankFailsASmallAllreduceItsPeerGaveUpOn) {
    float values[4] = {1.0f + static_cast<float>(rank), 1, 1, 1};
    ddp_tensor tensor{values, 4, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_collective_options short_timeout;
    ddp_collective_options_init(&short_timeout, sizeof short_timeout);
    short_timeout.timeout_s = 0.5;
    ASSERT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();  // both start the next call together
    if (rank == 0) {
        EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &short_timeout), DDP_ERR_TIMEOUT);
    } else {
        // Just after rank 0 gave up: before the background thread (which
        // polls every 10 ms) has taken in its notice, most of the time. 6 ms
        // past rank 0's deadline, as the two may leave the barrier a few ms
        // apart on a loaded machine (3 ms was seen to be too few).
        std::this_thread::sleep_for(std::chrono::milliseconds(506));
        EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("rank 0 gave up on allreduce #2"), std::string::npos) << message();
    }
}

TEST(Faults, AReducerStepThatTimesOutEndsOnBothRanks) {
    // Four gradients of 1000 floats, a bucket each (4 KiB buckets), reduced last first.
    const std::vector<ddp_tensor> layout(4, ddp_tensor{nullptr, 1000, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    ddp_collective_options opts;
    ddp_collective_options_init(&opts, sizeof opts);
    opts.fusion_bytes = 4096;
    ddp_reducer* reducer = nullptr;
    ASSERT_EQ(ddp_reducer_create(world, layout.data(), 4, DDP_OP_AVG, &opts, &reducer), DDP_OK) << message();
    ASSERT_EQ(ddp_reducer_mark_ready(reducer, 3), DDP_OK) << message();  // both: the step is agreed
    if (rank == 0) {
        for (int64_t i = 2; i >= 0; --i) ASSERT_EQ(ddp_reducer_mark_ready(reducer, i), DDP_OK) << message();
        EXPECT_EQ(ddp_reducer_wait(reducer), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("reducer step #2 timed out on rank 0"), std::string::npos) << message();
        EXPECT_EQ(ddp_reducer_free(reducer), DDP_OK) << message();  // its buckets stay with the posted reductions
        EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_TIMEOUT);
    } else {
        std::this_thread::sleep_for(std::chrono::seconds(3));
        // Told that rank 0 gave up; the wait still posts the remaining
        // buckets' reductions (no peer may wait for ever), matching rank 0's.
        EXPECT_EQ(ddp_reducer_mark_ready(reducer, 2), DDP_ERR_TIMEOUT);
        EXPECT_NE(message().find("rank 0 gave up on reducer step #2"), std::string::npos) << message();
        EXPECT_EQ(ddp_reducer_wait(reducer), DDP_ERR_TIMEOUT);
        EXPECT_EQ(ddp_reducer_free(reducer), DDP_OK) << message();
    }
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    return ddp_finalize(world) == DDP_OK ? result : 7;
}
