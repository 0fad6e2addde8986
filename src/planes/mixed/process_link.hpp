// What the threads of one process share in a group across processes x
// threads: the mpi transport to the other processes and the shared-memory
// plane in front of it where they share one node (thread 0 of each process
// carries its threads' part over them), the status this process gives
// the other processes when they ask (its least advanced thread's), the new
// groups a split makes, and the end of MPI once the last thread has
// finalized.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"
#include "planes/mixed/split_handout.hpp"
#include "planes/plane_list.hpp"
#include "planes/planes_in_front.hpp"
#include "planes/transport.hpp"

namespace ddp::mixed {

class ProcessLink {
public:
    /// `in_front`: the planes in front of `processes`' own, made over it
    /// with `switches` (make_planes_between_processes, as the link's splits
    /// make theirs).
    ProcessLink(std::unique_ptr<Transport> processes, std::vector<std::unique_ptr<HostPlane>> in_front,
                const PlaneSwitches& switches, int threads);
    ~ProcessLink();
    ProcessLink(const ProcessLink&) = delete;
    ProcessLink& operator=(const ProcessLink&) = delete;

    ControlChannel& channel() { return processes_->channel(); }
    /// The plane thread 0 crosses to the other processes with for a step:
    /// the first in priority order that runs it, as a communicator picks.
    HostPlane& plane_for(DataOp op, ddp_dtype dtype, ddp_op reduction, int64_t bytes) const {
        return planes_.host_for(op, dtype, reduction, bytes);
    }
    const PlaneSwitches& switches() const { return switches_; }
    int process() const { return process_; }
    int processes() const { return processes_count_; }
    int threads() const { return threads_; }
    /// The processes in `color` (>= 0; negative: in none) ranked by `key`,
    /// as MPI_Comm_split makes them; collective over every process.
    std::unique_ptr<Transport> split_processes(int color, int key, Clock::time_point deadline) {
        return processes_->split(color, key, {}, deadline);
    }
    /// What thread 0 makes in a split, for every thread to take.
    SplitHandout& splits() { return splits_; }

    /// Thread `thread`'s status, read when another process asks (empty:
    /// none, once the thread finalized). The first call starts answering.
    void set_status(int thread, std::function<PeerStatus()> status);
    /// What a thread that finalized last said it was doing (empty while it
    /// still runs): its peers here still know, as peers elsewhere would.
    std::optional<PeerStatus> final_status(int thread) const;
    /// Drops a thread's status without reading it (its source may be gone).
    void forget_status(int thread);

    /// Every other process's answer about its thread `thread` (ask_peers
    /// over MPI), one question at a time: the channel matches answers to its
    /// latest question, and the threads of a process tend to ask together
    /// (they time out together), so an answer younger than a moment is
    /// shared.
    std::vector<std::optional<PeerStatus>> ask_processes(Clock::time_point deadline, int thread);
    /// Runs `relay` (a stopping notice from another process into the local
    /// groups) once; a thread arriving meanwhile waits until it is done.
    void relay_once(const std::function<void()>& relay) { std::call_once(relayed_, relay); }

    /// Counts a thread in at finalize; true for the last, which alone
    /// waits for the other processes (the channel's finalize barrier).
    bool last_at_finalize();
    /// A thread's transport is released; the last releases MPI, with every
    /// peer present only where the finalize barrier found them all.
    void release(bool peers_present);

private:
    /// The least advanced thread's status: the one the other processes
    /// wait for. Under mutex_.
    PeerStatus least_advanced() const;
    /// Thread `thread`'s status, or its last if it finalized. Under mutex_.
    std::optional<PeerStatus> status_of(size_t thread) const;

    std::unique_ptr<Transport> processes_;
    std::vector<std::unique_ptr<HostPlane>> in_front_;  // destroyed before processes_
    const PlaneSwitches switches_;
    const PlaneList planes_;
    const int process_, processes_count_, threads_;
    mutable std::mutex mutex_;
    std::vector<std::function<PeerStatus()>> statuses_;  // under mutex_
    std::vector<std::optional<PeerStatus>> final_statuses_;  // under mutex_
    bool answering_ = false;                              // under mutex_
    int at_finalize_ = 0;                                 // under mutex_
    int released_ = 0;                                    // under mutex_
    bool peers_present_ = true;                           // under mutex_: every release said so
    struct Answers {
        std::vector<std::optional<PeerStatus>> by_process;
        Clock::time_point when;
    };
    std::mutex asking_;
    std::map<int, Answers> answers_;  // by thread asked about; under asking_
    std::once_flag relayed_;
    SplitHandout splits_{threads_};
};

}  // namespace ddp::mixed
