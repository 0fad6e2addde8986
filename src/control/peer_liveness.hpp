// Dead peers found in seconds on one host, whatever the timeout: a peer's
// process (its pid and start time, exchanged when the channel starts) is
// looked up in /proc while a wait lasts. A process that is gone, or a
// zombie, is dead at once; one stopped (SIGSTOP, a debugger) for longer than
// the bound counts as dead too, since it cannot take part. A peer that is
// merely slow or busy computing keeps running and is never called dead.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

/// How long a peer may stay stopped before it counts as dead (DDP_PEER_DEAD_S).
constexpr double default_peer_dead_s = 4;

/// Who a rank's process is, as its peers on the same host can check it.
struct ProcessIdentity {
    uint64_t pid = 0;
    uint64_t start_ticks = 0;  ///< its start time (/proc's clock ticks): a reused pid is another process
    uint64_t host_key = 0;     ///< equal on processes that share a host (name, boot, pid namespace)
};

/// This process's identity.
ProcessIdentity this_process();

class PeerLiveness {
public:
    /// `peers`: every rank's identity, by rank (empty: unknown, nothing is
    /// checked); `rank`: this one; `stopped_bound_s`: how long a stopped
    /// peer may stay stopped.
    PeerLiveness(std::vector<ProcessIdentity> peers, int rank, double stopped_bound_s);

    /// A sentence naming the first peer on this host that is dead now
    /// ("rank 1 (pid 4242 on host a) exited"), or nothing. Reads /proc once
    /// per peer on this host.
    std::optional<std::string> dead_peer(std::chrono::steady_clock::time_point now);

private:
    struct Peer {
        int rank;
        ProcessIdentity identity;
        std::optional<std::chrono::steady_clock::time_point> stopped_since;
    };
    std::vector<Peer> here_;
    double stopped_bound_s_;
    std::string host_;
};

}  // namespace ddp
