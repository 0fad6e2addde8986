// Where a rank sleeps when its peers have not moved: a spinning rank whose
// peer waits for a core burns the time slice the peer needs (issue 31: 4-30x
// slower than MPI beside CPU-bound work). Two 32-bit words in the shared
// segment, as an event count: a sleeper counts itself in, looks once more,
// and sleeps in the kernel (futex) on the ring count; a rank that moved a
// flag rings only when someone sleeps, so a quiet machine pays a fence and
// one load per flag.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "util/pending.hpp"

namespace ddp::shm {

class Doorbell {
public:
    /// The doorbell's two words at `words` (8 bytes, 4-aligned, zeroed, in
    /// memory every rank maps).
    explicit Doorbell(std::byte* words);

    /// After a flag store: wakes the sleepers, if any (then true: it took a
    /// system call).
    bool ring();
    /// Sleeps until a ring or `until`, unless `moved()`, asked once this
    /// rank counts as a sleeper, finds there is no need (a ring between
    /// the two cannot be missed). False where the kernel refuses to sleep
    /// (no futex, a seccomp filter): the caller paces itself instead.
    bool sleep_unless(const std::function<bool()>& moved, Clock::time_point until);

private:
    std::atomic_ref<uint32_t> rings() const { return std::atomic_ref<uint32_t>(*rings_); }
    std::atomic_ref<uint32_t> sleepers() const { return std::atomic_ref<uint32_t>(*sleepers_); }
    uint32_t* rings_;
    uint32_t* sleepers_;
};

}  // namespace ddp::shm
