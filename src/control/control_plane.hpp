// The control plane of one communicator: it numbers collectives, holds each
// to its deadline, warns about stalls naming the ranks that have not joined,
// and after a timeout marks the communicator broken and tells the peers, so
// that nothing anywhere waits for ever. It runs on the host whatever the
// data plane is (see control/channel.hpp and src/planes/).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/contention.hpp"
#include "control/channel.hpp"
#include "util/collective_kind.hpp"
#include "control/hang_watchdog.hpp"
#include "control/peer_liveness.hpp"
#include "trace/call_trace.hpp"

namespace ddp {

/// The moment `seconds` from now, saturating at the clock's end instead of
/// overflowing (a timeout of 1e12 s means "for ever", not "already past").
Clock::time_point deadline_after(double seconds);

/// How a wait paces itself once the first microseconds have passed, where
/// its operation cannot sleep until a peer moves (an MPI request).
enum class WaitStyle {
    for_peers,  ///< agreement: peers may be far away; sleep briefly between tests
    /// data transfer: MPI progresses only while tested, so the wait keeps
    /// testing for as long as a transfer of a few MiB takes (as MPI's own
    /// blocking wait would), then tests after the shortest sleep the kernel
    /// grants. Never a yield: beside a CPU-bound process a yielding rank
    /// waits out the other's time slice (docs/benchmark.md, "Busy cores").
    for_data,
};

/// One collective in progress on this rank.
struct CallContext {
    CollectiveKind kind;
    uint64_t sequence;  ///< 1 for the communicator's first collective
    Clock::time_point started;
    Clock::time_point deadline;
    Clock::time_point stall_warning_at;
    bool stall_reported = false;
    CallLabel label;              ///< how messages name it
    uint64_t previous_kind = 0;   ///< the CollectiveKind of call sequence - 1 (0: none)
    CallLabel previous_label;     ///< and its label
    bool joined_by_all = false;   ///< agreement finished: every rank entered this call
};


class ControlPlane {
public:
    /// `hang_grace_s`: how long past a deadline a thread may stay inside
    /// the transport before the hang watchdog ends the process (0: never).
    /// `trace`: the communicator's, where calls are recorded, and whose
    /// flight recorder is dumped when the communicator breaks (one log line
    /// says why and where); nullptr for a control plane of set-up
    /// exchanges, which keeps a trace of its own. `name` is a
    /// sub-communicator's (ddp_comm_split), put before its stall reports and
    /// the reason it broke so that they say which communicator; "" for the
    /// world. `peer_dead_s`: how long a peer may stay stopped, or silent on
    /// another host, before a wait counts it as dead (see PeerLiveness).
    ControlPlane(ControlChannel& channel, double timeout_s, double stall_warning_s, double hang_grace_s,
                 trace::CallTrace* trace = nullptr, std::string name = {},
                 double peer_dead_s = default_peer_dead_s);
    ControlPlane(const ControlPlane&) = delete;
    ControlPlane& operator=(const ControlPlane&) = delete;

    /// Starts collective `kind`: numbers it and sets its deadline (the
    /// call's own timeout when > 0, else the communicator's). `for_binding`:
    /// a call a language binding makes for its own purposes, named apart
    /// from the user's (CallLabel). Throws DDP_ERR_TIMEOUT when the
    /// communicator is broken.
    CallContext begin(CollectiveKind kind, double call_timeout_s, bool for_binding = false);
    /// Marks the collective finished (peers asking are told so); `failed`
    /// when it ends with an error.
    void end(bool failed = false);

    /// Drives `pending` to completion within the call's deadline, reporting
    /// a stall once. Past the deadline, or when a peer gave up, it abandons
    /// the operation, marks the communicator broken and throws DDP_ERR_TIMEOUT.
    void wait(CallContext& call, std::unique_ptr<Pending> pending, WaitStyle style);

    /// Throws DDP_ERR_TIMEOUT (with the reason) once the communicator is
    /// broken, or when a peer's notice rules out a collective starting now.
    /// `may_poll`: whether this thread may receive control messages (not
    /// while the async worker may be inside the transport, below
    /// MPI_THREAD_MULTIPLE).
    void require_usable(bool may_poll = true);
    bool broken() const { return broken_.load(std::memory_order_acquire); }
    /// Breaks the communicator on purpose and tells the peers (ddp_comm_abort).
    void abort(const std::string& reason);
    /// Breaks the communicator because its GPU work failed or timed out and
    /// tells the peers; later calls fail with `failure` and `message`. From
    /// the watchdog's own thread (`on_caller_thread` false) the peers are
    /// told only at MPI_THREAD_MULTIPLE; below it they find out at their
    /// own timeout.
    void break_from_device(ddp_status failure, const std::string& message, bool on_caller_thread);
    /// Tells the peers that this rank takes part in no further collective.
    void announce_finalize();
    /// What stops the communicator's GPU work when it breaks on this rank
    /// (the device plane's stop_work), so that no kernel waits for peers
    /// that will not come. Set once, before the first collective.
    void on_break(std::function<void()> stop_device_work) { stop_device_work_ = std::move(stop_device_work); }

    /// What this rank is doing, as peers are told.
    PeerStatus status() const;
    /// The sub-communicator's name ("" for the world).
    const std::string& name() const { return name_; }

    /// Records that ranks passed different calls (the error says how).
    void record_mismatch(const CallContext& call);
    /// Holds ddp_finalize's wait for its peers to `deadline` (the hang
    /// watchdog) while the scope lives.
    WatchedWaits::Scope watch_finalize(Clock::time_point deadline) {
        return WatchedWaits::Scope(watched_, 0, 0, Clock::now(), deadline);
    }

private:
    /// Shows a wait that slept, from its first sleep, on the timeline
    /// ("asleep"), and tells the contention watch how a wait for data ended.
    void wait_ended(const CallContext& call, WaitStyle style, int64_t asleep_from_ns);
    [[noreturn]] void give_up(CallContext& call, std::unique_ptr<Pending> pending);
    /// As give_up, before the deadline: `dead` says which peer died.
    [[noreturn]] void peer_died(CallContext& call, std::unique_ptr<Pending> pending, const DeadPeer& dead);
    /// What this rank knows of the last call `rank` made: "its last call:
    /// allreduce #7, still inside it (it said so 0.8 s before)".
    std::string last_call_of(int rank, const CallContext& call);
    /// Abandons the call's operation and tells the peers why (`reason`,
    /// and the dead rank where one died); returns how long the call waited.
    double stop_call(CallContext& call, std::unique_ptr<Pending> pending, AbortNotice::Reason reason,
                     int dead_rank = -1);
    /// After stop_call: marks the call in the flight recorder and breaks the
    /// communicator with `message`.
    [[noreturn]] void break_call(CallContext& call, const std::string& message);
    /// pending->test(), or pending->sleep(*sleep_until) where one is given;
    /// when it throws, the operation is abandoned first, and a transport's
    /// failure is explained by a dead peer where one is found.
    bool test_or_abandon(CallContext& call, std::unique_ptr<Pending>& pending, Clock::time_point wait_started,
                         std::optional<Clock::time_point> sleep_until = {});
    /// A transport failing under a call (MPI_Isend to a node that went away)
    /// is often the first sign of a dead peer: when this rank or a peer
    /// finds one within half a second, the call fails naming it, as on
    /// every other survivor; else the caller rethrows the failure.
    void explain_transport_failure(CallContext& call, Clock::time_point wait_started);
    /// Throws when a peer gave up on this very call: it may have sent all
    /// this rank needed before its deadline passed (a small allreduce rides
    /// in one round), and no rank may report success for a collective its
    /// peers report as timed out.
    void fail_if_a_peer_gave_up(const CallContext& call);
    /// The failure a peer's notice means for this rank's collective number
    /// `sequence`, if any (a peer that finalized after call 5 still lets
    /// call 5 finish here).
    std::optional<std::string> failure_from_notice(uint64_t sequence);
    /// Abandons `pending`, marks the communicator broken with `message` (the
    /// first reason stays) and throws the first reason (DDP_ERR_TIMEOUT
    /// unless the device plane broke it with another status).
    [[noreturn]] void fail_broken(const std::string& message, std::unique_ptr<Pending> pending);
    void report_stall(CallContext& call);
    /// "rank 1 has not joined (its last call: barrier #4, finished)", ...
    std::string who_is_missing(const CallContext& call, Clock::time_point answer_deadline);
    void mark_broken(const std::string& message, ddp_status status = DDP_ERR_TIMEOUT);
    /// Sends `notice` to every peer; one that says this rank stopped also
    /// stops the GPU work.
    void tell_peers(const AbortNotice& notice);

    ControlChannel& channel_;
    std::function<void()> stop_device_work_;
    const std::string name_;
    const std::string prefix_;  ///< "NAME: " before messages; "" for the world
    std::unique_ptr<trace::CallTrace> own_trace_;  ///< a set-up exchange's (no communicator's given)
    trace::CallTrace& trace_;
    ContentionWatch contention_;
    /// How long a wait spins before it sleeps (where its operation can);
    /// set once, in the constructor.
    Clock::duration spin_ = hot_spin;
    const double timeout_s_;
    const double stall_warning_s_;
    std::atomic<uint64_t> sequence_{0};
    std::atomic<uint64_t> user_calls_{0};  ///< the user's calls so far (CallLabel)
    std::atomic<uint64_t> kind_{0};
    std::atomic<uint64_t> label_{0};       ///< the last call's CallLabel word
    std::atomic<bool> in_call_{false};
    std::atomic<bool> broken_{false};
    mutable std::mutex broken_mutex_;
    std::string broken_message_;  // guarded by broken_mutex_
    ddp_status broken_status_ = DDP_ERR_TIMEOUT;  // guarded by broken_mutex_
    WatchedWaits watched_;
    PeerLiveness liveness_;
    bool watching_call_ = false;  ///< begin() entered watched_ (touched by the calling thread only)
};

/// Ends the control plane's record of a call however the call leaves.
class CallScope {
public:
    explicit CallScope(ControlPlane& control) : control_(control), uncaught_(std::uncaught_exceptions()) {}
    ~CallScope() { control_.end(std::uncaught_exceptions() > uncaught_); }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

private:
    ControlPlane& control_;
    int uncaught_;
};

}  // namespace ddp
