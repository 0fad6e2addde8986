// The transports a split makes for one process's threads in a group across
// processes x threads: thread 0 makes them all (it meets the other
// processes' threads 0 in MPI), and every thread takes its own, or learns
// why there is none.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "planes/transport.hpp"
#include "util/error.hpp"

namespace ddp::mixed {

class SplitHandout {
public:
    explicit SplitHandout(int threads) : threads_(threads) {}

    /// Thread 0's result for the process's split number `split`: each
    /// thread's new transport (nullptr: in no new group).
    void give(uint64_t split, std::vector<std::unique_ptr<Transport>> by_thread) {
        {
            std::lock_guard lock(mutex_);
            made(split).by_thread = std::move(by_thread);
            made(split).given = true;
        }
        given_.notify_all();
    }
    /// Thread 0 failed to make split `split`: every thread fails alike.
    void give_failure(uint64_t split, ddp_status status, std::string message) {
        {
            std::lock_guard lock(mutex_);
            made(split).status = status;
            made(split).message = std::move(message);
            made(split).given = true;
        }
        given_.notify_all();
    }
    /// Thread `thread`'s transport of split `split` once thread 0 has given
    /// it; DDP_ERR_TIMEOUT past `deadline`.
    std::unique_ptr<Transport> take(uint64_t split, int thread, Clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        // In short waits: a deadline may be the clock's end ("for ever").
        while (!made(split).given) {
            if (Clock::now() > deadline)
                fail(DDP_ERR_TIMEOUT, "comm_split: thread 0 of this process did not make the new groups in time "
                                      "(it meets the other processes in MPI_Comm_split)");
            given_.wait_for(lock, std::chrono::milliseconds(100));
        }
        Made& mine = made(split);
        const ddp_status status = mine.status;
        const std::string message = mine.message;
        std::unique_ptr<Transport> transport =
            status == DDP_OK ? std::move(mine.by_thread.at(static_cast<size_t>(thread))) : nullptr;
        if (++mine.taken == threads_) made_.erase(split);
        if (status != DDP_OK) fail(status, message);
        return transport;
    }

private:
    struct Made {
        bool given = false;
        std::vector<std::unique_ptr<Transport>> by_thread;
        ddp_status status = DDP_OK;
        std::string message;
        int taken = 0;
    };
    Made& made(uint64_t split) { return made_[split]; }  // under mutex_

    const int threads_;
    std::mutex mutex_;
    std::condition_variable given_;
    std::map<uint64_t, Made> made_;  // under mutex_
};

}  // namespace ddp::mixed
