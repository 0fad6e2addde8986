// The fusion plans of the last few distinct calls, so that a training loop
// alternating between lists (gradients, then a metric, then gradients)
// plans each list once instead of on every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

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

    /// How many calls had to plan (for tests and benchmarks).
    size_t misses() const { return misses_; }

private:
    struct Entry {
        std::vector<uint64_t> words;
        FusionPlan plan;
    };
    size_t capacity_;
    size_t misses_ = 0;
    std::list<Entry> entries_;  // most recently used first
};

}  // namespace ddp
