// The control channel of a communicator: its ranks (topology) and the small
// host-memory exchanges that agreement, stall reports, abort notices and
// finalization are built on. It carries no tensor data: that is the data
// planes' work (src/planes/). A transport (src/planes/<name>/) provides one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "control/agreement_route.hpp"
#include "control/peer_liveness.hpp"
#include "ddp/ddp.h"
#include "util/pending.hpp"

namespace ddp {

/// What one rank was last doing, as peers are told when they ask.
struct PeerStatus {
    uint64_t sequence = 0;   ///< the number of the last collective it entered (1-based; 0: none)
    uint64_t kind = 0;       ///< that collective's CollectiveKind
    bool in_call = false;    ///< whether it is still inside that collective
    uint64_t label = 0;      ///< that collective's CallLabel, as a word (how messages name it)
};

/// What a rank answers when a peer asks about its `part`: 0 for the rank
/// as a whole; k >= 1 for the k-th of the ranks it speaks for, where one
/// rank of a channel stands for several of a wider group (a process of
/// threads, planes/mixed/: part k is thread k - 1).
using StatusSource = std::function<PeerStatus(int part)>;

/// A message a rank sends to all its peers when it stops taking part: it
/// gave up on a collective (a timeout), was aborted, or is finalizing.
struct AbortNotice {
    enum class Reason : uint64_t { gave_up = 0, aborted = 1, finalizing = 2, device_failed = 3, peer_died = 4 };
    int from_rank = -1;
    uint64_t sequence = 0;  ///< the sender's last collective (its number)
    uint64_t kind = 0;      ///< and its CollectiveKind
    Reason reason = Reason::gave_up;
    int dead_rank = -1;     ///< peer_died: the rank the sender found dead
    uint64_t label = 0;     ///< the CallLabel of the sender's last collective, as a word
};

/// The notice a rank acts on, of the one it kept and one that `arrived`:
/// the first stays, except that a peer that stopped (gave up, aborted,
/// failed on its GPU) outranks one that merely finalized: the first may
/// break calls the second still lets finish.
inline std::optional<AbortNotice> notice_to_keep(const std::optional<AbortNotice>& kept,
                                                 const std::optional<AbortNotice>& arrived) {
    if (!kept) return arrived;
    if (arrived && kept->reason == AbortNotice::Reason::finalizing &&
        arrived->reason != AbortNotice::Reason::finalizing)
        return arrived;
    return kept;
}

/// What a peer last said it was doing, and when it said so.
struct HeardStatus {
    PeerStatus status;
    Clock::time_point when;
};

/// Agreement's default route: its start_max_u64_carrying.
class ControlChannel : public AgreementRoute {
public:
    virtual ~ControlChannel() = default;

    // name(): the transport's ("mpi", "self").

    // Topology.
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual int local_rank() const = 0;
    virtual int local_size() const = 0;
    /// How many of the ranks are threads of this process (a local group's,
    /// or this process's part of a group across processes x threads): they
    /// share its CPUs.
    virtual int ranks_in_this_process() const { return 1; }
    /// The smallest rank on this rank's node: equal exactly on the ranks
    /// that share a node, so it serves as the node's color for a split.
    virtual int node_leader() const = 0;
    /// Whether a background thread may call this channel (MPI thread level).
    virtual bool allows_background_thread() const = 0;
    /// Whether two threads may call it at the same time (MPI_THREAD_MULTIPLE).
    virtual bool allows_concurrent_calls() const = 0;

    /// Element-wise maximum of `values` across ranks, written back into
    /// `values` when the Pending finishes. The channel works on its own copy,
    /// so `values` may go away if the Pending is abandoned.
    virtual std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) = 0;
    // start_max_u64_carrying (AgreementRoute): start_max_u64 that also
    // allreduces a small buffer in the same messages.
    /// Every rank's `words` (any length), indexed by rank, into `by_rank`
    /// when the Pending finishes. `by_rank` must outlive the Pending.
    virtual std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                         std::vector<std::vector<uint64_t>>& by_rank) = 0;
    /// Keeps an operation that a timeout left unfinished (on this channel
    /// or on any data plane of its communicator) until finalize, so that its
    /// buffers outlive whatever the transport may still write.
    virtual void abandon(std::unique_ptr<Pending> pending) = 0;

    /// Starts answering peers' status questions and receiving abort notices
    /// in the background when the thread level allows it. `status` is read
    /// from that thread; it must outlive the transport's finalize().
    virtual void start_control(const StatusSource& status) = 0;
    /// Receives pending control messages on the calling thread (the
    /// fallback when no background thread may do it). Cheap; call it often.
    virtual void poll_control() = 0;
    /// The first abort notice a peer sent, if any has arrived (a peer that
    /// stopped outranks an earlier one that only finalized).
    virtual std::optional<AbortNotice> abort_notice() = 0;
    /// Tells every peer that this rank gave up; never blocks.
    virtual void send_abort(const AbortNotice& notice) = 0;
    /// Asks every peer what it is doing (its `part`, see StatusSource; 0
    /// but for a process of threads); an entry stays empty for a peer that
    /// did not answer by `deadline` (dead, or busy outside libddp without a
    /// background thread). The own rank's entry stays empty.
    virtual std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline, int part) = 0;
    /// When a control message (a question, an answer, late or not, a
    /// notice) last arrived from `peer`; empty when none has. A peer silent
    /// now but heard from during the call is slow (a lossy or congested
    /// network), not dead.
    virtual std::optional<Clock::time_point> last_heard_from(int peer) = 0;
    /// What `peer` last said it was doing (in an answer or a heartbeat's);
    /// empty when it never said.
    virtual std::optional<HeardStatus> last_status(int peer) = 0;
    /// Sends each of `peers` a heartbeat question, which its background
    /// thread answers (last_heard_from and last_status then move on); never
    /// blocks, and a dead peer's question is simply never answered.
    virtual void ping(std::span<const int> peers) = 0;
    /// Whether a background thread answers peers' questions (so a peer that
    /// does not answer is dead or hung, not merely busy computing).
    virtual bool answers_in_background() const = 0;
    /// Every rank's process, by rank, as exchanged when the channel started
    /// (for finding dead peers on this host); empty where unknown.
    virtual std::vector<ProcessIdentity> processes() const { return {}; }

    /// A non-blocking barrier on the control channel: it finishes when
    /// every rank has reached finalize. Only then may MPI be finalized
    /// without risking a hang.
    virtual std::unique_ptr<Pending> start_finalize_barrier() = 0;
};

}  // namespace ddp
