// The in-process plane of a local group (ddp_init_local), driven directly:
// ranks meet in a data round because each starts its k-th operation there,
// and a rank whose k-th operation is another one is an error on every rank,
// never one rank's buffers combined with another operation's.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "planes/transport.hpp"
#include "util/error.hpp"

namespace {

using namespace ddp;

/// Drives `pending` to its end; the error it throws, or "" when it finishes.
std::string run(std::unique_ptr<Pending> pending) {
    try {
        const auto give_up = Clock::now() + std::chrono::seconds(10);
        while (!pending->test()) {
            if (Clock::now() > give_up) return "never finished";
            pending->sleep(give_up);
        }
        return "";
    } catch (const Error& error) {
        EXPECT_EQ(error.status(), DDP_ERR_INTERNAL) << error.what();
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

}  // namespace
