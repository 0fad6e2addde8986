// A call's duration, carried in the next agreement message: every rank
// puts in its own duration of the previous call, agreement takes the max
// over ranks, and so every rank learns the slowest rank's duration (the
// call's real cost) with no round trip of its own. The bucket tuner
// (core/bucket_tuning.hpp) decides from these agreed values only, so that
// every rank makes the same choice.
#pragma once

#include <cstdint>
#include <functional>

namespace ddp {

class CarriedDuration {
public:
    /// The agreed duration (µs, the max over ranks; 0: no rank measured it).
    using Sink = std::function<void(uint64_t agreed_us)>;

    /// Asks for the duration of the call just agreed on: `sink` gets it in
    /// the next agreement. Every rank must ask for the same calls.
    void expect(Sink sink) {
        sink_ = std::move(sink);
        local_us_ = 0;
    }
    /// This rank's duration of the expected call (at least 1 µs).
    void measured(uint64_t us) {
        if (sink_) local_us_ = us > 0 ? us : 1;
    }
    /// The word this rank puts into an agreement message; ends the wait.
    uint64_t take_outgoing(Sink& sink) {
        sink = std::move(sink_);
        sink_ = nullptr;
        const uint64_t us = local_us_;
        local_us_ = 0;
        return us;
    }

private:
    Sink sink_;
    uint64_t local_us_ = 0;
};

}  // namespace ddp
