// The bucket size of a tensor list, chosen by measurement: the first calls
// of a list (one plan-cache entry) try a few candidate bucket sizes, each
// in a few calls in a row, and the fastest is kept for that list. Every rank
// makes the same choice with no message of its own: a call's duration rides
// in the next call's agreement (control/carried_duration.hpp) as the max
// over ranks and reaches the tuner at the next tuned call, before it
// chooses; the tuner only ever looks at such agreed values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/fusion_plan.hpp"

namespace ddp {

class BucketTuning {
public:
    /// Plans `tensors` with each candidate policy (candidates that give the
    /// same plan are tried once).
    explicit BucketTuning(std::span<const ddp_tensor> tensors);

    /// Whether the choice is made (at once when the candidates all plan alike).
    bool decided() const { return chosen_ < candidates_.size(); }
    /// The candidate the next call runs: the chosen one, or the one being tried.
    size_t next() const { return decided() ? chosen_ : trying_; }
    /// An agreed duration of a call run with candidate `index` (0: none
    /// measured it, not counted; after `unmeasured_limit` such calls in a
    /// row the candidate is left out). Returns true when this made the choice.
    bool record(size_t index, uint64_t agreed_us);

    const FusionPlan& plan(size_t index) const { return candidates_[index].plan; }
    /// The candidate's bucket size in bytes.
    int64_t bucket_bytes(size_t index) const { return candidates_[index].policy.bucket_bytes; }
    /// True once, on the first call after the choice (to announce it).
    bool first_chosen_call() { return decided() && !std::exchange(announced_, true); }
    /// "1 MiB: 812 us, 4 MiB: 700 us (chosen)" (medians), for the log.
    std::string summary() const;

    /// Calls each candidate is timed before choosing (the median of them
    /// counts), after one more call that warms it up and is not counted.
    static constexpr int samples = 3;
    /// Calls in a row with no duration (each failed alike on every rank)
    /// after which the candidate being tried is left out, so that a list
    /// whose calls with it fail does not try it for ever.
    static constexpr int unmeasured_limit = 2 * (samples + 1);

private:
    struct Candidate {
        FusionPolicy policy;
        FusionPlan plan;
        std::vector<uint64_t> durations_us;  // agreed durations recorded, the warm-up's first
    };
    static uint64_t median_us(const Candidate& candidate);
    /// Moves on from the candidate being tried; after the last, chooses.
    bool next_candidate();

    std::vector<Candidate> candidates_;
    size_t trying_ = 0;
    int unmeasured_ = 0;  // calls in a row of the candidate being tried with no duration
    size_t chosen_ = SIZE_MAX;
    bool announced_ = false;
};

}  // namespace ddp
