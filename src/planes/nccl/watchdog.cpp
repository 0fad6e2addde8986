#include "planes/nccl/watchdog.hpp"

#include <chrono>

#include "device/cuda/cuda.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {
// How often watched work is polled; with nothing watched, the owner's
// failure check still runs this often.
constexpr auto busy_interval = std::chrono::milliseconds(1);
constexpr auto idle_interval = std::chrono::milliseconds(100);
}  // namespace

Watchdog::Watchdog(int device, std::function<std::optional<Failure>()> poll_failure,
                   std::function<void(ddp_status, const std::string&)> failed)
    : poll_failure_(std::move(poll_failure)), failed_(std::move(failed)), thread_([this, device] { loop(device); }) {}

void Watchdog::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Work still watched at the end (finalize gave up waiting for it) ends here.
    std::vector<Watched> left;
    {
        std::lock_guard lock(mutex_);
        left.swap(watched_);
    }
    for (Watched& item : left)
        item.end(DDP_ERR_NOT_INITIALIZED, item.what + " was still running on the GPU when the communicator was finalized");
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::watch(std::shared_ptr<cuda::Event> event, Clock::time_point deadline, std::string what, WorkEnd end) {
    std::unique_lock lock(mutex_);
    if (failure_) {
        const Failure failure = *failure_;
        lock.unlock();
        end(failure.first, failure.second);
        return;
    }
    watched_.push_back(Watched{std::move(event), deadline, std::move(what), std::move(end)});
    lock.unlock();
    changed_.notify_all();
}

auto Watchdog::record_failure(const Failure& failure) -> std::optional<std::vector<Watched>> {
    std::lock_guard lock(mutex_);
    if (failure_) return std::nullopt;
    failure_ = failure;
    std::vector<Watched> taken;
    taken.swap(watched_);
    return taken;
}

void Watchdog::fail_all(ddp_status status, const std::string& message) {
    std::optional<std::vector<Watched>> taken = record_failure(Failure{status, message});
    changed_.notify_all();
    if (taken)
        for (Watched& item : *taken) item.end(status, message);
}

bool Watchdog::drain(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [this] { return watched_.empty(); });
}

std::optional<Failure> Watchdog::check(std::vector<Watched>& finished) {
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    if (failure_) return std::nullopt;  // failed already: nothing counts as finished any more
    for (size_t i = 0; i < watched_.size();) {
        Watched& item = watched_[i];
        try {
            if (item.event->finished()) {
                finished.push_back(std::move(item));
                watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
                continue;
            }
        } catch (const Error& error) {
            return Failure{DDP_ERR_BACKEND, item.what + " failed on the GPU: " + error.what()};
        }
        if (now > item.deadline)
            return Failure{DDP_ERR_TIMEOUT,
                           item.what + " did not finish on the GPU within its timeout (a peer never enqueued it, "
                                       "or NCCL cannot reach a peer; NCCL_DEBUG=INFO tells more)"};
        ++i;
    }
    return std::nullopt;
}

void Watchdog::loop(int device) {
    std::optional<Failure> failure;
    try {
        if (device >= 0) cuda::make_current(device);
    } catch (const Error& error) {
        failure = Failure{DDP_ERR_BACKEND, std::string("the watchdog could not use the GPU: ") + error.what()};
    }
    for (;;) {
        std::vector<Watched> finished;
        // Known failures first: kernels that NCCL ended on an error end their
        // events too, which must not read as finished work.
        if (!failure) failure = poll_failure_();
        if (!failure) failure = check(finished);
        for (Watched& item : finished) item.end(DDP_OK, "");
        if (failure) {
            if (std::optional<std::vector<Watched>> taken = record_failure(*failure)) {
                failed_(failure->first, failure->second);
                for (Watched& item : *taken) item.end(failure->first, failure->second);
            }
            changed_.notify_all();
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [this] { return stopping_; });
            return;
        }
        std::unique_lock lock(mutex_);
        if (!finished.empty()) changed_.notify_all();
        if (stopping_) return;
        if (failure_) {  // failed from outside (fail_all): nothing left to watch
            changed_.wait(lock, [this] { return stopping_; });
            return;
        }
        changed_.wait_for(lock, watched_.empty() ? idle_interval : busy_interval);
        if (stopping_) return;
    }
}

}  // namespace ddp
