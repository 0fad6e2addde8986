// What the threads of one process share in a group across processes x
// threads: the mpi transport to the other processes (thread 0 of each
// process carries its threads' part over it), the status this process gives
// the other processes when they ask (its least advanced thread's), and the
// end of MPI once the last thread has finalized.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"
#include "planes/transport.hpp"

namespace ddp::mixed {

class ProcessLink {
public:
    ProcessLink(std::unique_ptr<Transport> processes, int threads);
    ~ProcessLink();
    ProcessLink(const ProcessLink&) = delete;
    ProcessLink& operator=(const ProcessLink&) = delete;

    ControlChannel& channel() { return processes_->channel(); }
    HostPlane& plane() { return *processes_->host_planes().front(); }
    int process() const { return process_; }
    int processes() const { return processes_count_; }
    int threads() const { return threads_; }

    /// Thread `thread`'s status, read when another process asks (empty:
    /// none, once the thread finalized). The first call starts answering.
    void set_status(int thread, std::function<PeerStatus()> status);
    /// What a thread that finalized last said it was doing (empty while it
    /// still runs): its peers here still know, as peers elsewhere would.
    std::optional<PeerStatus> final_status(int thread) const;

    /// Counts a thread in at finalize; true for the last, which alone
    /// waits for the other processes (the channel's finalize barrier).
    bool last_at_finalize();
    /// A thread's transport is released; the last releases MPI.
    void release(bool peers_present);

private:
    /// The least advanced thread's status: the one the other processes
    /// wait for. Under mutex_.
    PeerStatus least_advanced() const;

    std::unique_ptr<Transport> processes_;
    const int process_, processes_count_, threads_;
    mutable std::mutex mutex_;
    std::vector<std::function<PeerStatus()>> statuses_;  // under mutex_
    std::vector<std::optional<PeerStatus>> final_statuses_;  // under mutex_
    bool answering_ = false;                              // under mutex_
    int at_finalize_ = 0;                                 // under mutex_
    int released_ = 0;                                    // under mutex_
};

}  // namespace ddp::mixed
