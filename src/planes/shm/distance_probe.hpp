// How far apart the ranks' cores sit, measured by passing a token round
// them through one flag per rank (each pass: rank 0 -> 1 -> ... -> 0), the
// quickest pass's time divided by its hops. Cores on one CCX (one shared L3) pass
// a cache line in ~35-110 ns; cores on different CCDs or sockets take
// ~200-650 ns, and a virtual machine's host may move its vCPUs between
// such placements at any time, so the plane measures again every so often
// (shm_plane.cpp). Every rank times the passes itself and decides for itself.
#pragma once

#include <cstdint>

#include "planes/shm/progress_flags.hpp"
#include "util/pending.hpp"

namespace ddp::shm {

class DistanceProbe {
public:
    /// Above this a hop is "far": measured near placements stayed below 110 ns.
    static constexpr double far_hop_ns = 150;

    /// `first_token`: larger than any token an earlier probe on these flags
    /// passed (flags only grow); the probe uses `passes` of them from there.
    DistanceProbe(ProgressFlags& flags, size_t which, int rank, int size, uint64_t first_token, int passes)
        : flags_(&flags), which_(which), rank_(rank), size_(size), first_token_(first_token), passes_(passes) {}

    /// Goes as far as the peers allow (spinning a few µs for the token: a
    /// pass slowed by returning to the caller would read as far); true once
    /// this rank has passed the token every time.
    bool advance();

    /// ns per hop, once advance() returned true (passes >= 2).
    double hop_ns() const { return hop_ns_; }

private:
    uint64_t token(int pass) const { return first_token_ + static_cast<uint64_t>(pass); }
    bool may_pass(int pass) const;

    ProgressFlags* flags_;  ///< a pointer, so that a probe can be assigned
    size_t which_;
    int rank_, size_;
    uint64_t first_token_;
    int passes_;
    int passed_ = 0;  ///< tokens this rank has passed on
    Clock::time_point last_passed_;
    double hop_ns_ = 0;
};

}  // namespace ddp::shm
