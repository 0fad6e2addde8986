#include "planes/nccl/nccl_comm.hpp"

#include <future>
#include <thread>

#include "control/control_plane.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {
// How long a healthy communicator's finalize may take before it is aborted.
constexpr double destroy_wait_s = 10;
// Polls of a non-blocking communicator spin this long, then sleep between tests.
constexpr auto hot_poll = std::chrono::microseconds(200);

/// A blocking launch's deadline in `slot` while it lasts (0: none), for the watchdog.
class LaunchDeadline {
public:
    LaunchDeadline(std::atomic<Clock::rep>& slot, Clock::time_point deadline) : slot_(slot) {
        if (deadline != Clock::time_point{}) slot_.store(deadline.time_since_epoch().count(), std::memory_order_release);
    }
    ~LaunchDeadline() { slot_.store(0, std::memory_order_release); }
    LaunchDeadline(const LaunchDeadline&) = delete;
    LaunchDeadline& operator=(const LaunchDeadline&) = delete;

private:
    std::atomic<Clock::rep>& slot_;
};

/// What rank 0 sends every rank: whether it could create the id, and the id.
struct UniqueIdMessage {
    uint64_t ok = 0;
    ncclUniqueId id{};
};
}  // namespace

NcclComm::NcclComm(const NcclLibrary& nccl, ControlChannel& host, HostPlane& data, ControlPlane& control, CallContext& context)
    : nccl_(nccl) {
    UniqueIdMessage message;
    std::string id_error;
    if (host.rank() == 0) {
        const ncclResult_t made = nccl.get_unique_id(&message.id);
        message.ok = made == ncclSuccess ? 1 : 0;
        if (made != ncclSuccess) id_error = nccl.describe(made, nullptr);
    }
    control.wait(context, data.start_broadcast(&message, sizeof message, 0), WaitStyle::for_peers);
    if (message.ok == 0)
        fail(DDP_ERR_BACKEND, host.rank() == 0 ? "ncclGetUniqueId failed: " + id_error
                                               : "rank 0 could not create the NCCL unique id (its ddp_init says why)");

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;    // setup is polled against the deadline below
    config.splitShare = 1;  // its splits (the launcher) share its resources and abort flag
    const ncclResult_t started = nccl.comm_init_rank_config(&comm_, host.size(), message.id, host.rank(), &config);
    if (started != ncclSuccess && started != ncclInProgress) {
        const std::string reason = nccl.describe(started, comm_);
        abort();
        fail(DDP_ERR_BACKEND, "ncclCommInitRankConfig failed on rank " + std::to_string(host.rank()) + ": " + reason);
    }
    ncclResult_t state = ncclSuccess;
    if (settle(context.deadline, state) != Settled::done) {
        abort();
        fail(DDP_ERR_TIMEOUT, "setting up the NCCL communicator did not finish within the timeout on rank " +
                                  std::to_string(host.rank()) +
                                  " (a peer is stuck or gone, or NCCL cannot connect the ranks: NCCL_DEBUG=INFO "
                                  "tells more); NCCL was aborted");
    }
    if (state != ncclSuccess) {
        const std::string reason = nccl.describe(state, comm_);
        abort();
        fail(DDP_ERR_BACKEND, "setting up the NCCL communicator failed on rank " + std::to_string(host.rank()) +
                                  ": " + reason);
    }
}

std::unique_ptr<NcclComm> NcclComm::split(NcclComm& parent, int color, int key, Clock::time_point deadline,
                                          const Failing& failing) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;    // polled against the deadline
    config.splitShare = 1;  // as the parent: its launcher shares its abort flag
    ncclComm_t made = parent.split_with(color, key, config, deadline, failing,
                                        "ncclCommSplit (color " + std::to_string(color) + ")");
    return made != nullptr ? std::make_unique<NcclComm>(Adopt{}, parent.nccl_, made) : nullptr;
}

void NcclComm::add_launcher(int rank, Clock::time_point deadline, const Failing& failing) {
    if (nccl_.comm_split == nullptr) return;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;  // launches on the caller's thread
    // Shares this communicator's buffers, connections and abort flag: NCCL
    // takes that from this one's config (splitShare, set where it was made).
    launcher_ = split_with(0, rank, config, deadline, failing, "making the NCCL launcher (ncclCommSplit)");
}

ncclComm_t NcclComm::split_with(int color, int key, ncclConfig_t config, Clock::time_point deadline,
                                const Failing& failing, const std::string& where) {
    if (nccl_.comm_split == nullptr)
        fail(DDP_ERR_UNSUPPORTED, nccl_.path + " is NCCL " + nccl_.version_text() +
                                      ", which has no ncclCommSplit (NCCL 2.18.1 added it): ddp_comm_split on the "
                                      "nccl backend needs it (set DDP_NCCL_LIBRARY to a newer libnccl.so.2, e.g. "
                                      "from the nvidia-nccl-cu13 wheel, or use DDP_BACKEND=mpi)");
    // This communicator is non-blocking, so the split is too: NCCL stores
    // the new handle here from its own thread when the split's job ends.
    // `made` outlives the job, which ends at the latest when this
    // communicator is aborted.
    ncclComm_t made = nullptr;
    auto give_up = [&](ddp_status status, const std::string& message) {
        failing(status, message);
        abort();
        if (made != nullptr) nccl_.comm_abort(made);  // returned as the parent's job ended (NCCL's docs: abort it too)
        fail(status, message);
    };
    const std::string stuck = " (a peer is stuck or gone, or NCCL cannot connect the ranks: NCCL_DEBUG=INFO tells "
                              "more); NCCL was aborted";
    ncclResult_t started;
    {
        std::lock_guard lock(mutex_);
        if (aborted()) fail(DDP_ERR_TIMEOUT, where + ": NCCL was aborted earlier; the communicator is unusable");
        started = nccl_.comm_split(comm_, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &made, &config);
    }
    if (started != ncclSuccess && started != ncclInProgress)
        give_up(DDP_ERR_BACKEND, where + " failed: " + nccl_.describe(started, comm_));
    // This communicator is in progress until the job has stored the handle (or none).
    ncclResult_t state = ncclSuccess;
    if (settle(deadline, state) != Settled::done) give_up(DDP_ERR_TIMEOUT, where + " did not finish" + stuck);
    if (state != ncclSuccess) give_up(DDP_ERR_BACKEND, where + " failed: " + nccl_.describe(state, comm_));
    if (made == nullptr) return nullptr;  // no color: no communicator
    // The new communicator may still be connecting (a non-blocking one).
    if (settle(made, deadline, state) != Settled::done) give_up(DDP_ERR_TIMEOUT, where + " did not finish" + stuck);
    if (state != ncclSuccess) give_up(DDP_ERR_BACKEND, where + " failed: " + nccl_.describe(state, made));
    return made;
}

NcclComm::~NcclComm() {
    if (comm_ == nullptr || aborted()) return;
    if (launcher_ != nullptr && !finish_launcher()) {
        abort();
        return;
    }
    ncclResult_t state = ncclSuccess;
    ncclResult_t finalized;
    {
        std::lock_guard lock(mutex_);
        finalized = nccl_.comm_finalize(comm_);
    }
    if ((finalized == ncclSuccess || finalized == ncclInProgress) &&
        settle(deadline_after(destroy_wait_s), state) == Settled::done && state == ncclSuccess) {
        std::lock_guard lock(mutex_);
        nccl_.comm_destroy(comm_);
        return;
    }
    abort();
}

bool NcclComm::finish_launcher() {
    // Blocking: NCCL returns once the launcher's operations are flushed, on a
    // thread of its own here, so that the wait has a bound. Past it, an abort
    // raises the shared flag, which ends the finalize.
    std::promise<bool> flushed;
    std::future<bool> finished = flushed.get_future();
    std::thread finishing([this, &flushed] {
        std::lock_guard lock(launch_mutex_);
        const bool done = nccl_.comm_finalize(launcher_) == ncclSuccess && !aborted();
        if (done) {
            nccl_.comm_destroy(launcher_);
            launcher_ = nullptr;
        }
        flushed.set_value(done);
    });
    if (finished.wait_for(std::chrono::duration<double>(destroy_wait_s)) != std::future_status::ready)
        abort();  // ends the finalize on the shared flag
    finishing.join();
    return finished.get();
}

NcclComm::Settled NcclComm::settle(ncclComm_t comm, Clock::time_point deadline, ncclResult_t& state) const {
    const auto start = Clock::now();
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (aborted()) return Settled::aborted;
            const ncclResult_t asked = nccl_.comm_get_async_error(comm, &state);
            if (asked != ncclSuccess) state = asked;
            if (state != ncclInProgress) return Settled::done;
        }
        const auto now = Clock::now();
        if (now > deadline) return Settled::timed_out;
        if (now - start < hot_poll)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

void NcclComm::check(ncclResult_t result, const char* what) const {
    if (result != ncclSuccess && result != ncclInProgress)
        fail(DDP_ERR_BACKEND, std::string(what) + " failed: " + nccl_.describe(result, comm_));
}

void NcclComm::group(const std::function<void()>& body, Clock::time_point deadline, const char* what) {
    {
        // Held while enqueueing, so that no other thread aborts NCCL under
        // the calls (an abort raises the launcher's flag through comm_ first).
        std::lock_guard lock(launcher_ != nullptr ? launch_mutex_ : mutex_);
        // A blocking launch has no deadline of its own: the watchdog reads this one.
        const LaunchDeadline watched(launch_deadline_, launcher_ != nullptr ? deadline : Clock::time_point{});
        if (aborted())
            fail(DDP_ERR_TIMEOUT, std::string(what) + ": NCCL was aborted earlier; the communicator is unusable");
        check(nccl_.group_start(), "ncclGroupStart");
        try {
            body();
        } catch (...) {
            nccl_.group_end();
            throw;
        }
        check(nccl_.group_end(), what);
    }
    if (launcher_ != nullptr) return;  // blocking: ncclGroupEnd returned once the calls were launched
    ncclResult_t state = ncclSuccess;
    switch (settle(deadline, state)) {
    case Settled::done: break;
    case Settled::aborted:
        fail(DDP_ERR_TIMEOUT, std::string(what) + ": NCCL was aborted (by the watchdog or another thread) while "
                                                  "it took the operations");
    case Settled::timed_out:
        fail(DDP_ERR_TIMEOUT, std::string(what) + ": NCCL did not accept the operations within the timeout");
    }
    if (state != ncclSuccess) fail(DDP_ERR_BACKEND, std::string(what) + " failed: " + nccl_.describe(state, comm_));
}

std::optional<std::string> NcclComm::async_error() const {
    auto error_of = [this](ncclComm_t comm) -> std::optional<std::string> {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t asked = nccl_.comm_get_async_error(comm, &state);
        if (asked != ncclSuccess) return "ncclCommGetAsyncError failed: " + nccl_.describe(asked, comm);
        if (state == ncclSuccess || state == ncclInProgress) return std::nullopt;
        return nccl_.describe(state, comm);
    };
    {
        std::lock_guard lock(mutex_);
        if (aborted()) return std::nullopt;
        if (std::optional<std::string> error = error_of(comm_)) return error;
    }
    // Asked again on the next poll while a caller launches on it.
    std::unique_lock lock(launch_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || launcher_ == nullptr || aborted()) return std::nullopt;
    return error_of(launcher_);
}

void NcclComm::abort() {
    std::lock_guard serial(abort_mutex_);  // a second caller returns once NCCL is aborted
    if (comm_ == nullptr || aborted_.exchange(true, std::memory_order_acq_rel)) return;
    {
        std::lock_guard lock(mutex_);
        nccl_.comm_abort(comm_);  // raises the flag it shares with the launcher
    }
    std::lock_guard lock(launch_mutex_);  // a launch or finalize in progress has ended on the flag
    if (launcher_ != nullptr) nccl_.comm_abort(launcher_);
}

bool NcclComm::launch_overdue() const {
    const Clock::rep deadline = launch_deadline_.load(std::memory_order_acquire);
    return deadline != 0 && Clock::now().time_since_epoch().count() > deadline;
}

}  // namespace ddp
