// The last resort against a thread that never comes back from the MPI
// library. The waiting loops hold every wait to its deadline between tests,
// but a thread stuck inside one MPI call never checks again: Open MPI's TCP
// transport can deadlock itself closing the connection to a peer that died
// (docs/multinode.md). Past a wait's deadline plus a grace period, one
// process-wide thread writes one line naming the wait to stderr and aborts
// the process, as PyTorch's NCCL watchdog tears a process down, so that the
// launcher ends the job instead of leaving it hung for ever.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "control/channel.hpp"

namespace ddp {

/// A communicator's calls, as the watchdog sees them: only while a thread is
/// inside libddp (not while a reducer step is open and the caller computes
/// between its marks). Entries nest, and the caller's thread and the async
/// worker may wait on one call together: the watch ends when the last
/// leaves.
class WatchedWaits {
public:
    /// `grace_s` <= 0: never watched (DDP_HANG_WATCHDOG_S=off).
    WatchedWaits(int rank, double timeout_grace_s);
    ~WatchedWaits();
    WatchedWaits(const WatchedWaits&) = delete;
    WatchedWaits& operator=(const WatchedWaits&) = delete;

    /// A thread enters libddp for a call that must end by `deadline`:
    /// the collective of `kind` (a CollectiveKind, started at `started`)
    /// labelled `label` (CallLabel::word), or ddp_finalize for kind 0.
    /// Inside an earlier entry, the earlier one's deadline stands.
    void enter(uint64_t kind, uint64_t label, Clock::time_point started, Clock::time_point deadline);
    void leave();

    /// enter() at construction, leave() at destruction.
    class Scope {
    public:
        Scope(WatchedWaits& waits, uint64_t kind, uint64_t label, Clock::time_point started,
              Clock::time_point deadline)
            : waits_(waits) {
            waits_.enter(kind, label, started, deadline);
        }
        ~Scope() { waits_.leave(); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        WatchedWaits& waits_;
    };

private:
    friend class HangWatchdog;
    const int rank_;
    const double grace_s_;
    std::mutex mutex_;  // orders enter and leave; the watchdog reads only the atomics
    int waiters_ = 0;   // guarded by mutex_
    std::atomic<int64_t> grace_from_ns_{0};  ///< the later of the deadline and the entry; 0: not watched
    std::atomic<int64_t> deadline_ns_{0};
    std::atomic<int64_t> started_ns_{0};
    std::atomic<uint64_t> kind_{0}, label_{0};
};

/// The grace period when DDP_HANG_WATCHDOG_S is not set, and for ddp_init's
/// own steps (which run before the settings are known to be valid).
constexpr double default_hang_grace_s = 60;

/// The grace period from DDP_HANG_WATCHDOG_S: seconds > 0, or "0"/"off" (0:
/// no watchdog); default_hang_grace_s when unset. Throws
/// DDP_ERR_INVALID_ARGUMENT on other text.
double hang_grace_from_environment();

}  // namespace ddp
