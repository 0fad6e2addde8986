// The shard arithmetic through the public API: the header's test vectors,
// and the invariants over many (n, world, seed, epoch, drop_last, strategy).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "ddp/ddp.h"

namespace {

ddp_shard_options options(bool shuffle, uint64_t seed, uint64_t epoch, bool drop_last,
                          ddp_shard_strategy strategy) {
    ddp_shard_options opts;
    EXPECT_EQ(ddp_shard_options_init(&opts, sizeof opts), DDP_OK);
    opts.shuffle = shuffle;
    opts.seed = seed;
    opts.epoch = epoch;
    opts.drop_last = drop_last;
    opts.strategy = strategy;
    return opts;
}

std::vector<int64_t> shard(int64_t n, int32_t rank, int32_t world, const ddp_shard_options& opts) {
    int64_t count = -1;
    EXPECT_EQ(ddp_shard_count(n, world, &opts, &count), DDP_OK);
    std::vector<int64_t> out(static_cast<size_t>(count));
    int64_t written = -1;
    EXPECT_EQ(ddp_shard_indices(n, rank, world, &opts, out.data(), count, &written), DDP_OK)
        << ddp_last_error_message();
    EXPECT_EQ(written, count);
    return out;
}

using V = std::vector<int64_t>;

TEST(Shard, HeaderTestVectors) {
    const auto strided = options(true, 42, 0, false, DDP_SHARD_STRIDED);
    // With world = 1 and no padding, a strided shard is the order itself.
    EXPECT_EQ(shard(10, 0, 1, strided), (V{0, 9, 5, 8, 6, 4, 7, 2, 1, 3}));
    EXPECT_EQ(shard(10, 0, 1, options(true, 42, 1, false, DDP_SHARD_STRIDED)),
              (V{7, 5, 8, 0, 9, 6, 2, 1, 4, 3}));
    EXPECT_EQ(shard(10, 0, 3, strided), (V{0, 8, 7, 3}));
    EXPECT_EQ(shard(10, 1, 3, strided), (V{9, 6, 2, 0}));
    EXPECT_EQ(shard(10, 2, 3, strided), (V{5, 4, 1, 9}));
    EXPECT_EQ(shard(10, 1, 3, options(true, 42, 0, false, DDP_SHARD_CONTIGUOUS)), (V{6, 4, 7, 2}));
    EXPECT_EQ(shard(10, 2, 3, options(true, 42, 0, true, DDP_SHARD_STRIDED)), (V{5, 4, 1}));
    EXPECT_EQ(shard(10, 1, 3, options(false, 42, 0, false, DDP_SHARD_STRIDED)), (V{1, 4, 7, 0}));
}

TEST(Shard, DefaultsAreDistributedSamplers) {
    ddp_shard_options opts;
    ASSERT_EQ(ddp_shard_options_init(&opts, sizeof opts), DDP_OK);
    EXPECT_EQ(opts.struct_size, sizeof opts);
    EXPECT_EQ(opts.shuffle, 1);
    EXPECT_EQ(opts.seed, 0u);
    EXPECT_EQ(opts.epoch, 0u);
    EXPECT_EQ(opts.drop_last, 0);
    EXPECT_EQ(opts.strategy, DDP_SHARD_STRIDED);
    // NULL options mean the defaults.
    int64_t a[4], b[4], count = 0;
    ASSERT_EQ(ddp_shard_indices(10, 1, 3, nullptr, a, 4, &count), DDP_OK);
    ASSERT_EQ(ddp_shard_indices(10, 1, 3, &opts, b, 4, &count), DDP_OK);
    EXPECT_TRUE(std::equal(a, a + 4, b));
}

TEST(Shard, InvariantsOverManyCombinations) {
    for (int64_t n : {0, 1, 2, 3, 7, 10, 64, 101, 1000}) {
        for (int32_t world : {1, 2, 3, 4, 7, 16}) {
            for (uint64_t seed : {0ull, 42ull, 0xffffffffffffffffull}) {
                for (uint64_t epoch : {0ull, 1ull, 17ull}) {
                    for (bool drop_last : {false, true}) {
                        for (auto strategy : {DDP_SHARD_STRIDED, DDP_SHARD_CONTIGUOUS}) {
                            for (bool shuffle : {false, true}) {
                                SCOPED_TRACE(testing::Message() << "n=" << n << " world=" << world
                                                                << " seed=" << seed << " epoch=" << epoch
                                                                << " drop_last=" << drop_last
                                                                << " strategy=" << strategy
                                                                << " shuffle=" << shuffle);
                                const auto opts = options(shuffle, seed, epoch, drop_last, strategy);
                                const int64_t expected =
                                    drop_last ? n / world : (n + world - 1) / world;
                                std::multiset<int64_t> seen;
                                for (int32_t rank = 0; rank < world; ++rank) {
                                    const auto mine = shard(n, rank, world, opts);
                                    ASSERT_EQ(static_cast<int64_t>(mine.size()), expected);
                                    for (int64_t item : mine) {
                                        ASSERT_GE(item, 0);
                                        ASSERT_LT(item, n);
                                        seen.insert(item);
                                    }
                                }
                                const std::set<int64_t> distinct(seen.begin(), seen.end());
                                if (!drop_last) {
                                    EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << "cover";
                                }
                                if (drop_last || n % world == 0) {
                                    EXPECT_EQ(distinct.size(), seen.size()) << "disjoint";
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(Shard, EpochChangesTheOrderButSeedFixesIt) {
    const auto a = shard(1000, 0, 1, options(true, 7, 0, false, DDP_SHARD_STRIDED));
    const auto b = shard(1000, 0, 1, options(true, 7, 1, false, DDP_SHARD_STRIDED));
    const auto c = shard(1000, 0, 1, options(true, 7, 0, false, DDP_SHARD_STRIDED));
    EXPECT_NE(a, b);
    EXPECT_EQ(a, c);
}

TEST(Shard, FewerItemsThanRanks) {
    // Without drop_last every rank gets one item, wrapping around the order.
    const auto opts = options(false, 0, 0, false, DDP_SHARD_STRIDED);
    EXPECT_EQ(shard(2, 0, 4, opts), (V{0}));
    EXPECT_EQ(shard(2, 1, 4, opts), (V{1}));
    EXPECT_EQ(shard(2, 2, 4, opts), (V{0}));
    EXPECT_EQ(shard(2, 3, 4, opts), (V{1}));
    // With drop_last every rank gets none.
    int64_t count = -1;
    const auto dropping = options(false, 0, 0, true, DDP_SHARD_STRIDED);
    EXPECT_EQ(ddp_shard_count(2, 4, &dropping, &count), DDP_OK);
    EXPECT_EQ(count, 0);
    EXPECT_EQ(ddp_shard_indices(2, 3, 4, &dropping, nullptr, 0, &count), DDP_OK);
    EXPECT_EQ(count, 0);
}

TEST(Shard, NoItems) {
    int64_t count = -1;
    EXPECT_EQ(ddp_shard_indices(0, 0, 2, nullptr, nullptr, 0, &count), DDP_OK);
    EXPECT_EQ(count, 0);
}

TEST(Shard, BadArguments) {
    int64_t out[8], count = 0;
    EXPECT_EQ(ddp_shard_count(-1, 2, nullptr, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("n_items"), std::string::npos);
    EXPECT_EQ(ddp_shard_count(10, 0, nullptr, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("world"), std::string::npos);
    EXPECT_EQ(ddp_shard_count(10, 2, nullptr, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_shard_indices(10, 2, 2, nullptr, out, 8, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("rank"), std::string::npos);
    EXPECT_EQ(ddp_shard_indices(10, -1, 2, nullptr, out, 8, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ddp_shard_indices(10, 0, 2, nullptr, nullptr, 5, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("out"), std::string::npos);
    ddp_shard_options opts;
    ddp_shard_options_init(&opts, sizeof opts);
    opts.strategy = static_cast<ddp_shard_strategy>(9);
    EXPECT_EQ(ddp_shard_count(10, 2, &opts, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("strategy"), std::string::npos);
    ddp_shard_options_init(&opts, sizeof opts);
    opts.struct_size = 1000;
    EXPECT_EQ(ddp_shard_count(10, 2, &opts, &count), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("struct_size"), std::string::npos);
    EXPECT_EQ(ddp_shard_options_init(nullptr, sizeof(ddp_shard_options)), DDP_ERR_INVALID_ARGUMENT);
}

TEST(Shard, CapacityTooSmallReportsTheCountNeeded) {
    int64_t out[2], count = 0;
    EXPECT_EQ(ddp_shard_indices(10, 0, 3, nullptr, out, 2, &count), DDP_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(count, 4);
    EXPECT_NE(std::string(ddp_last_error_message()).find("capacity is 2"), std::string::npos);
}

}  // namespace
