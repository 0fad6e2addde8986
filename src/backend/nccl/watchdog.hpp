// The thread that holds a communicator's GPU work to its deadlines, as
// PyTorch's NCCL watchdog does: device calls return once enqueued, so
// nothing on the caller's thread would notice a reduction that never ends
// or an NCCL error. It polls each watched call's completion event and
// NCCL's asynchronous error; on a timeout or an error it reports the
// failure once (the owner aborts NCCL and breaks the communicator) and
// fails every watched call with it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/device_plane.hpp"

namespace ddp {

class Watchdog {
public:
    /// `device`: the GPU made current on the watchdog's thread (-1: none).
    /// `async_error`: NCCL's asynchronous error as a sentence, if any.
    /// `failed`: called once, on the watchdog's thread, with the first failure.
    Watchdog(int device, std::function<std::optional<std::string>()> async_error,
             std::function<void(ddp_status, const std::string&)> failed);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    /// Watches `event` (recorded after the call's work) until `deadline`.
    void watch(std::shared_ptr<cuda::Event> event, Clock::time_point deadline, std::string what, WorkEnd end);
    /// Waits until every watched call has ended (or failed), at most until `deadline`.
    /// Returns whether nothing is left.
    bool drain(Clock::time_point deadline);

private:
    struct Watched {
        std::shared_ptr<cuda::Event> event;
        Clock::time_point deadline;
        std::string what;
        WorkEnd end;
    };
    void loop(int device);
    /// The first failure among the watched calls, or NCCL's async error.
    std::optional<std::pair<ddp_status, std::string>> check(std::vector<Watched>& finished);

    std::function<std::optional<std::string>()> async_error_;
    std::function<void(ddp_status, const std::string&)> failed_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Watched> watched_;                              // guarded by mutex_
    std::optional<std::pair<ddp_status, std::string>> failure_;  // guarded by mutex_; the first stays
    bool stopping_ = false;                                     // guarded by mutex_
    std::thread thread_;  // last: started once the rest exists
};

}  // namespace ddp
