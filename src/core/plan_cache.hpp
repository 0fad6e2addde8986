// The fusion plans of the last few distinct calls, so that a training loop
// alternating between lists (gradients, then a metric, then gradients)
// plans each list once instead of on every call; for a list whose bucket
// size is chosen by measurement, the tuner that holds its candidate plans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "core/bucket_tuning.hpp"
#include "core/fusion_plan.hpp"

namespace ddp {

class PlanCache {
public:
    explicit PlanCache(size_t capacity) : capacity_(capacity) {}

    /// The plan for the call described by `words` (agreement's encoding,
    /// compared in full: a hash collision must never pick a wrong plan),
    /// planning and remembering it when it is not among the last ones.
    const FusionPlan& plan(std::span<const uint64_t> words, std::span<const ddp_tensor> tensors,
                           const FusionPolicy& policy);

    /// The bucket tuner of the call described by `words` (a call with no
    /// fusion_bytes of its own), made when it is not among the last ones.
    /// Shared: the call whose duration is on its way (timed_call) may
    /// outlive the entry.
    const std::shared_ptr<BucketTuning>& tuning(std::span<const uint64_t> words, std::span<const ddp_tensor> tensors);

    /// The last tuned call, whose duration is on its way (carried in the
    /// next agreement round): its tuner and the candidate it ran.
    struct TimedCall {
        std::shared_ptr<BucketTuning> tuning;
        size_t candidate = 0;
    };
    TimedCall& timed_call() { return timed_call_; }

    /// How many calls had to plan (for tests and benchmarks).
    size_t misses() const { return misses_; }

private:
    struct Entry {
        std::vector<uint64_t> words;
        FusionPlan plan;
        std::shared_ptr<BucketTuning> tuning;
    };
    /// The entry for `words`, moved to the front; nullptr when absent.
    Entry* find(std::span<const uint64_t> words);
    /// A new front entry for `words` (the least recently used goes).
    Entry& add(std::span<const uint64_t> words);

    size_t capacity_;
    size_t misses_ = 0;
    std::list<Entry> entries_;  // most recently used first
    TimedCall timed_call_;
};

}  // namespace ddp
