#include "control/hang_watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/collective_kind.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

// How often the watchdog looks: a fraction of any sensible grace period.
constexpr auto look_interval = std::chrono::milliseconds(100);

int64_t nanoseconds(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

/// The process's one watchdog thread: started with the first communicator,
/// asleep while no wait is registered, stopped at process exit.
class HangWatchdog {
public:
    static HangWatchdog& instance() {
        static HangWatchdog watchdog;
        return watchdog;
    }
    ~HangWatchdog() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    void add(WatchedWaits* waits) {
        std::lock_guard lock(mutex_);
        watched_.push_back(waits);
        if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        wake_.notify_all();
    }
    void remove(WatchedWaits* waits) {
        std::lock_guard lock(mutex_);
        std::erase(watched_, waits);
    }

private:
    HangWatchdog() = default;

    void run() {
        std::unique_lock lock(mutex_);
        while (!stopping_) {
            if (watched_.empty())
                wake_.wait(lock, [this] { return stopping_ || !watched_.empty(); });
            else
                wake_.wait_for(lock, look_interval);
            const int64_t now = nanoseconds(Clock::now());
            for (const WatchedWaits* waits : watched_) {
                const int64_t grace_from = waits->grace_from_ns_.load(std::memory_order_acquire);
                if (grace_from != 0 && static_cast<double>(now - grace_from) > waits->grace_s_ * 1e9)
                    end_process(*waits, now);
            }
        }
    }

    [[noreturn]] static void end_process(const WatchedWaits& waits, int64_t now) {
        const int64_t deadline = waits.deadline_ns_.load(std::memory_order_relaxed);
        const uint64_t kind = waits.kind_.load(std::memory_order_relaxed);
        const std::string what =
            kind == 0 ? std::string("ddp_finalize")
                      : call_name(kind, CallLabel::from_word(waits.label_.load(std::memory_order_relaxed)));
        const double timeout = static_cast<double>(deadline - waits.started_ns_.load(std::memory_order_relaxed)) / 1e9;
        char text[768];
        std::snprintf(text, sizeof text,
                      "[ddp rank %d] FATAL hang watchdog: %s passed its deadline (timeout %.3g s) %.3g s ago and its "
                      "thread has not come back within the grace period of %.3g s (DDP_HANG_WATCHDOG_S): it is "
                      "stuck inside MPI (a peer died or its network failed, and MPI's transport does not return) "
                      "or in a log callback. Aborting this process so that the launcher ends the job.\n",
                      waits.rank_, what.c_str(), timeout, static_cast<double>(now - deadline) / 1e9, waits.grace_s_);
        // One write: lines from several ranks on one terminal stay whole.
        [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, std::strlen(text));
        std::abort();
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<WatchedWaits*> watched_;  // guarded by mutex_
    bool stopping_ = false;               // guarded by mutex_
    std::thread thread_;
};

WatchedWaits::WatchedWaits(int rank, double grace_s) : rank_(rank), grace_s_(grace_s) {
    if (grace_s_ > 0) HangWatchdog::instance().add(this);
}

WatchedWaits::~WatchedWaits() {
    if (grace_s_ > 0) HangWatchdog::instance().remove(this);
}

void WatchedWaits::enter(uint64_t kind, uint64_t label, Clock::time_point started, Clock::time_point deadline) {
    if (grace_s_ <= 0) return;
    std::lock_guard lock(mutex_);
    if (waiters_++ > 0) return;  // nested, or a second thread in the same call
    kind_.store(kind, std::memory_order_relaxed);
    label_.store(label, std::memory_order_relaxed);
    started_ns_.store(nanoseconds(started), std::memory_order_relaxed);
    // A deadline at the clock's end ("wait for ever") is never passed.
    if (deadline == Clock::time_point::max()) return;
    deadline_ns_.store(nanoseconds(deadline), std::memory_order_relaxed);
    // A thread entering past the deadline (the caller computed past it in a
    // reducer step) gives up at once: its grace counts from now.
    grace_from_ns_.store(nanoseconds(std::max(deadline, Clock::now())), std::memory_order_release);
}

void WatchedWaits::leave() {
    if (grace_s_ <= 0) return;
    std::lock_guard lock(mutex_);
    if (--waiters_ == 0) grace_from_ns_.store(0, std::memory_order_release);
}

double hang_grace_from_environment() {
    const auto text = env_string("DDP_HANG_WATCHDOG_S");
    if (!text) return default_hang_grace_s;
    if (*text == "off" || *text == "0") return 0;
    char* end = nullptr;
    const double seconds = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !(seconds > 0) || std::isinf(seconds))
        fail(DDP_ERR_INVALID_ARGUMENT, "DDP_HANG_WATCHDOG_S='" + *text +
                                           "' is neither a positive number of seconds nor 0 or off");
    return seconds;
}

}  // namespace ddp
