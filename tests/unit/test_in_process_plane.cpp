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

// start_on_root (a group across processes x threads gathers and hands out
// its threads' blocks with it): the root reads every rank's input and
// writes every rank's output, and no rank's operation ends before it has.
TEST(InProcessPlane, TheRootWorksOnEveryRanksBuffersAndTheOthersEndAfterIt) {
    constexpr int size = 3, root = 1;
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(size);
    std::vector<std::vector<int32_t>> sends, recvs(size, std::vector<int32_t>(4, 0));
    for (int r = 0; r < size; ++r) sends.emplace_back(4, r + 1);
    std::vector<std::string> errors(size);
    std::vector<std::vector<int32_t>> seen_at_end(size);
    const local::Shape shape{DataOp::alltoall, 4, DDP_DTYPE_I32, 0};
    {
        std::vector<std::jthread> ranks;
        for (int r = 0; r < size; ++r)
            ranks.emplace_back([&, r] {
                // Rank r's output gets rank r + 1's input.
                auto work = [](std::span<const std::byte* const> in, std::span<std::byte* const> out) {
                    for (size_t p = 0; p < out.size(); ++p) std::memcpy(out[p], in[(p + 1) % out.size()], 16);
                };
                errors[static_cast<size_t>(r)] = run(plane_of(*transports[static_cast<size_t>(r)])
                                                         .start_on_root(sends[static_cast<size_t>(r)].data(),
                                                                        recvs[static_cast<size_t>(r)].data(), 16,
                                                                        shape, root, work));
                seen_at_end[static_cast<size_t>(r)] = recvs[static_cast<size_t>(r)];
            });
    }
    for (int r = 0; r < size; ++r) {
        EXPECT_EQ(errors[static_cast<size_t>(r)], "");
        EXPECT_EQ(seen_at_end[static_cast<size_t>(r)], std::vector<int32_t>(4, (r + 1) % size + 1)) << "rank " << r;
    }
}

TEST(InProcessPlane, OutputsOverlappingAcrossRanksAreRefusedOnEveryRankBeforeTheRootWorks) {
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(2);
    std::vector<int32_t> shared(4, 0), input(4, 5);
    std::atomic<bool> worked{false};
    std::vector<std::string> errors(2);
    {
        std::vector<std::jthread> ranks;
        for (size_t r = 0; r < 2; ++r)
            ranks.emplace_back([&, r] {
                errors[r] = run(plane_of(*transports[r])
                                    .start_on_root(input.data(), shared.data(), 16,
                                                   {DataOp::alltoall, 4, DDP_DTYPE_I32, 0}, 0,
                                                   [&](auto, auto) { worked = true; }),
                                DDP_ERR_INVALID_ARGUMENT);
            });
    }
    for (const std::string& error : errors)
        EXPECT_NE(error.find("ranks 0 and 1 passed overlapping buffers"), std::string::npos) << error;
    EXPECT_FALSE(worked);
}

}  // namespace
