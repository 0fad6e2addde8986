// The thread that holds a communicator's GPU work to its deadlines, as
// PyTorch's NCCL watchdog does: device calls return once enqueued, so
// nothing on the caller's thread would notice a reduction that never ends,
// an NCCL error, or a peer that gave up. It polls each watched call's
// completion event and the owner's failure check (NCCL's asynchronous
// error, a peer's abort notice); on a timeout or a failure it reports it
// once (the owner aborts NCCL and breaks the communicator) and fails every
// watched call with it. The owner fails them itself (fail_all) before it
// aborts NCCL for any other reason, since aborted kernels end their events
// as if they had finished.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "planes/device_plane.hpp"

namespace ddp {

/// Why watched work cannot finish: a status and its sentence.
using Failure = std::pair<ddp_status, std::string>;

class Watchdog {
public:
    /// `device`: the GPU made current on the watchdog's thread (-1: none).
    /// `poll_failure`: a failure the owner knows of (NCCL's asynchronous
    /// error, a peer's notice), if any. `failed`: called once, on the
    /// watchdog's thread, with the first failure it finds itself.
    Watchdog(int device, std::function<std::optional<Failure>()> poll_failure,
             std::function<void(ddp_status, const std::string&)> failed);
    /// Stops the thread (waits for a failure it is reporting to be
    /// reported); work still watched then ends with DDP_ERR_NOT_INITIALIZED.
    /// The owner calls it while everything the thread's callbacks use still
    /// exists. Idempotent.
    void stop();
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    /// Watches `event` (recorded after the call's work) until `deadline`.
    void watch(std::shared_ptr<cuda::Event> event, Clock::time_point deadline, std::string what, WorkEnd end);
    /// Ends every watched call (and every later one) with this failure,
    /// unless one was recorded already. From any thread.
    void fail_all(ddp_status status, const std::string& message);
    /// Waits until every watched call has ended (or failed), at most until
    /// `deadline`. Returns whether nothing is left.
    bool drain(Clock::time_point deadline);

private:
    struct Watched {
        std::shared_ptr<cuda::Event> event;
        Clock::time_point deadline;
        std::string what;
        WorkEnd end;
    };
    void loop(int device);
    /// Moves finished calls to `finished`; returns the first timed-out or
    /// failed call's failure.
    std::optional<Failure> check(std::vector<Watched>& finished);
    /// Records the first failure and takes the watched calls; empty when a
    /// failure was recorded before.
    std::optional<std::vector<Watched>> record_failure(const Failure& failure);

    std::function<std::optional<Failure>()> poll_failure_;
    std::function<void(ddp_status, const std::string&)> failed_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Watched> watched_;    // guarded by mutex_
    std::optional<Failure> failure_;  // guarded by mutex_; the first stays
    bool stopping_ = false;           // guarded by mutex_
    std::thread thread_;              // last: started once the rest exists
};

}  // namespace ddp
