// Decides how a tensor list travels: which tensors are packed together into
// fusion buckets (saving per-call latency) and which are reduced in place
// (saving the copy's memory bandwidth). Every rank computes the same plan
// from the same list, so the plan itself never crosses the wire.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ddp/ddp.h"

namespace ddp {

/// The order in which tensors fill buckets, and so the order of the steps.
enum class PlanOrder {
    list,     ///< as listed: a call's tensors are all ready at once
    reverse,  ///< last first: a backward pass produces the last layer's gradients first
};

struct FusionPolicy {
    /// Largest bucket in bytes; <= 0 turns fusion off.
    int64_t bucket_bytes;
    /// Tensors with fewer bytes than this are fused; the others go in place.
    int64_t small_bytes;
    PlanOrder order = PlanOrder::list;
};

/// The policy libddp uses for a given bucket size (see fusion_plan.cpp).
FusionPolicy policy_for_bucket_bytes(int64_t bucket_bytes);

/// The policy of persistent gradient buckets (the reducer): every tensor
/// goes in a bucket (the buckets are the gradients' storage, so nothing
/// runs in place), filled in reverse order so that the buckets complete in
/// the order a backward pass marks them.
FusionPolicy gradient_bucket_policy(int64_t bucket_bytes);

/// One plane operation: a bucket of several tensors, or one tensor in place.
struct PlanStep {
    ddp_dtype dtype;
    bool fused;
    int64_t elements;      ///< total elements moved by this step
    size_t first_member;   ///< range in FusionPlan::members
    size_t member_count;
};

struct FusionPlan {
    std::vector<PlanStep> steps;
    std::vector<int64_t> members;  ///< tensor indices, grouped by step
    int64_t largest_bucket_bytes = 0;

    std::span<const int64_t> members_of(const PlanStep& step) const {
        return {members.data() + step.first_member, step.member_count};
    }
};

/// Plans a validated list. Empty tensors get no step. Steps come in the
/// order their buckets close (an in-place tensor at once): with
/// PlanOrder::reverse, roughly the order a backward pass completes them.
FusionPlan plan_fusion(std::span<const ddp_tensor> tensors, const FusionPolicy& policy);

/// Whether the list's non-empty tensors (two or more, one dtype) lie back
/// to back in memory in list order: views of one flat buffer, as
/// ComponentArrays or a destructured model give.
bool lies_in_one_region(std::span<const ddp_tensor> tensors);

/// The plan for a list that lies in one region on every rank: one step
/// over all of it, run in place (no bucket).
FusionPlan one_region_plan(std::span<const ddp_tensor> tensors);

/// A list that lies in one region as one tensor over all of it.
ddp_tensor one_region_tensor(std::span<const ddp_tensor> tensors);

}  // namespace ddp
