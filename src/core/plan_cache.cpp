#include "core/plan_cache.hpp"

#include <algorithm>

namespace ddp {

PlanCache::Entry* PlanCache::find(std::span<const uint64_t> words) {
    auto hit = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& entry) {
        return std::equal(entry.words.begin(), entry.words.end(), words.begin(), words.end());
    });
    if (hit == entries_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, hit);
    return &entries_.front();
}

PlanCache::Entry& PlanCache::add(std::span<const uint64_t> words) {
    ++misses_;
    if (entries_.size() >= capacity_) entries_.pop_back();
    entries_.push_front(Entry{std::vector<uint64_t>(words.begin(), words.end()), {}, nullptr});
    return entries_.front();
}

const FusionPlan& PlanCache::plan(std::span<const uint64_t> words, std::span<const ddp_tensor> tensors,
                                  const FusionPolicy& policy) {
    if (Entry* entry = find(words)) return entry->plan;
    Entry& entry = add(words);
    entry.plan = plan_fusion(tensors, policy);
    return entry.plan;
}

const std::shared_ptr<BucketTuning>& PlanCache::tuning(std::span<const uint64_t> words,
                                                        std::span<const ddp_tensor> tensors) {
    if (Entry* entry = find(words)) return entry->tuning;
    Entry& entry = add(words);
    entry.tuning = std::make_shared<BucketTuning>(tensors);
    return entry.tuning;
}

}  // namespace ddp
