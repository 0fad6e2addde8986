#include "control/contention.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "control/channel.hpp"

namespace ddp {

std::string CpuShare::describe() const {
    if (ranks_in_process > process_cpus)
        return std::to_string(ranks_in_process) + " ranks in this process on its " + std::to_string(process_cpus) +
               " CPUs";
    return std::to_string(ranks_on_node) + " ranks on this node's " + std::to_string(node_cpus) + " CPUs";
}

CpuShare cpu_share(const ControlChannel& channel) {
    const int node_cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    int process_cpus = node_cpus;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    // The process's main thread's CPUs (its pid names it), not the calling
    // thread's, which a user may have pinned.
    if (sched_getaffinity(::getpid(), sizeof allowed, &allowed) == 0) process_cpus = std::max(1, CPU_COUNT(&allowed));
    return {channel.ranks_in_this_process(), process_cpus, channel.local_size(), node_cpus};
}

ContentionWatch::Change ContentionWatch::wait_ended(bool slept) {
    std::lock_guard lock(mutex_);
    if (slept) {
        quiet_in_a_row_ = 0;
        if (contended_) {
            ++slept_while_contended_;
            return Change::none;
        }
        contended_ = true;
        slept_while_contended_ = 1;
        return Change::started;
    }
    if (!contended_ || ++quiet_in_a_row_ < quiet_waits_to_end) return Change::none;
    contended_ = false;
    return Change::ended;
}

int ContentionWatch::slept_while_contended() {
    std::lock_guard lock(mutex_);
    return slept_while_contended_;
}

}  // namespace ddp
