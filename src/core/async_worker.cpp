#include "core/async_worker.hpp"

#include <algorithm>

#include "trace/timeline.hpp"
#include "util/error.hpp"

namespace ddp {

void RequestState::complete(ddp_status status, std::string message) {
    {
        std::lock_guard lock(mutex_);
        if (done_) return;  // the first completion stands
        done_ = true;
        status_ = status;
        message_ = std::move(message);
    }
    completed_.notify_all();
}

ddp_status RequestState::wait(std::string& message) {
    std::unique_lock lock(mutex_);
    completed_.wait(lock, [this] { return done_; });
    message = message_;
    return status_;
}

bool RequestState::done() const {
    std::lock_guard lock(mutex_);
    return done_;
}

AsyncWorker::~AsyncWorker() { stop(); }

std::shared_ptr<RequestState> AsyncWorker::submit(std::function<void()> job) {
    auto state = std::make_shared<RequestState>();
    {
        std::lock_guard lock(mutex_);
        if (stopping_) fail(DDP_ERR_NOT_INITIALIZED, "the communicator is being finalized");
        queue_.push_back(Job{std::move(job), state});
        if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    changed_.notify_all();
    return state;
}

std::optional<std::function<void()>> AsyncWorker::withdraw(const std::shared_ptr<RequestState>& state) {
    std::optional<std::function<void()>> job;
    {
        std::lock_guard lock(mutex_);
        const auto queued =
            std::find_if(queue_.begin(), queue_.end(), [&](const Job& candidate) { return candidate.state == state; });
        if (queued == queue_.end()) return std::nullopt;
        job = std::move(queued->run);
        queue_.erase(queued);
    }
    changed_.notify_all();  // drain() may wait for the queue to empty
    return job;
}

void AsyncWorker::drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return queue_.empty() && !running_job_; });
}

void AsyncWorker::stop() {
    {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return queue_.empty() && !running_job_; });
        stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void AsyncWorker::loop() {
    trace::name_this_thread("libddp worker");
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping with nothing left
        Job job = std::move(queue_.front());
        queue_.pop_front();
        running_job_ = true;
        lock.unlock();
        ddp_status status = DDP_OK;
        std::string message;
        try {
            job.run();
        } catch (...) {
            status = status_of_exception(std::current_exception(), message);
        }
        job.state->complete(status, std::move(message));
        lock.lock();
        running_job_ = false;
        changed_.notify_all();
    }
}

}  // namespace ddp
