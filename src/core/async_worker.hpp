// The background thread that carries out a communicator's async requests in
// the order they were started, so the caller can compute meanwhile.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ddp/ddp.h"

namespace ddp {

/// Completion state of one request, shared by the worker and the caller.
class RequestState {
public:
    void complete(ddp_status status, std::string message);
    /// Blocks until complete; returns the status and its message.
    ddp_status wait(std::string& message);
    bool done() const;

private:
    mutable std::mutex mutex_;
    std::condition_variable completed_;
    bool done_ = false;
    ddp_status status_ = DDP_OK;
    std::string message_;
};

class AsyncWorker {
public:
    AsyncWorker() = default;
    ~AsyncWorker();
    AsyncWorker(const AsyncWorker&) = delete;
    AsyncWorker& operator=(const AsyncWorker&) = delete;

    /// Queues `job`; its ddp::Error (or success) completes the returned state.
    std::shared_ptr<RequestState> submit(std::function<void()> job);
    /// Takes back `state`'s job when the worker has not begun it, for a
    /// caller about to wait for it to run itself (no handoff between
    /// threads); nullopt when it is running or done.
    std::optional<std::function<void()>> withdraw(const std::shared_ptr<RequestState>& state);
    /// Returns once every queued job has finished.
    void drain();
    /// Drains, then ends the thread.
    void stop();

private:
    struct Job {
        std::function<void()> run;
        std::shared_ptr<RequestState> state;
    };
    void loop();

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Job> queue_;
    bool running_job_ = false;
    bool stopping_ = false;
    std::thread thread_;  // started on the first submit
};

}  // namespace ddp
