// A call's duration, carried in the next agreement message: every rank
// puts in its own duration of the call it measured, agreement takes the max
// over ranks, and so every rank learns the slowest rank's duration (the
// call's real cost) with no round trip of its own. The value waits here
// until the one who measured takes it: the bucket tuner
// (core/bucket_tuning.hpp), at its list's next tuned call, decides from
// these agreed values only, so that every rank makes the same choice.
#pragma once

#include <cstdint>
#include <utility>

namespace ddp {

class CarriedDuration {
public:
    /// This rank's duration of the call just run (µs, at least 1), for the
    /// next round to carry.
    void measured(uint64_t us) { outgoing_ = us > 0 ? us : 1; }
    /// The word this rank puts into a round: its measured duration, once; else 0.
    uint64_t take_outgoing() { return std::exchange(outgoing_, 0); }
    /// A round's agreed word (the max over ranks), kept if nonzero until taken.
    void agreed(uint64_t us) {
        if (us != 0) agreed_ = us;
    }
    /// The agreed duration not taken yet (0: none arrived), forgotten here.
    /// One taker only (core/collectives.cpp's run_tuned, which knows the
    /// call measured: PlanCache::timed_call), so no value goes to another.
    uint64_t take_agreed() { return std::exchange(agreed_, 0); }

private:
    uint64_t outgoing_ = 0;
    uint64_t agreed_ = 0;
};

}  // namespace ddp
