// The shm plane's doorbell (planes/shm/doorbell.hpp), with threads standing
// for ranks: a sleeper wakes at the ring that follows its peer's flag store,
// however the two interleave, and never misses one (a missed ring would
// leave it asleep until its timeout, which these tests count).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "planes/shm/progress_flags.hpp"

namespace {

using ddp::Clock;
using ddp::shm::cache_line;
using namespace std::chrono_literals;

/// Two ranks' flags laid out as in a segment, with the doorbell after them.
struct Flags {
    std::vector<std::byte> area = std::vector<std::byte>(3 * cache_line);
    ddp::shm::ProgressFlags of(int rank) {
        return ddp::shm::ProgressFlags(area.data(), cache_line, ddp::shm::Doorbell(area.data() + 2 * cache_line), rank,
                                       2);
    }
};

TEST(Doorbell, ASleeperWakesAtThePeersFlagNotAtItsTimeout) {
    Flags flags;
    ddp::shm::ProgressFlags sleeper = flags.of(0), setter = flags.of(1);
    std::thread peer([&] {
        std::this_thread::sleep_for(50ms);
        setter.set(0, 1);
    });
    const auto start = Clock::now();
    while (sleeper.get(1, 0) < 1) sleeper.sleep_unless([&] { return sleeper.get(1, 0) >= 1; }, start + 5s);
    peer.join();
    EXPECT_LT(Clock::now() - start, 4s) << "the sleeper slept through the ring";
}

TEST(Doorbell, NoRingIsMissedInAThousandHandoffs) {
    // A ping-pong where each side sleeps at once instead of spinning: every
    // handoff races a store and its ring against the other side's sleep.
    Flags flags;
    constexpr uint64_t rounds = 1000;
    std::atomic<int> timeouts{0};
    auto play = [&](int rank) {
        ddp::shm::ProgressFlags mine = flags.of(rank);
        const int peer = 1 - rank;
        for (uint64_t round = 1; round <= rounds; ++round) {
            // Rank 0 serves odd values, rank 1 answers with the same value.
            if (rank == 0) mine.set(0, round);
            const uint64_t wanted = round;
            auto arrived = [&] { return mine.get(peer, 0) >= wanted; };
            while (!arrived()) {
                const auto until = Clock::now() + 2s;
                mine.sleep_unless(arrived, until);
                if (!arrived() && Clock::now() >= until) ++timeouts;
            }
            if (rank == 1) mine.set(0, round);
        }
    };
    std::thread one([&] { play(1); });
    play(0);
    one.join();
    EXPECT_EQ(timeouts.load(), 0) << "a ring went unheard: a sleeper waited for its timeout";
}

TEST(Doorbell, ASleeperWithNothingToWaitForReturnsAtOnce) {
    Flags flags;
    ddp::shm::ProgressFlags flags0 = flags.of(0);
    const auto start = Clock::now();
    EXPECT_TRUE(flags0.sleep_unless([] { return true; }, start + 5s));
    EXPECT_LT(Clock::now() - start, 4s);
}

TEST(Doorbell, ASleeperLeavesAtItsTimeoutWhenNothingRings) {
    Flags flags;
    ddp::shm::ProgressFlags flags0 = flags.of(0);
    const auto start = Clock::now();
    EXPECT_TRUE(flags0.sleep_unless([] { return false; }, start + 20ms));
    EXPECT_GE(Clock::now() - start, 20ms);
}

}  // namespace
