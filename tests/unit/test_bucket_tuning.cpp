// The bucket tuner's rules: which candidates a list gets, and how the agreed
// durations pick one (the same durations always pick the same candidate).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/bucket_tuning.hpp"

namespace {

ddp_tensor tensor(int64_t count) {
    static float storage;
    return ddp_tensor{&storage, count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
}

// Records `samples` calls of durations `us[i]` for candidate i, as calls in turn.
bool explore(ddp::BucketTuning& tuning, const std::vector<uint64_t>& us) {
    bool made = false;
    for (int round = 0; round < ddp::BucketTuning::samples; ++round)
        for (size_t i = 0; i < us.size(); ++i) {
            const size_t candidate = tuning.next();
            EXPECT_EQ(candidate, i);
            tuning.started();
            made = tuning.record(candidate, us[i] + static_cast<uint64_t>(round)) || made;
        }
    return made;
}

TEST(BucketTuning, AListThatEveryCandidatePlansAlikeIsDecidedAtOnce) {
    const std::vector<ddp_tensor> list(200, tensor(256));  // 200 KiB: one bucket with every candidate
    const ddp::BucketTuning tuning(list);
    EXPECT_TRUE(tuning.decided());
    EXPECT_EQ(tuning.plan(tuning.next()).steps.size(), 1u);
}

TEST(BucketTuning, TheFastestCandidateIsKept) {
    const std::vector<ddp_tensor> list(2500, tensor(256));  // 2.5 MB: 10 buckets of 256 KiB, 3 of 1 MiB, or one
    ddp::BucketTuning tuning(list);
    ASSERT_FALSE(tuning.decided());
    EXPECT_EQ(tuning.plan(0).steps.size(), 10u);
    EXPECT_EQ(tuning.plan(1).steps.size(), 3u);
    EXPECT_EQ(tuning.plan(2).steps.size(), 1u);
    EXPECT_TRUE(explore(tuning, {800, 900, 700}));
    ASSERT_TRUE(tuning.decided());
    EXPECT_EQ(tuning.next(), 2u);
    EXPECT_EQ(tuning.bucket_bytes(tuning.next()), int64_t{4} << 20);
    EXPECT_FALSE(tuning.record(0, 1));  // later durations change nothing
    EXPECT_EQ(tuning.next(), 2u);
}

TEST(BucketTuning, UnmeasuredCallsAreNotCounted) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    for (int call = 0; call < 10; ++call) {
        tuning.started();
        EXPECT_FALSE(tuning.record(tuning.next(), 0));
    }
    EXPECT_FALSE(tuning.decided());
}

// A candidate fast once and slow twice (big buckets beside other work) loses
// to one that is steadily a little slower than that once.
TEST(BucketTuning, TheMedianCallCountsNotTheFastest) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    const std::vector<std::vector<uint64_t>> rounds = {{900, 950, 500}, {900, 950, 4600}, {910, 950, 4500}};
    bool made = false;
    for (const auto& round : rounds)
        for (uint64_t us : round) {
            const size_t candidate = tuning.next();
            tuning.started();
            made = tuning.record(candidate, us) || made;
        }
    ASSERT_TRUE(made);
    EXPECT_EQ(tuning.next(), 0u) << tuning.summary();
}

TEST(BucketTuning, AHugeListIsNeverOneBucket) {
    const std::vector<ddp_tensor> list(40000, tensor(256));  // 40 MB, over the whole-list cap
    const ddp::BucketTuning tuning(list);
    EXPECT_GT(tuning.plan(tuning.next()).steps.size(), 1u);
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(tuning.bucket_bytes(i), int64_t{16} << 20);
}

}  // namespace
