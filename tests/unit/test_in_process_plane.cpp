// The in-process plane of a local group (ddp_init_local), driven directly:
// ranks meet in a data round because each starts its k-th operation there,
// and a rank whose k-th operation is another one is an error on every rank,
// never one rank's buffers combined with another operation's.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "planes/local/in_process_plane.hpp"
#include "planes/transport.hpp"
#include "util/error.hpp"

namespace {

using namespace ddp;

/// Drives `pending` to its end; the error it throws (DDP_ERR_INTERNAL), or
/// "" when it finishes.
std::string run(std::unique_ptr<Pending> pending, ddp_status expected = DDP_ERR_INTERNAL) {
    try {
        const auto give_up = Clock::now() + std::chrono::seconds(10);
        while (!pending->test()) {
            if (Clock::now() > give_up) return "never finished";
            pending->sleep(give_up);
        }
        return "";
    } catch (const Error& error) {
        EXPECT_EQ(error.status(), expected) << error.what();
        return error.what();
    }
}

TEST(InProcessPlane, RanksThatMeetInARoundWithDifferentOperationsFailInsteadOfMixingBuffers) {
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(2);
    std::vector<float> sums(100, 1.0f), params(50, 7.0f);
    std::vector<std::string> errors(2);
    {
        std::jthread rank0([&] {
            errors[0] =
                run(transports[0]->host_planes().front()->start_allreduce(sums.data(), 100, DDP_DTYPE_F32, DDP_OP_SUM));
        });
        std::jthread rank1(
            [&] { errors[1] = run(transports[1]->host_planes().front()->start_broadcast(params.data(), 200, 0)); });
    }
    for (const std::string& error : errors) {
        EXPECT_NE(error.find("data operation #1 of the local group is not the same on ranks 0 and 1"),
                  std::string::npos)
            << error;
    }
    EXPECT_EQ(sums, std::vector<float>(100, 1.0f)) << "nothing was combined";
    EXPECT_EQ(params, std::vector<float>(50, 7.0f));
}

TEST(InProcessPlane, RanksThatMeetWithTheSameOperationCombine) {
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(2);
    std::vector<std::vector<float>> data = {std::vector<float>(100, 1.0f), std::vector<float>(100, 2.0f)};
    std::vector<std::string> errors(2);
    {
        std::vector<std::jthread> ranks;
        for (size_t r = 0; r < 2; ++r)
            ranks.emplace_back([&, r] {
                errors[r] = run(transports[r]->host_planes().front()->start_allreduce(data[r].data(), 100,
                                                                                      DDP_DTYPE_F32, DDP_OP_SUM));
            });
    }
    EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
    EXPECT_EQ(data[0], std::vector<float>(100, 3.0f));
    EXPECT_EQ(data[1], std::vector<float>(100, 3.0f));
}

local::InProcessPlane& plane_of(Transport& transport) {
    return dynamic_cast<local::InProcessPlane&>(*transport.host_planes().front());
}

/// Drives rank r's `exchanges[r]` on 0..n-1 local ranks at once; each rank's error.
std::vector<std::string> exchange_on(std::vector<Exchange> exchanges, ddp_status expected = DDP_ERR_INTERNAL) {
    const size_t n = exchanges.size();
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(static_cast<int>(n));
    std::vector<std::string> errors(n);
    std::vector<std::jthread> ranks;
    for (size_t r = 0; r < n; ++r)
        ranks.emplace_back([&, r] { errors[r] = run(plane_of(*transports[r]).start_exchange(exchanges[r]), expected); });
    ranks.clear();  // joined
    return errors;
}

std::byte* bytes(std::vector<int32_t>& v, size_t at = 0) { return reinterpret_cast<std::byte*>(v.data() + at); }

// Sends and receives as each rank lists them, of other sizes per pair, a
// rank sending to itself, two messages between one pair kept in order, and
// a rank that sends nothing.
TEST(InProcessPlane, AnExchangeMovesEachSendIntoTheReceiveThatMeetsIt) {
    std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {10, 20}, got_a(4, 0), got_b(3, 0), got_c(2, 0);
    std::vector<Exchange> exchanges(3);
    // Rank 0 sends 2 ints to rank 1, then 1 int to rank 1, then 2 to itself; rank 1 sends 2 ints to rank 2.
    exchanges[0].sends = {{1, bytes(a), 8}, {1, bytes(a, 2), 4}, {0, bytes(a, 3), 8}};
    exchanges[0].receives = {{0, bytes(got_a), 8}};
    exchanges[1].sends = {{2, bytes(b), 8}};
    exchanges[1].receives = {{0, bytes(got_b), 8}, {0, bytes(got_b, 2), 4}};
    exchanges[2].receives = {{1, bytes(got_c), 8}};
    EXPECT_EQ(exchange_on(exchanges), (std::vector<std::string>{"", "", ""}));
    EXPECT_EQ(got_a, (std::vector<int32_t>{4, 5, 0, 0}));
    EXPECT_EQ(got_b, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(got_c, (std::vector<int32_t>{10, 20}));
}

TEST(InProcessPlane, AReceiveNoSendMeetsIsAnErrorOnEveryRankNeverAWrongCopy) {
    std::vector<int32_t> a = {1, 2}, got(2, 0);
    std::vector<Exchange> exchanges(2);
    exchanges[0].sends = {{1, bytes(a), 4}};
    exchanges[1].receives = {{0, bytes(got), 8}};
    for (const std::string& error : exchange_on(exchanges))
        EXPECT_NE(error.find("rank 1 receives 8 bytes from rank 0, which sends 4 bytes to it"), std::string::npos)
            << error;
    EXPECT_EQ(got, (std::vector<int32_t>{0, 0}));
}

TEST(InProcessPlane, ASendNoReceiveMeetsIsAnErrorOnEveryRank) {
    std::vector<int32_t> a = {1, 2}, got(1, 0);
    std::vector<Exchange> exchanges(2);
    exchanges[0].sends = {{1, bytes(a), 4}, {1, bytes(a, 1), 4}};
    exchanges[1].receives = {{0, bytes(got), 4}};
    for (const std::string& error : exchange_on(exchanges))
        EXPECT_NE(error.find("rank 0 sends 2 messages to rank 1, which receives 1"), std::string::npos) << error;
    EXPECT_EQ(got, (std::vector<int32_t>{0}));
}

TEST(InProcessPlane, ReceivesOverlappingAcrossRanksAreRefusedOnEveryRank) {
    std::vector<int32_t> a = {1}, b = {2}, shared(1, 0);
    std::vector<Exchange> exchanges(2);
    exchanges[0].sends = {{1, bytes(a), 4}};
    exchanges[0].receives = {{1, bytes(shared), 4}};
    exchanges[1].sends = {{0, bytes(b), 4}};
    exchanges[1].receives = {{0, bytes(shared), 4}};
    for (const std::string& error : exchange_on(exchanges, DDP_ERR_INVALID_ARGUMENT))
        EXPECT_NE(error.find("ranks 0 and 1 passed overlapping buffers"), std::string::npos) << error;
    EXPECT_EQ(shared, (std::vector<int32_t>{0}));
}

// start_exchange_on_root (a group across processes x threads moves its
// threads' sends and receives on thread 0): the root sees every rank's
// exchange, and no rank's operation ends before it has worked.
TEST(InProcessPlane, TheRootWorksOnEveryRanksExchangeAndTheOthersEndAfterIt) {
    constexpr int size = 3, root = 1;
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(size);
    std::vector<std::vector<int32_t>> sends, recvs(size, std::vector<int32_t>(1, 0));
    for (int r = 0; r < size; ++r) sends.push_back({r + 1});
    std::vector<std::string> errors(size);
    std::vector<std::vector<int32_t>> seen_at_end(size);
    {
        std::vector<std::jthread> ranks;
        for (int r = 0; r < size; ++r)
            ranks.emplace_back([&, r] {
                const auto at = static_cast<size_t>(r);
                // Rank r receives rank r + 1's int: the root copies them all.
                Exchange mine;
                mine.sends = {{(r + size - 1) % size, bytes(sends[at]), 4}};
                mine.receives = {{(r + 1) % size, bytes(recvs[at]), 4}};
                auto work = [](std::span<const Exchange* const> by_rank) {
                    for (size_t p = 0; p < by_rank.size(); ++p)
                        for (const Meeting& meeting : meetings_of(by_rank, 0, p))
                            std::memcpy(meeting.receive->data, meeting.send->data, meeting.receive->bytes);
                };
                errors[at] = run(plane_of(*transports[at]).start_exchange_on_root(mine, 0, root, work));
                seen_at_end[at] = recvs[at];
            });
    }
    for (int r = 0; r < size; ++r) {
        EXPECT_EQ(errors[static_cast<size_t>(r)], "");
        EXPECT_EQ(seen_at_end[static_cast<size_t>(r)], std::vector<int32_t>{(r + 1) % size + 1}) << "rank " << r;
    }
}

}  // namespace
