// Several ranks of one NCCL communicator in one process (ddp_init_local with
// devices), each launching from a thread of its own: what NCCL needs then.
// A launched NCCL kernel spins until every rank has launched, and a CUDA
// allocation or free waits for the kernels of its device (and of devices
// mapped to it): a rank of the process that still allocates after another
// launched waits for a kernel that waits for it (NVIDIA/nccl#787).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "util/pending.hpp"

namespace ddp {

/// Makes NCCL connect the ranks while it sets them up rather than in their
/// first collective (NCCL_RUNTIME_CONNECT=0), unless the user set
/// NCCL_RUNTIME_CONNECT; called before the group's NCCL set-up. Returns what
/// it did, for the debug log.
std::string connect_nccl_ranks_at_set_up();

/// The ranks of one NCCL communicator that live in this process meet here
/// before each launch, after their own allocations (buckets grow with
/// cudaFree and cudaMalloc), so that none launches while another may still
/// allocate: the barrier NCCL's maintainers advise for a thread per rank.
class LaunchGate {
public:
    /// Why a member stops waiting early (a peer failed, NCCL was aborted), or nothing.
    using Stop = std::function<std::optional<std::string>()>;

    /// `ranks`: the communicator's ranks in this process.
    explicit LaunchGate(std::vector<int> ranks);

    /// Rank `rank` waits until every member has arrived for its next launch
    /// of `what`. Throws DDP_ERR_TIMEOUT at `deadline` naming the members
    /// that did not come, or when `stop` names a reason; the gate is then
    /// broken and every later wait fails at once.
    void pass(int rank, Clock::time_point deadline, const Stop& stop, const std::string& what);

    /// Every member, each with its color (none: no sub-communicator) and its
    /// rank in the sub-communicator: the gate of its color's members (null
    /// for none). Fails as pass does.
    std::shared_ptr<LaunchGate> split(int rank, std::optional<int> color, int sub_rank, Clock::time_point deadline,
                                      const Stop& stop);

    /// Breaks the gate: this member will not launch again (it failed or was aborted).
    void break_open(const std::string& reason);

private:
    /// Every member arrives with `rank`; the last runs `last` under the lock.
    void meet(int rank, Clock::time_point deadline, const Stop& stop, const std::string& what,
              const std::function<void()>& last);
    [[noreturn]] void fail_broken(const std::string& what);

    const std::vector<int> ranks_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<int> arrived_;  // this round's ranks so far
    uint64_t round_ = 0;
    std::optional<std::string> broken_;
    // A split's round: each member's color and sub-rank, then the gates made.
    std::map<int, std::vector<int>> colors_;
    std::map<int, std::shared_ptr<LaunchGate>> split_gates_;
};

}  // namespace ddp
