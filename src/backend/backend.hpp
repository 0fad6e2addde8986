// What a backend provides, in two planes:
//  - the data plane moves a tensor's bytes: non-blocking operations on one
//    contiguous buffer, each returning a Pending that the caller drives to
//    completion, so that a deadline covers every step of a collective;
//  - the control plane's transport: the small host-memory exchanges that
//    agreement, stall reports, abort notices and finalization are built on
//    (src/control/).
// Tensor lists, fusion and agreement are written once, on top of this.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ddp/ddp.h"

namespace ddp {

class DevicePlane;

using Clock = std::chrono::steady_clock;

/// An operation a backend has started. test() advances it and returns true
/// once it has finished; it throws ddp::Error when the backend reports one.
/// Until then the buffers it was started on belong to the backend.
class Pending {
public:
    virtual ~Pending() = default;
    virtual bool test() = 0;
};

/// What one rank was last doing, as peers are told when they ask.
struct PeerStatus {
    uint64_t sequence = 0;   ///< the number of the last collective it entered (1-based; 0: none)
    uint64_t kind = 0;       ///< that collective's CollectiveKind
    bool in_call = false;    ///< whether it is still inside that collective
};

/// A message a rank sends to all its peers when it stops taking part: it
/// gave up on a collective (a timeout), was aborted, or is finalizing.
struct AbortNotice {
    enum class Reason : uint64_t { gave_up = 0, aborted = 1, finalizing = 2, device_failed = 3 };
    int from_rank = -1;
    uint64_t sequence = 0;  ///< the sender's last collective (its number)
    uint64_t kind = 0;      ///< and its CollectiveKind
    Reason reason = Reason::gave_up;
};

/// The most data bytes start_max_u64_carrying takes: a latency-bound
/// message on every transport (shared memory's eager limit is 4 KiB).
constexpr int64_t max_carried_bytes = 2048;

/// The most elements one rank's shard of a reduce_scatter step may hold
/// (within one MPI count); the C boundary refuses larger shards.
constexpr int64_t max_shard_elements = (int64_t{1} << 30) - 1;

class Backend {
public:
    virtual ~Backend() = default;

    // Topology.
    virtual const char* name() const = 0;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual int local_rank() const = 0;
    virtual int local_size() const = 0;
    /// Whether a background thread may call this backend (MPI thread level).
    virtual bool allows_background_thread() const = 0;
    /// Whether two threads may call it at the same time (MPI_THREAD_MULTIPLE).
    virtual bool allows_concurrent_calls() const = 0;

    // Data plane. Each returns nullptr when the operation finished at once.
    /// In-place allreduce; op is SUM, PROD, MIN or MAX (AVG is done above).
    virtual std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype,
                                                     ddp_op op) = 0;
    /// In-place reduce into root's buffer; other ranks' buffers are unchanged.
    virtual std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op,
                                                  int root) = 0;
    virtual std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) = 0;
    /// Every rank's `count` elements of `send`, in rank order, into `recv`
    /// (size() × count elements). `send` may be recv + rank() × count (in
    /// place); otherwise the two do not overlap. A backend without it says
    /// DDP_ERR_UNSUPPORTED.
    virtual std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype);
    /// Reduces every rank's `send` (size() × count elements) with `op` (SUM,
    /// PROD, MIN or MAX) and leaves block rank() of the result, `count`
    /// elements, in `recv`. The buffers do not overlap. A backend without it
    /// says DDP_ERR_UNSUPPORTED.
    virtual std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count,
                                                          ddp_dtype dtype, ddp_op op);

    // Control plane transport (host memory, small messages).
    /// Element-wise maximum of `values` across ranks, written back into
    /// `values` when the Pending finishes. The backend works on its own copy,
    /// so `values` may go away if the Pending is abandoned.
    virtual std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) = 0;
    /// start_max_u64 that also allreduces `carried` (in place, element-wise
    /// `op`, at most max_carried_bytes) in the same messages, so that a small
    /// allreduce costs agreement's round trip and no other. The data is
    /// written back when the Pending finishes and means something only if
    /// the words show that every rank passed equal words.
    virtual std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                            ddp_dtype dtype, ddp_op op) = 0;
    /// Every rank's `words` (any length), indexed by rank, into `by_rank`
    /// when the Pending finishes. `by_rank` must outlive the Pending.
    virtual std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                         std::vector<std::vector<uint64_t>>& by_rank) = 0;
    /// Keeps an operation that a timeout left unfinished until finalize, so
    /// that its buffers outlive whatever the backend may still write.
    virtual void abandon(std::unique_ptr<Pending> pending) = 0;

    /// Starts answering peers' status questions and receiving abort notices
    /// in the background when the thread level allows it. `status` is read
    /// from that thread; it must outlive the backend's finalize().
    virtual void start_control(const std::function<PeerStatus()>& status) = 0;
    /// Receives pending control messages on the calling thread (the
    /// fallback when no background thread may do it). Cheap; call it often.
    virtual void poll_control() = 0;
    /// The first abort notice a peer sent, if any has arrived (a peer that
    /// stopped outranks an earlier one that only finalized).
    virtual std::optional<AbortNotice> abort_notice() = 0;
    /// Tells every peer that this rank gave up; never blocks.
    virtual void send_abort(const AbortNotice& notice) = 0;
    /// Asks every peer what it is doing; an entry stays empty for a peer
    /// that did not answer by `deadline` (dead, or busy outside libddp
    /// without a background thread). The own rank's entry stays empty.
    virtual std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline) = 0;
    /// When a control message (a question, an answer, late or not, a
    /// notice) last arrived from `peer`; empty when none has. A peer silent
    /// now but heard from during the call is slow (a lossy or congested
    /// network), not dead.
    virtual std::optional<Clock::time_point> last_heard_from(int peer) = 0;

    /// Whether a background thread answers peers' questions (so a peer that
    /// does not answer is dead or hung, not merely busy computing).
    virtual bool answers_in_background() const = 0;

    /// A non-blocking barrier on the control channel: it finishes when
    /// every rank has reached finalize. Only then may MPI be finalized
    /// without risking a hang.
    virtual std::unique_ptr<Pending> start_finalize_barrier() = 0;
    /// Releases the backend. With `peers_present` false nothing collective
    /// is called (MPI is left running so the process can still exit).
    virtual void finalize(bool peers_present) = 0;

    /// Where device buffers travel on the GPU (nccl); nullptr when they are
    /// staged through host memory instead.
    virtual DevicePlane* device_plane() { return nullptr; }

    // Sub-communicators.
    /// The smallest rank on this rank's node: equal exactly on the ranks
    /// that share a node, so it serves as the node's color for split().
    virtual int node_leader() const = 0;
    /// The ranks passing the same `color` (>= 0), ranked by `key` then by
    /// rank, as a new backend with data and control channels of its own;
    /// nullptr on a rank passing a negative color. Collective over this
    /// backend's ranks; called once agreement has seen every rank in the
    /// call, so that the transport's own blocking steps (MPI_Comm_split)
    /// find every peer there. What can be polled is held to `deadline`.
    virtual std::unique_ptr<Backend> split(int color, int key, Clock::time_point deadline) = 0;
};

std::unique_ptr<Backend> make_self_backend();

/// Starts or adopts MPI; mpi_comm_fortran is DDP_NO_MPI_COMM for the world.
/// Throws DDP_ERR_UNSUPPORTED when libddp was built without MPI.
std::unique_ptr<Backend> make_mpi_backend(int64_t mpi_comm_fortran);

/// Whether an MPI launcher started this process, or MPI is already running.
bool mpi_launch_detected();

/// Whether the environment shows an MPI launcher (mpirun, Hydra, PMIx).
bool launched_by_mpi_launcher();

}  // namespace ddp
