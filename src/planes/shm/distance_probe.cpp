#include "planes/shm/distance_probe.hpp"

#include <algorithm>
#include <chrono>

namespace ddp::shm {

namespace {
/// How long advance() spins for the token before it returns to its caller.
constexpr auto spin_limit = std::chrono::microseconds(20);
}  // namespace

bool DistanceProbe::may_pass(int pass) const {
    if (rank_ != 0) return flags_->get(rank_ - 1, which_) >= token(pass);
    return pass == 0 || flags_->get(size_ - 1, which_) >= token(pass - 1);
}

bool DistanceProbe::advance() {
    const auto give_back_at = Clock::now() + spin_limit;
    while (passed_ < passes_) {
        if (!may_pass(passed_)) {
            if (Clock::now() > give_back_at) return false;
            continue;
        }
        flags_->store(which_, token(passed_));
        // The token came round once since this rank last passed it: one
        // ring. The least ring counts: the first may hold a late peer's
        // arrival, any may hold a preemption.
        const auto now = Clock::now();
        if (passed_ > 0) {
            const double ring_ns = std::chrono::duration<double, std::nano>(now - last_passed_).count();
            hop_ns_ = passed_ == 1 ? ring_ns / size_ : std::min(hop_ns_, ring_ns / size_);
        }
        last_passed_ = now;
        // After the clock: the ring's fence waits for the store to leave this
        // core, and a wake (a system call) must not count as distance.
        if (flags_->ring()) last_passed_ = Clock::now();
        ++passed_;
    }
    return true;
}

}  // namespace ddp::shm
