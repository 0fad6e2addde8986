// LaunchGate (planes/nccl/local_ranks.hpp): the ranks of one NCCL
// communicator in one process meet before each launch, so that none
// launches while another may still allocate (NVIDIA/nccl#787). Threads
// stand for the ranks; no GPU is needed to see who waits for whom.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "planes/nccl/local_ranks.hpp"
#include "util/error.hpp"

namespace {

using namespace ddp;
using namespace std::chrono_literals;

const LaunchGate::Stop never = [] { return std::optional<std::string>(); };

Clock::time_point in(std::chrono::milliseconds wait) { return Clock::now() + wait; }

/// The status and message `body` throws, or DDP_OK.
std::pair<ddp_status, std::string> outcome(const std::function<void()>& body) {
    try {
        body();
        return {DDP_OK, ""};
    } catch (const Error& error) {
        return {error.status(), error.what()};
    }
}

TEST(LaunchGate, NoRankPassesBeforeTheLastArrivesRoundAfterRound) {
    LaunchGate gate({4, 5, 6});
    std::atomic<int> arrived{0};
    std::atomic<int> early{0};
    {
        std::vector<std::jthread> ranks;
        for (int rank : {4, 5, 6})
            ranks.emplace_back([&, rank] {
                for (int round = 0; round < 50; ++round) {
                    if (rank == 6) std::this_thread::sleep_for(1ms);  // the late one
                    arrived.fetch_add(1);
                    gate.pass(rank, in(10s), never, "ncclAllReduce");
                    if (arrived.load() < 3 * (round + 1)) early.fetch_add(1);
                }
            });
    }
    EXPECT_EQ(early.load(), 0);
    EXPECT_EQ(arrived.load(), 150);
}

TEST(LaunchGate, ARankThatNeverComesIsNamedAtTheDeadlineAndBreaksTheGate) {
    LaunchGate gate({0, 1, 2});
    std::pair<ddp_status, std::string> first, second;
    {
        std::jthread a([&] { first = outcome([&] { gate.pass(0, in(200ms), never, "ncclAllReduce"); }); });
        std::jthread b([&] { second = outcome([&] { gate.pass(1, in(5s), never, "ncclAllReduce"); }); });
    }
    EXPECT_EQ(first.first, DDP_ERR_TIMEOUT);
    EXPECT_NE(first.second.find("rank(s) 2 of its process"), std::string::npos) << first.second;
    EXPECT_EQ(first.second.find("rank(s) 1"), std::string::npos) << first.second;
    // The other waiter leaves at once with the reason, not at its own deadline.
    EXPECT_EQ(second.first, DDP_ERR_TIMEOUT);
    EXPECT_NE(second.second.find("will not launch"), std::string::npos) << second.second;
    const auto late = outcome([&] { gate.pass(2, in(5s), never, "ncclAllReduce"); });
    EXPECT_EQ(late.first, DDP_ERR_TIMEOUT);
}

TEST(LaunchGate, AStopReasonEndsTheWaitAtOnce) {
    LaunchGate gate({0, 1});
    const auto started = Clock::now();
    const auto result = outcome([&] {
        gate.pass(0, in(30s), [] { return std::optional<std::string>("rank 3 stopped taking part"); }, "ncclBroadcast");
    });
    EXPECT_LT(Clock::now() - started, 5s);
    EXPECT_EQ(result.first, DDP_ERR_TIMEOUT);
    EXPECT_EQ(result.second, "rank 3 stopped taking part");
}

// A member that will not launch (aborted) must not complete the round:
// its siblings would launch kernels that wait for it.
TEST(LaunchGate, AMemberThatWillNotLaunchFailsTheRoundInsteadOfCompletingIt) {
    LaunchGate gate({0, 1});
    std::pair<ddp_status, std::string> waiting, last;
    {
        std::jthread waiter([&] { waiting = outcome([&] { gate.pass(0, in(30s), never, "ncclReduce"); }); });
        std::this_thread::sleep_for(50ms);
        last = outcome([&] {
            gate.pass(1, in(30s), [] { return std::optional<std::string>("NCCL was aborted on rank 1"); }, "ncclReduce");
        });
    }
    EXPECT_EQ(last.first, DDP_ERR_TIMEOUT);
    EXPECT_EQ(waiting.first, DDP_ERR_TIMEOUT);
    EXPECT_NE(waiting.second.find("NCCL was aborted on rank 1"), std::string::npos) << waiting.second;
}

TEST(LaunchGate, ABrokenGateReleasesItsWaiters) {
    LaunchGate gate({0, 1});
    std::pair<ddp_status, std::string> waiting;
    {
        std::jthread waiter([&] { waiting = outcome([&] { gate.pass(0, in(30s), never, "ncclAllGather"); }); });
        std::this_thread::sleep_for(50ms);
        gate.break_open("rank 1: NCCL was aborted");
    }
    EXPECT_EQ(waiting.first, DDP_ERR_TIMEOUT);
    EXPECT_NE(waiting.second.find("rank 1: NCCL was aborted"), std::string::npos) << waiting.second;
}

TEST(LaunchGate, ASplitGivesEachColorsRanksAGateOfTheirOwn) {
    LaunchGate gate({0, 1, 2, 3});
    std::vector<std::shared_ptr<LaunchGate>> subs(4);
    {
        std::vector<std::jthread> ranks;
        for (int rank = 0; rank < 4; ++rank)
            ranks.emplace_back([&, rank] {
                // 0 and 2 make color 7, 1 makes color 9 alone, 3 takes no part.
                const std::optional<int> color = rank == 3 ? std::nullopt : std::optional<int>(rank == 1 ? 9 : 7);
                subs[static_cast<size_t>(rank)] = gate.split(rank, color, rank / 2, in(10s), never);
            });
    }
    ASSERT_NE(subs[0], nullptr);
    EXPECT_EQ(subs[0], subs[2]);
    ASSERT_NE(subs[1], nullptr);
    EXPECT_NE(subs[1], subs[0]);
    EXPECT_EQ(subs[3], nullptr);
    subs[1]->pass(0, in(1s), never, "alone");  // a gate of one passes at once
    {
        std::jthread a([&] { subs[0]->pass(0, in(10s), never, "ncclAllReduce"); });
        std::jthread b([&] { subs[2]->pass(1, in(10s), never, "ncclAllReduce"); });
    }
    // The parent still meets all four.
    std::vector<std::jthread> ranks;
    for (int rank = 0; rank < 4; ++rank)
        ranks.emplace_back([&, rank] { gate.pass(rank, in(10s), never, "ncclAllReduce"); });
}

}  // namespace
