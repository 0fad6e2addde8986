#include "backend/nccl/watchdog.hpp"

#include <chrono>

#include "device/cuda/cuda.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {
// How often watched work is polled; with nothing watched, NCCL's
// asynchronous error is still checked this often.
constexpr auto busy_interval = std::chrono::milliseconds(1);
constexpr auto idle_interval = std::chrono::milliseconds(100);
}  // namespace

Watchdog::Watchdog(int device, std::function<std::optional<std::string>()> async_error,
                   std::function<void(ddp_status, const std::string&)> failed)
    : async_error_(std::move(async_error)), failed_(std::move(failed)), thread_([this, device] { loop(device); }) {}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
    // Work still watched at the end (finalize gave up waiting for it) ends here.
    for (Watched& item : watched_)
        item.end(DDP_ERR_NOT_INITIALIZED, item.what + " was still running on the GPU when the communicator was finalized");
}

void Watchdog::watch(std::shared_ptr<cuda::Event> event, Clock::time_point deadline, std::string what, WorkEnd end) {
    std::unique_lock lock(mutex_);
    if (failure_) {
        const auto [status, message] = *failure_;
        lock.unlock();
        end(status, message);
        return;
    }
    watched_.push_back(Watched{std::move(event), deadline, std::move(what), std::move(end)});
    lock.unlock();
    changed_.notify_all();
}

bool Watchdog::drain(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [this] { return watched_.empty(); });
}

std::optional<std::pair<ddp_status, std::string>> Watchdog::check(std::vector<Watched>& finished) {
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < watched_.size();) {
        Watched& item = watched_[i];
        try {
            if (item.event->finished()) {
                finished.push_back(std::move(item));
                watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
                continue;
            }
        } catch (const Error& error) {
            return std::pair{DDP_ERR_BACKEND, item.what + " failed on the GPU: " + error.what()};
        }
        if (now > item.deadline)
            return std::pair{DDP_ERR_TIMEOUT,
                             item.what + " did not finish on the GPU within its timeout (a peer never enqueued it, "
                                         "or NCCL cannot reach a peer; NCCL_DEBUG=INFO tells more)"};
        ++i;
    }
    if (auto error = async_error_()) return std::pair{DDP_ERR_BACKEND, "NCCL reported an error: " + *error};
    return std::nullopt;
}

void Watchdog::loop(int device) {
    std::optional<std::pair<ddp_status, std::string>> failure;
    try {
        if (device >= 0) cuda::make_current(device);
    } catch (const Error& error) {
        failure = std::pair{DDP_ERR_BACKEND, std::string("the watchdog could not use the GPU: ") + error.what()};
    }
    for (;;) {
        std::vector<Watched> finished;
        if (!failure) failure = check(finished);
        for (Watched& item : finished) item.end(DDP_OK, "");
        if (failure) {
            failed_(failure->first, failure->second);
            std::vector<Watched> failed;
            {
                std::lock_guard lock(mutex_);
                failure_ = failure;
                failed.swap(watched_);
            }
            changed_.notify_all();
            for (Watched& item : failed) item.end(failure->first, failure->second);
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [this] { return stopping_; });
            return;
        }
        std::unique_lock lock(mutex_);
        if (!finished.empty()) changed_.notify_all();
        if (stopping_) return;
        changed_.wait_for(lock, watched_.empty() ? idle_interval : busy_interval);
        if (stopping_) return;
    }
}

}  // namespace ddp
