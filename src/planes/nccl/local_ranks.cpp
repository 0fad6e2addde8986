#include "planes/nccl/local_ranks.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "util/error.hpp"

namespace ddp {

namespace {
// How often a waiting member asks whether to stop early.
constexpr auto stop_poll = std::chrono::milliseconds(10);

std::string rank_list(const std::vector<int>& ranks) {
    std::string text;
    for (int rank : ranks) text += (text.empty() ? "" : ", ") + std::to_string(rank);
    return text;
}
}  // namespace

// Since NCCL 2.22 a rank connects to its peers in its first collective, and
// allocates and maps device memory there (seen on an H200: 2 processes x 2
// threads hung in their first allreduce). Connected at set-up, which every
// local rank finishes before ddp_init_local returns, no collective of NCCL's
// allocates. NCCL reads the variable at its first set-up in the process, and
// keeps it.
std::string connect_nccl_ranks_at_set_up() {
    if (const char* set = std::getenv("NCCL_RUNTIME_CONNECT"))
        return std::string("NCCL_RUNTIME_CONNECT=") + set + " is the user's: with it not 0, a rank of this process "
               "that launches before another has connected can hang the group (NVIDIA/nccl#787)";
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    return "NCCL_RUNTIME_CONNECT=0 (unless this process set up NCCL before, which read it then): NCCL connects this "
           "process's ranks as it sets them up, so that no collective allocates device memory while another rank's "
           "kernel runs";
}

LaunchGate::LaunchGate(std::vector<int> ranks) : ranks_(std::move(ranks)) {}

void LaunchGate::pass(int rank, Clock::time_point deadline, const Stop& stop, const std::string& what) {
    meet(rank, deadline, stop, what, [] {});
}

std::shared_ptr<LaunchGate> LaunchGate::split(int rank, std::optional<int> color, int sub_rank,
                                              Clock::time_point deadline, const Stop& stop) {
    std::unique_lock lock(mutex_);
    if (color) colors_[*color].push_back(sub_rank);
    lock.unlock();
    meet(rank, deadline, stop, "ddp_comm_split", [this] {
        split_gates_.clear();
        for (auto& [each, sub_ranks] : colors_) {
            std::sort(sub_ranks.begin(), sub_ranks.end());
            split_gates_[each] = std::make_shared<LaunchGate>(sub_ranks);
        }
        colors_.clear();
    });
    // Read before this member arrives again: no later split's last member
    // (which rewrites the gates) can run until then.
    lock.lock();
    return color ? split_gates_.at(*color) : nullptr;
}

void LaunchGate::break_open(const std::string& reason) {
    {
        std::lock_guard lock(mutex_);
        if (!broken_) broken_ = reason;
    }
    changed_.notify_all();
}

void LaunchGate::meet(int rank, Clock::time_point deadline, const Stop& stop, const std::string& what,
                      const std::function<void()>& last) {
    // A member that will not launch (aborted, failed) must not complete a
    // round: its siblings would launch kernels that wait for it.
    if (std::optional<std::string> reason = stop()) {
        break_open(*reason);
        fail(DDP_ERR_TIMEOUT, *reason);
    }
    std::unique_lock lock(mutex_);
    if (broken_) fail_broken(what);
    arrived_.push_back(rank);
    if (arrived_.size() == ranks_.size()) {
        try {
            last();
        } catch (...) {
            broken_ = what + ": rank " + std::to_string(rank) + " failed to finish the round";
            lock.unlock();
            changed_.notify_all();
            throw;
        }
        arrived_.clear();
        ++round_;
        lock.unlock();
        changed_.notify_all();
        return;
    }
    const uint64_t round = round_;
    for (;;) {
        changed_.wait_until(lock, std::min(deadline, Clock::now() + stop_poll),
                            [&] { return round_ != round || broken_; });
        if (round_ != round) return;
        if (broken_) fail_broken(what);
        std::optional<std::string> reason;
        if (Clock::now() >= deadline) {
            std::vector<int> missing;
            for (int member : ranks_)
                if (std::find(arrived_.begin(), arrived_.end(), member) == arrived_.end()) missing.push_back(member);
            reason = what + ": rank " + std::to_string(rank) + " timed out waiting for rank(s) " + rank_list(missing) +
                     " of its process to reach NCCL's launch (the ranks of one process meet before they launch, so "
                     "that none allocates while another's kernel runs: NVIDIA/nccl#787)";
        } else {
            lock.unlock();
            try {
                reason = stop();
            } catch (...) {
                break_open("rank " + std::to_string(rank) + " could not tell whether to go on");
                throw;
            }
            lock.lock();
            if (round_ != round) return;
        }
        if (reason) {
            if (!broken_) broken_ = *reason;
            lock.unlock();
            changed_.notify_all();
            fail(DDP_ERR_TIMEOUT, *reason);
        }
    }
}

void LaunchGate::fail_broken(const std::string& what) {
    fail(DDP_ERR_TIMEOUT, what + ": another rank of this process will not launch (" + *broken_ +
                              "); the communicator is unusable");
}

}  // namespace ddp
