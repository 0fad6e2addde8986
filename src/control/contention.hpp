// Whether this rank's waits for data give their core away: the contended
// mode a user sees at DDP_LOG_LEVEL=debug. A wait spins for its first
// microseconds and then sleeps between tests (ControlPlane::wait); a rank
// whose waits keep reaching the sleep has peers that are late or off their
// cores (other work shares them), and says so once when that starts and
// once when it ends, not per wait.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace ddp {

class ControlChannel;

/// How a communicator's ranks share CPUs with each other.
struct CpuShare {
    int ranks_in_process;  ///< its ranks that are threads of this process
    int process_cpus;      ///< the CPUs this process may run on
    int ranks_on_node;
    int node_cpus;

    /// More ranks than CPUs, in this process or on this node: a rank that
    /// spins in a wait then holds a core that the peer it waits for needs.
    bool outnumbered() const { return ranks_in_process > process_cpus || ranks_on_node > node_cpus; }
    /// "4 ranks in this process on its 2 CPUs", for the log.
    std::string describe() const;
};

CpuShare cpu_share(const ControlChannel& channel);

/// Peers usually arrive within microseconds: a wait spins this long before
/// sleeping (or, for an operation that cannot sleep, pacing), where every
/// rank has a CPU. Measured (2 ranks, shm, spins of 0-200 us;
/// docs/benchmark.md, "Busy cores"): 0-5 us made 4-16 KiB calls 3-7x slower
/// on a quiet machine, 20 us made them 3x slower beside a CPU-bound
/// process; on the model lists 20, 50 and 200 us were alike.
constexpr std::chrono::microseconds hot_spin{200};

/// How long a wait spins before it sleeps, where its operation can sleep
/// and the ranks are outnumbered. Measured on a 2-core machine
/// (docs/benchmark.md, "Busy cores"): a 4 KiB allreduce of 4 threads of one
/// process took 0.67 ms spinning 200 us, 0.20 ms at 50 us, 0.08 ms at 10 us
/// or none; 4 processes through shared memory 0.24 against 0.05 ms.
constexpr std::chrono::microseconds outnumbered_spin{10};

class ContentionWatch {
public:
    enum class Change { none, started, ended };
    /// A wait for data ended; `slept`: it went past its spin and slept.
    Change wait_ended(bool slept);
    /// Waits that slept since contention started (for the line that ends it).
    int slept_while_contended();

    /// Waits in a row that end while spinning before the mode ends: one
    /// quick wait among sleeping ones is not the end of contention.
    static constexpr int quiet_waits_to_end = 100;

private:
    std::mutex mutex_;  // the caller's thread and the async worker both wait
    bool contended_ = false;
    int quiet_in_a_row_ = 0;
    int slept_while_contended_ = 0;
};

}  // namespace ddp
