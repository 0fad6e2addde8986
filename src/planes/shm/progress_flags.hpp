// The progress flags in a shared segment: per rank, counters that only grow
// (the last step or round it posted, reduced, finished reading), each on a
// cache line of its own and written by its rank only. A flag's release
// store publishes what the rank wrote before it to the peer that reads it,
// and rings the segment's doorbell for peers asleep on the flags.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "planes/shm/doorbell.hpp"

namespace ddp::shm {

/// Flags cannot share a cache line: each is written by one rank only.
constexpr size_t cache_line = 64;

class ProgressFlags {
public:
    /// Rank r's flag `which` lies at first + r × rank_stride + which × cache_line.
    ProgressFlags(std::byte* first, size_t rank_stride, Doorbell doorbell, int rank, int size)
        : first_(first), rank_stride_(rank_stride), doorbell_(doorbell), rank_(rank), size_(size) {}

    uint64_t get(int rank, size_t which) const {
        return std::atomic_ref<uint64_t>(*at(rank, which)).load(std::memory_order_acquire);
    }
    /// This rank's flag `which` becomes `value`, and sleeping peers hear it.
    void set(size_t which, uint64_t value) {
        store(which, value);
        doorbell_.ring();
    }
    /// set() in two halves, for a caller timing the store alone (distance_probe.cpp).
    void store(size_t which, uint64_t value) {
        std::atomic_ref<uint64_t>(*at(rank_, which)).store(value, std::memory_order_release);
    }
    bool ring() { return doorbell_.ring(); }
    /// Sleeps until a peer sets a flag or `until`, unless `moved()` finds
    /// that one already has; false where the kernel would not sleep.
    bool sleep_unless(const std::function<bool()>& moved, Clock::time_point until) {
        return doorbell_.sleep_unless(moved, until);
    }
    bool all_reached(size_t which, uint64_t value) const {
        for (int rank = 0; rank < size_; ++rank)
            if (get(rank, which) < value) return false;
        return true;
    }

private:
    uint64_t* at(int rank, size_t which) const {
        return reinterpret_cast<uint64_t*>(first_ + static_cast<size_t>(rank) * rank_stride_ + which * cache_line);
    }
    std::byte* first_;
    size_t rank_stride_;
    Doorbell doorbell_;
    int rank_, size_;
};

}  // namespace ddp::shm
