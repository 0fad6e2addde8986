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

// Records calls[i] as candidate `first + i`'s calls in a row, checking
// that each goes to it; whether the last one made the choice.
bool record_in_a_row(ddp::BucketTuning& tuning, const std::vector<std::vector<uint64_t>>& calls, size_t first = 0) {
    bool made = false;
    for (size_t i = 0; i < calls.size(); ++i)
        for (uint64_t us : calls[i]) {
            EXPECT_FALSE(made) << "decided before every candidate was timed";
            EXPECT_EQ(tuning.next(), first + i);
            made = tuning.record(first + i, us);
        }
    return made;
}

// Records, for each candidate i, a warm-up call of 5000 us and `samples`
// calls of durations `us[i]` (plus the call's index).
bool explore(ddp::BucketTuning& tuning, const std::vector<uint64_t>& us) {
    std::vector<std::vector<uint64_t>> calls(us.size(), std::vector<uint64_t>{5000});
    for (size_t i = 0; i < us.size(); ++i)
        for (uint64_t call = 1; call <= ddp::BucketTuning::samples; ++call) calls[i].push_back(us[i] + call);
    return record_in_a_row(tuning, calls);
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
    for (int call = 1; call < ddp::BucketTuning::unmeasured_limit; ++call)
        EXPECT_FALSE(tuning.record(tuning.next(), 0));
    EXPECT_FALSE(tuning.decided());
    EXPECT_EQ(tuning.next(), 0u);  // still trying the first candidate
    EXPECT_TRUE(explore(tuning, {800, 900, 700}));
}

// A candidate whose calls bring no duration (each failed alike on every
// rank) is left out after a few, and the others decide.
TEST(BucketTuning, ACandidateNeverMeasuredIsLeftOut) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    EXPECT_FALSE(tuning.record(0, 3000));  // one call measured (the warm-up), then none
    for (int call = 0; call < ddp::BucketTuning::unmeasured_limit; ++call) {
        ASSERT_EQ(tuning.next(), 0u) << "call " << call;
        EXPECT_FALSE(tuning.record(0, 0));
    }
    ASSERT_TRUE(record_in_a_row(tuning, {{900, 900, 900, 900}, {800, 800, 800, 800}}, 1));
    EXPECT_EQ(tuning.next(), 2u) << tuning.summary();
    EXPECT_NE(tuning.summary().find("256 KiB: not timed"), std::string::npos) << tuning.summary();
}

// A candidate's first call (a larger fusion buffer to grow, caches holding
// the last candidate's buffers) is not its cost: only the calls after it count.
TEST(BucketTuning, TheWarmUpCallIsNotCounted) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    // Counted, the warm-up would make candidate 0's median 700, over candidate 1's 600.
    ASSERT_TRUE(record_in_a_row(tuning, {{9000, 500, 500, 700}, {600, 600, 600, 600}, {800, 800, 800, 800}}));
    EXPECT_EQ(tuning.next(), 0u) << tuning.summary();
}

// A duration of a call run with another candidate than the one being tried
// (impossible while calls come in order) changes nothing.
TEST(BucketTuning, ADurationOfAnotherCandidateIsNotCounted) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    for (int call = 0; call < 10; ++call) EXPECT_FALSE(tuning.record(1, 100));
    EXPECT_EQ(tuning.next(), 0u);
    EXPECT_TRUE(explore(tuning, {800, 900, 700}));
    EXPECT_EQ(tuning.next(), 2u);
}

// A candidate fast once and slow twice (big buckets beside other work) loses
// to one that is steadily a little slower than that once.
TEST(BucketTuning, TheMedianCallCountsNotTheFastest) {
    const std::vector<ddp_tensor> list(2500, tensor(256));
    ddp::BucketTuning tuning(list);
    // Per candidate in a row: a warm-up call, then three timed ones.
    ASSERT_TRUE(record_in_a_row(tuning, {{3000, 900, 900, 910}, {3000, 950, 950, 950}, {3000, 500, 4600, 4500}}));
    EXPECT_EQ(tuning.next(), 0u) << tuning.summary();
}

TEST(BucketTuning, AHugeListIsNeverOneBucket) {
    const std::vector<ddp_tensor> list(40000, tensor(256));  // 40 MB, over the whole-list cap
    const ddp::BucketTuning tuning(list);
    EXPECT_GT(tuning.plan(tuning.next()).steps.size(), 1u);
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(tuning.bucket_bytes(i), int64_t{16} << 20);
}

}  // namespace
