// One NCCL communicator: set up without blocking and held to a deadline
// (ncclCommInitRankConfig with blocking = 0, polled), its unique id created
// by rank 0 alone and sent over libddp's own host channel; aborted from any
// thread; destroyed in bounded time. NCCL forbids concurrent calls on one
// communicator, so every call on it holds its mutex (the enqueueing of a
// group, each poll, the abort).
//
// Data calls go to a launcher where NCCL has ncclCommSplit: a blocking split
// of the communicator, sharing its resources and its abort flag (the
// communicator is made with splitShare, so its other splits, ddp_comm_split's,
// share them too: an abort of one fails the family, as NCCL's docs say). On
// a non-blocking communicator NCCL launches every group from a new thread of
// its own (about 130 us a call on an H200, docs/gpu.md); a blocking one
// launches on the caller's thread. Aborting the set-up communicator raises
// the shared flag, which ends a launch or finalize that NCCL blocks in, so
// an abort never waits for one; a launch past its deadline is reported by
// launch_overdue() for the watchdog to abort.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"
#include "planes/nccl/nccl_library.hpp"

namespace ddp {

class ControlPlane;
struct CallContext;

class NcclComm {
public:
    /// Collective over `host`'s ranks. Throws DDP_ERR_TIMEOUT when setup
    /// does not finish by the call's deadline (NCCL is aborted first),
    /// DDP_ERR_BACKEND with NCCL's message when it fails.
    NcclComm(const NcclLibrary& nccl, ControlChannel& host, HostPlane& data, ControlPlane& control, CallContext& context);
    /// What split calls, before it aborts anything, when it fails.
    using Failing = std::function<void(ddp_status, const std::string&)>;
    /// ncclCommSplit of `parent`, collective over its ranks: the ranks of
    /// `color` (>= 0) ranked by `key`; a negative color takes part without
    /// joining (NCCL_SPLIT_NOCOLOR) and gets nullptr. Non-blocking, held to
    /// `deadline`. Throws DDP_ERR_UNSUPPORTED when the loaded NCCL has no
    /// ncclCommSplit (nothing else happens then). On a timeout
    /// (DDP_ERR_TIMEOUT) or an error (DDP_ERR_BACKEND, NCCL's message) it
    /// calls `failing` first (the owner fails the work it watches), then
    /// aborts the parent, which ends NCCL's split job, and then the new
    /// communicator if the job returned one, as NCCL's docs ask.
    static std::unique_ptr<NcclComm> split(NcclComm& parent, int color, int key, Clock::time_point deadline,
                                           const Failing& failing);
    ~NcclComm();
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    /// Makes the launcher (above); collective over the ranks, polled until
    /// `deadline`. Without ncclCommSplit (NCCL < 2.18.1) data calls stay on
    /// the non-blocking communicator. Fails as split does.
    void add_launcher(int rank, Clock::time_point deadline, const Failing& failing);
    /// The communicator that takes data calls (inside group()'s body).
    ncclComm_t get() const { return launcher_ != nullptr ? launcher_ : comm_; }
    const NcclLibrary& library() const { return nccl_; }

    /// Enqueues `body`'s NCCL calls as one group and, on a non-blocking
    /// communicator, waits (until `deadline`) for NCCL to accept them. On a
    /// failure the caller aborts NCCL (after failing the work it watches).
    void group(const std::function<void()>& body, Clock::time_point deadline, const char* what);
    /// Throws DDP_ERR_BACKEND naming `what` when an NCCL call failed.
    void check(ncclResult_t result, const char* what) const;
    /// NCCL's asynchronous error as a sentence, if one has happened.
    std::optional<std::string> async_error() const;
    /// Aborts the communicator (idempotent, from any thread): every NCCL
    /// operation on it ends, and it is released without waiting for peers.
    void abort();
    /// Whether a blocking launch has been in NCCL past its call's deadline.
    bool launch_overdue() const;
    bool aborted() const { return aborted_.load(std::memory_order_acquire); }

private:
    struct Adopt {};  // a communicator NCCL made: only split does this
public:
    NcclComm(Adopt, const NcclLibrary& nccl, ncclComm_t comm) : nccl_(nccl), comm_(comm) {}

private:
    enum class Settled { done, timed_out, aborted };
    /// Polls until the communicator has nothing in progress (its state in
    /// `state`), the deadline passes, or another thread aborts it.
    Settled settle(Clock::time_point deadline, ncclResult_t& state) const { return settle(comm_, deadline, state); }
    /// settle() of `comm`: this one, or one its split just made.
    Settled settle(ncclComm_t comm, Clock::time_point deadline, ncclResult_t& state) const;
    /// ncclCommSplit of this communicator with `config`, polled until
    /// `deadline`: the new handle (nullptr for no color). On a failure
    /// (its message starts with `where`), `failing`, then this communicator
    /// and the new one are aborted.
    ncclComm_t split_with(int color, int key, ncclConfig_t config, Clock::time_point deadline,
                          const Failing& failing, const std::string& where);
    /// Finalizes and destroys the launcher within destroy time; false (and
    /// aborted) when it did not finish.
    bool finish_launcher();

    const NcclLibrary& nccl_;
    ncclComm_t comm_ = nullptr;
    mutable std::mutex mutex_;  // every call on comm_
    ncclComm_t launcher_ = nullptr;  // set once, before any data call
    mutable std::mutex launch_mutex_;  // every call on launcher_
    std::atomic<Clock::rep> launch_deadline_{0};  // of a blocking launch in progress; 0: none
    std::mutex abort_mutex_;                      // abort() runs once, whole
    std::atomic<bool> aborted_{false};
};

}  // namespace ddp
