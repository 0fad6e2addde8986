// The shm plane's far-placement pieces: the streaming copy (every length
// and alignment, bytes equal to memcpy's) and the distance probe (a token
// passed round threads standing for ranks, on flags laid out as in a
// segment).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "planes/shm/distance_probe.hpp"
#include "planes/shm/stream_copy.hpp"

namespace {

using ddp::shm::cache_line;

TEST(StreamCopy, EqualsMemcpyAtEveryLengthAndAlignment) {
    std::vector<std::byte> source(4096 + 64), target(4096 + 64), expected(4096 + 64);
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>(i * 7 + 3);
    for (size_t from = 0; from < 17; ++from)
        for (size_t to = 0; to < 17; ++to)
            for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{31}, size_t{100},
                                 size_t{4095}, size_t{4096}}) {
                std::fill(target.begin(), target.end(), std::byte{0xee});
                expected = target;
                std::memcpy(expected.data() + to, source.data() + from, bytes);
                ddp::shm::stream_copy(target.data() + to, source.data() + from, bytes);
                ASSERT_EQ(target, expected) << "from +" << from << " to +" << to << ", " << bytes << " bytes";
            }
}

/// `ranks` threads run one probe each on shared flags; every hop time back.
std::vector<double> probe_round(std::vector<std::byte>& flags_area, int ranks, uint64_t first_token, int passes) {
    std::vector<double> hop_ns(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank)
        threads.emplace_back([&, rank] {
            ddp::shm::ProgressFlags flags(flags_area.data(), cache_line,
                                          ddp::shm::Doorbell(flags_area.data() + ranks * cache_line), rank, ranks);
            ddp::shm::DistanceProbe probe(flags, 0, rank, ranks, first_token, passes);
            while (!probe.advance()) std::this_thread::yield();
            hop_ns[static_cast<size_t>(rank)] = probe.hop_ns();
        });
    for (std::thread& thread : threads) thread.join();
    return hop_ns;
}

TEST(DistanceProbe, EveryRankFinishesAndTimesItsHops) {
    for (int ranks : {2, 3}) {
        std::vector<std::byte> flags_area(static_cast<size_t>(ranks) * cache_line + cache_line);
        // Two probes on the same flags: the second's tokens follow the first's.
        for (uint64_t first_token : {uint64_t{1}, uint64_t{6}})
            for (double ns : probe_round(flags_area, ranks, first_token, 5)) EXPECT_GT(ns, 0) << ranks << " ranks";
    }
}

}  // namespace
