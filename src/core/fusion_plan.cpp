#include "core/fusion_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "util/dtype.hpp"

namespace ddp {

namespace {
// Below this size one more plane operation costs more than copying the tensor
// into a bucket and back (see bench/ for the measurements behind it).
constexpr int64_t small_tensor_bytes = 64 * 1024;
}  // namespace

FusionPolicy policy_for_bucket_bytes(int64_t bucket_bytes) {
    return FusionPolicy{bucket_bytes, std::min(bucket_bytes, small_tensor_bytes)};
}

FusionPolicy gradient_bucket_policy(int64_t bucket_bytes) {
    return FusionPolicy{bucket_bytes, std::numeric_limits<int64_t>::max(), PlanOrder::reverse};
}

FusionPlan plan_fusion(std::span<const ddp_tensor> tensors, const FusionPolicy& policy) {
    FusionPlan plan;
    // Open buckets by dtype: members and their element total.
    struct OpenBucket {
        std::vector<int64_t> members;
        int64_t elements = 0;
    };
    std::map<ddp_dtype, OpenBucket> open;

    auto emit = [&plan](ddp_dtype dtype, bool fused, int64_t elements,
                        std::span<const int64_t> members) {
        plan.steps.push_back(PlanStep{dtype, fused, elements, plan.members.size(), members.size()});
        plan.members.insert(plan.members.end(), members.begin(), members.end());
        if (fused)
            plan.largest_bucket_bytes = std::max(
                plan.largest_bucket_bytes, elements * static_cast<int64_t>(element_size(dtype)));
    };
    auto close = [&emit](ddp_dtype dtype, OpenBucket& bucket) {
        if (bucket.members.empty()) return;
        // A bucket of one tensor would only add a copy.
        emit(dtype, bucket.members.size() > 1, bucket.elements, bucket.members);
        bucket = OpenBucket{};
    };

    for (size_t k = 0; k < tensors.size(); ++k) {
        const size_t i = policy.order == PlanOrder::reverse ? tensors.size() - 1 - k : k;
        const ddp_tensor& tensor = tensors[i];
        if (tensor.count == 0) continue;
        const int64_t size = static_cast<int64_t>(element_size(dtype_of(tensor)));
        const int64_t bytes = tensor.count * size;
        const int64_t index = static_cast<int64_t>(i);
        if (policy.bucket_bytes <= 0 || bytes >= policy.small_bytes) {
            emit(dtype_of(tensor), false, tensor.count, std::span(&index, 1));
            continue;
        }
        OpenBucket& bucket = open[dtype_of(tensor)];
        // In elements, so nothing overflows: a bucket never exceeds
        // bucket_bytes unless it holds one tensor, whose bytes validation bounded.
        if (bucket.elements + tensor.count > policy.bucket_bytes / size) close(dtype_of(tensor), bucket);
        bucket.members.push_back(index);
        bucket.elements += tensor.count;
    }
    for (auto& [dtype, bucket] : open) close(dtype, bucket);
    return plan;
}

bool lies_in_one_region(std::span<const ddp_tensor> tensors) {
    const std::byte* next = nullptr;
    int32_t dtype = -1;
    size_t members = 0;
    for (const ddp_tensor& tensor : tensors) {
        if (tensor.count == 0) continue;
        if (next != nullptr && (tensor.data != next || tensor.dtype != dtype)) return false;
        next = static_cast<const std::byte*>(tensor.data) + byte_size(tensor);
        dtype = tensor.dtype;
        ++members;
    }
    return members >= 2;
}

FusionPlan one_region_plan(std::span<const ddp_tensor> tensors) {
    FusionPlan plan;
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].count != 0) plan.members.push_back(static_cast<int64_t>(i));
    const ddp_tensor region = one_region_tensor(tensors);
    plan.steps.push_back(PlanStep{dtype_of(region), true, region.count, 0, plan.members.size()});
    return plan;  // largest_bucket_bytes stays 0: the step runs in place
}

ddp_tensor one_region_tensor(std::span<const ddp_tensor> tensors) {
    ddp_tensor region{};
    int64_t elements = 0;
    for (const ddp_tensor& tensor : tensors) {
        if (tensor.count == 0) continue;
        if (elements == 0) region = tensor;
        elements += tensor.count;
    }
    region.count = elements;
    return region;
}

}  // namespace ddp
