#include "planes/mixed/process_link.hpp"

#include <chrono>
#include <tuple>

namespace ddp::mixed {

ProcessLink::ProcessLink(std::unique_ptr<Transport> processes, std::vector<std::unique_ptr<HostPlane>> in_front,
                         const PlaneSwitches& switches, int threads)
    : processes_(std::move(processes)), in_front_(std::move(in_front)), switches_(switches),
      planes_(in_priority_order(in_front_, *processes_), nullptr), process_(processes_->channel().rank()),
      processes_count_(processes_->channel().size()), threads_(threads), statuses_(static_cast<size_t>(threads)),
      final_statuses_(static_cast<size_t>(threads)) {}

// Never under mutex_: finalizing the channel joins its responder thread,
// which may be waiting for mutex_ to read the statuses.
ProcessLink::~ProcessLink() {
    bool released = false;
    {
        std::lock_guard lock(mutex_);
        released = released_ == threads_;
    }
    if (released) return;
    // A start that failed: nothing collective.
    finalize_in_front_then(in_front_, *processes_, false);
}

void ProcessLink::set_status(int thread, std::function<PeerStatus()> status) {
    std::lock_guard lock(mutex_);
    auto& source = statuses_[static_cast<size_t>(thread)];
    if (!status && source) final_statuses_[static_cast<size_t>(thread)] = source();
    source = std::move(status);
    if (answering_ || !statuses_[static_cast<size_t>(thread)]) return;
    answering_ = true;
    // The responder thread reads the statuses under the same lock as a
    // finalizing thread takes its own away. Part 0 is the process (its
    // least advanced thread), part k its thread k - 1.
    processes_->channel().start_control([this](int part) {
        std::lock_guard lock(mutex_);
        if (part < 1 || part > threads_) return least_advanced();
        return status_of(static_cast<size_t>(part - 1)).value_or(PeerStatus{});
    });
}

void ProcessLink::forget_status(int thread) {
    std::lock_guard lock(mutex_);
    statuses_[static_cast<size_t>(thread)] = nullptr;
}

std::vector<std::optional<PeerStatus>> ProcessLink::ask_processes(Clock::time_point deadline, int thread) {
    constexpr auto fresh = std::chrono::milliseconds(200);
    std::lock_guard lock(asking_);
    Answers& answers = answers_[thread];
    if (answers.by_process.empty() || Clock::now() - answers.when > fresh) {
        answers.by_process = channel().ask_peers(deadline, thread + 1);
        answers.when = Clock::now();
    }
    return answers.by_process;
}

std::optional<PeerStatus> ProcessLink::final_status(int thread) const {
    std::lock_guard lock(mutex_);
    return final_statuses_[static_cast<size_t>(thread)];
}

std::optional<PeerStatus> ProcessLink::status_of(size_t thread) const {
    const auto& source = statuses_[thread];
    return source ? std::optional(source()) : final_statuses_[thread];
}

PeerStatus ProcessLink::least_advanced() const {
    PeerStatus least;
    bool any = false;
    for (size_t thread = 0; thread < statuses_.size(); ++thread) {
        const std::optional<PeerStatus> s = status_of(thread);
        if (!s) continue;
        // Behind: an earlier call, or the same call still inside it (a thread
        // that finished it is ahead of one that has not).
        auto place = [](const PeerStatus& p) { return std::tuple(p.sequence, p.in_call ? 0 : 1); };
        if (!any || place(*s) < place(least)) least = *s;
        any = true;
    }
    return least;
}

bool ProcessLink::last_at_finalize() {
    std::lock_guard lock(mutex_);
    return ++at_finalize_ == threads_;
}

void ProcessLink::release(bool peers_present) {
    bool last = false;
    {
        std::lock_guard lock(mutex_);
        peers_present_ = peers_present_ && peers_present;
        last = ++released_ == threads_;
        peers_present = peers_present_;
    }
    if (!last) return;
    finalize_in_front_then(in_front_, *processes_, peers_present);
}

}  // namespace ddp::mixed
