#include "core/plan_cache.hpp"

#include <algorithm>

namespace ddp {

const FusionPlan& PlanCache::plan(std::span<const uint64_t> words, std::span<const ddp_tensor> tensors,
                                  const FusionPolicy& policy) {
    auto hit = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& entry) {
        return std::equal(entry.words.begin(), entry.words.end(), words.begin(), words.end());
    });
    if (hit != entries_.end()) {
        entries_.splice(entries_.begin(), entries_, hit);
        return entries_.front().plan;
    }
    ++misses_;
    if (entries_.size() >= capacity_) entries_.pop_back();
    entries_.push_front(Entry{std::vector<uint64_t>(words.begin(), words.end()), plan_fusion(tensors, policy)});
    return entries_.front().plan;
}

}  // namespace ddp
