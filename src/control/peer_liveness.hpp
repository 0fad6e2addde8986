// Dead peers found in seconds, whatever the timeout, while a wait lasts.
// On this host a peer's process (its pid and start time, exchanged when the
// channel starts) is looked up in /proc: one that is gone, or a zombie, is
// dead at once; one stopped (SIGSTOP, a debugger) for longer than the bound
// counts as dead too, since it cannot take part. On other hosts, which
// /proc cannot see, a wait that has lasted a second sends each peer a
// heartbeat question once a second, which its control thread answers: a
// peer silent for longer than the bound is dead (or stopped, or cut off).
// A peer that is merely slow or busy computing keeps answering and is never
// called dead.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/pending.hpp"

namespace ddp {

class ControlChannel;

/// How long a peer may stay stopped, or silent across hosts, before it
/// counts as dead (DDP_PEER_DEAD_S): past a network outage of a few seconds
/// and TCP's retransmissions after it (a 4 s flap took about 7 s to heal on
/// simulated nodes), within the 15 s a dead node may cost.
constexpr double default_peer_dead_s = 10;

/// Who a rank's process is, as its peers can check it.
struct ProcessIdentity {
    uint64_t pid = 0;
    uint64_t start_ticks = 0;  ///< its start time (/proc's clock ticks): a reused pid is another process
    uint64_t host_key = 0;     ///< equal on processes that share a host (name, boot, pid namespace)
    std::string host;          ///< the host's name, for messages (at most 64 bytes)

    /// As the words the channel exchanges (identity_words of them), and back.
    static constexpr size_t words = 11;
    std::vector<uint64_t> to_words() const;
    static ProcessIdentity from_words(std::span<const uint64_t> words);
};

/// This process's identity.
ProcessIdentity this_process();

/// A peer found dead: its rank and a sentence saying so.
struct DeadPeer {
    int rank;
    std::string sentence;  ///< "rank 1 (pid 4242 on host a) exited"
};

class PeerLiveness {
public:
    /// Watches `channel`'s peers (its processes(); none when empty);
    /// `bound_s`: how long a peer may stay stopped or silent.
    PeerLiveness(ControlChannel& channel, double bound_s);

    /// The first peer found dead now, or nothing. `wait_started`: when the
    /// current wait began (heartbeats start a second into a wait, and a
    /// peer counts as silent only once they have gone unanswered for the
    /// bound). Reads /proc once per peer on this host; call it about ten
    /// times a second.
    std::optional<DeadPeer> dead_peer(Clock::time_point now, Clock::time_point wait_started);

    /// "rank 2 (pid 4242 on host b)", or "rank 2" where its process is unknown.
    std::string who(int rank) const;

private:
    struct Peer {
        int rank;
        std::optional<Clock::time_point> stopped_since;
    };
    std::optional<DeadPeer> dead_here(Peer& peer, Clock::time_point now);
    std::optional<DeadPeer> silent_away(int rank, Clock::time_point now);

    ControlChannel& channel_;
    std::vector<ProcessIdentity> processes_;
    std::vector<Peer> here_;
    std::vector<int> away_;
    double bound_s_;
    Clock::duration ping_interval_;
    Clock::time_point wait_started_{};
    std::optional<Clock::time_point> pinging_since_;  ///< in the current wait
    Clock::time_point next_ping_{};
};

}  // namespace ddp
