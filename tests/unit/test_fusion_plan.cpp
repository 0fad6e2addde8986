// The fusion planner: which tensors share a bucket and which go in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/fusion_plan.hpp"

namespace {

ddp_tensor tensor(int64_t count, ddp_dtype dtype = DDP_DTYPE_F32) {
    static float storage;
    return ddp_tensor{&storage, count, dtype, DDP_DEVICE_CPU, 0, 0};
}

std::vector<int64_t> members(const ddp::FusionPlan& plan, size_t step) {
    auto span = plan.members_of(plan.steps[step]);
    return {span.begin(), span.end()};
}

TEST(FusionPlan, SmallTensorsShareBucketsUpToTheBucketSize) {
    std::vector<ddp_tensor> list(10, tensor(256));  // 1 KiB each
    const auto plan = ddp::plan_fusion(list, ddp::FusionPolicy{4096, 2048});
    ASSERT_EQ(plan.steps.size(), 3u);  // 4 + 4 + 2 tensors
    EXPECT_TRUE(plan.steps[0].fused);
    EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(plan.steps[0].elements, 1024);
    EXPECT_EQ(members(plan, 2), (std::vector<int64_t>{8, 9}));
    EXPECT_EQ(plan.largest_bucket_bytes, 4096);
}

TEST(FusionPlan, LargeTensorsGoInPlace) {
    std::vector<ddp_tensor> list{tensor(16), tensor(100000), tensor(16)};
    const auto plan = ddp::plan_fusion(list, ddp::FusionPolicy{1 << 20, 64 * 1024});
    ASSERT_EQ(plan.steps.size(), 2u);
    EXPECT_FALSE(plan.steps[0].fused);
    EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{1}));
    EXPECT_TRUE(plan.steps[1].fused);
    EXPECT_EQ(members(plan, 1), (std::vector<int64_t>{0, 2}));
}

TEST(FusionPlan, BucketsHoldOneDtype) {
    std::vector<ddp_tensor> list{tensor(4, DDP_DTYPE_F32), tensor(4, DDP_DTYPE_F64),
                                 tensor(4, DDP_DTYPE_F32), tensor(4, DDP_DTYPE_F64)};
    const auto plan = ddp::plan_fusion(list, ddp::FusionPolicy{1 << 20, 64 * 1024});
    ASSERT_EQ(plan.steps.size(), 2u);
    for (const auto& step : plan.steps) {
        for (int64_t index : plan.members_of(step)) EXPECT_EQ(list[static_cast<size_t>(index)].dtype, step.dtype);
    }
}

TEST(FusionPlan, EmptyTensorsGetNoStepAndALoneSmallTensorNoCopy) {
    std::vector<ddp_tensor> list{tensor(0), tensor(8), tensor(0)};
    const auto plan = ddp::plan_fusion(list, ddp::FusionPolicy{1 << 20, 64 * 1024});
    ASSERT_EQ(plan.steps.size(), 1u);
    EXPECT_FALSE(plan.steps[0].fused);
    EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{1}));
    EXPECT_EQ(plan.largest_bucket_bytes, 0);
    EXPECT_TRUE(ddp::plan_fusion({}, ddp::FusionPolicy{1 << 20, 1024}).steps.empty());
}

TEST(FusionPlan, FusionOffSendsEveryTensorAlone) {
    std::vector<ddp_tensor> list(5, tensor(3));
    const auto plan = ddp::plan_fusion(list, ddp::policy_for_bucket_bytes(-1));
    ASSERT_EQ(plan.steps.size(), 5u);
    for (const auto& step : plan.steps) EXPECT_FALSE(step.fused);
}

TEST(FusionPlan, EveryTensorAppearsExactlyOnce) {
    std::vector<ddp_tensor> list;
    for (int i = 0; i < 1000; ++i) list.push_back(tensor(1 + (i * 7919) % 50000, i % 3 ? DDP_DTYPE_F32 : DDP_DTYPE_BF16));
    const auto plan = ddp::plan_fusion(list, ddp::policy_for_bucket_bytes(1 << 20));
    std::vector<int> seen(list.size(), 0);
    for (int64_t index : plan.members) ++seen[static_cast<size_t>(index)];
    for (int count : seen) EXPECT_EQ(count, 1);
    for (const auto& step : plan.steps) {
        if (step.fused) {
            const int64_t width = step.dtype == DDP_DTYPE_BF16 ? 2 : 4;
            EXPECT_LE(step.elements * width, 1 << 20);
        }
    }
}

// The reducer's buckets: a backward pass marks the last gradients first, so
// buckets fill from the end of the list, and every tensor, large or small,
// lives in a bucket (the buckets are the gradients' storage).
TEST(GradientBuckets, FillInReverseOrderAndHoldEveryTensor) {
    std::vector<ddp_tensor> list{tensor(256), tensor(256), tensor(100000), tensor(256), tensor(256), tensor(256)};
    const auto plan = ddp::plan_fusion(list, ddp::gradient_bucket_policy(2048));  // 2 small tensors a bucket
    ASSERT_EQ(plan.steps.size(), 4u);
    EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{5, 4}));
    EXPECT_EQ(members(plan, 1), (std::vector<int64_t>{3}));  // the large one closes its bucket
    EXPECT_EQ(members(plan, 2), (std::vector<int64_t>{2}));
    EXPECT_EQ(members(plan, 3), (std::vector<int64_t>{1, 0}));
    EXPECT_EQ(plan.steps[2].elements, 100000);
}

// With several dtypes, buckets come in the order they close, which is the
// order a backward pass completes them: a dtype with few gradients does not
// hold back the others' buckets until the end.
TEST(GradientBuckets, ComeInTheOrderTheyComplete) {
    std::vector<ddp_tensor> list{tensor(4, DDP_DTYPE_F64), tensor(256), tensor(256), tensor(256),
                                 tensor(256), tensor(4, DDP_DTYPE_F64)};
    const auto plan = ddp::plan_fusion(list, ddp::gradient_bucket_policy(2048));
    ASSERT_EQ(plan.steps.size(), 3u);
    EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(plan.steps[0].dtype, DDP_DTYPE_F32);
    EXPECT_EQ(members(plan, 1), (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(members(plan, 2), (std::vector<int64_t>{5, 0}));
    EXPECT_EQ(plan.steps[2].dtype, DDP_DTYPE_F64);
}

// Buckets are compared in elements: a tensor near INT64_MAX bytes must not
// wrap the sum round into a small bucket (the reducer's "larger than memory" case).
TEST(GradientBuckets, HugeTensorsGetTheirOwnBucketsWithoutOverflow) {
    const int64_t huge = (int64_t{1} << 60) - 1;
    std::vector<ddp_tensor> list{tensor(huge, DDP_DTYPE_F64), tensor(huge, DDP_DTYPE_F64), tensor(3, DDP_DTYPE_F64)};
    for (int64_t bucket_bytes : {int64_t{0}, int64_t{1} << 20, INT64_MAX}) {
        const auto plan = ddp::plan_fusion(list, ddp::gradient_bucket_policy(bucket_bytes));
        ASSERT_EQ(plan.steps.size(), 3u) << bucket_bytes;
        EXPECT_EQ(members(plan, 0), (std::vector<int64_t>{2})) << bucket_bytes;
        EXPECT_EQ(plan.steps[1].elements, huge) << bucket_bytes;
        EXPECT_EQ(plan.steps[2].elements, huge) << bucket_bytes;
    }
}

}  // namespace

#include "core/plan_cache.hpp"

namespace {

// Alternating lists (gradients, then a metric) keep their plans: 0.1's one-slot
// cache planned again on every call.
TEST(PlanCache, AlternatingListsArePlannedOnce) {
    ddp::PlanCache cache(2);
    const std::vector<ddp_tensor> gradients = {tensor(10), tensor(20)}, metric = {tensor(1, DDP_DTYPE_F64)};
    const std::vector<uint64_t> gradient_words = {1, 10, 20}, metric_words = {1, 1};
    const auto policy = ddp::policy_for_bucket_bytes(1 << 20);
    for (int step = 0; step < 3; ++step) {
        cache.plan(gradient_words, gradients, policy);
        cache.plan(metric_words, metric, policy);
    }
    EXPECT_EQ(cache.misses(), 2u);
    // A third list evicts the least recently used one (the gradients).
    const std::vector<uint64_t> other_words = {1, 5};
    cache.plan(other_words, metric, policy);
    cache.plan(metric_words, metric, policy);
    EXPECT_EQ(cache.misses(), 3u);
    EXPECT_EQ(cache.plan(gradient_words, gradients, policy).steps.size(), 1u);
    EXPECT_EQ(cache.misses(), 4u);
}

}  // namespace
