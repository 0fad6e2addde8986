#include "planes/local/local_group.hpp"

namespace ddp::local {

std::shared_ptr<Round> Group::round(Lane lane, uint64_t number) {
    std::lock_guard lock(mutex_);
    auto& round = rounds_[{lane, number}];
    if (!round) {
        round = std::make_shared<Round>(size_);
        round->withdrawn = broken_ && lane == Lane::data;
    }
    return round;
}

void Group::leave(Lane lane, uint64_t number, Round& round) {
    if (round.left.fetch_add(1, std::memory_order_acq_rel) + 1 < size_) return;
    std::lock_guard lock(mutex_);
    rounds_.erase({lane, number});
}

void Group::set_status_source(int rank, std::function<PeerStatus()> source) {
    std::lock_guard lock(mutex_);
    status_sources_[static_cast<size_t>(rank)] = std::move(source);
}

std::optional<PeerStatus> Group::status_of(int rank) {
    // Under the lock: a rank that finalizes takes its source away (under
    // the same lock) before its control plane goes.
    std::lock_guard lock(mutex_);
    const auto& source = status_sources_[static_cast<size_t>(rank)];
    if (!source) return std::nullopt;
    return source();
}

void Group::post_notice(const AbortNotice& notice) {
    {
        std::lock_guard lock(mutex_);
        notices_.push_back(notice);
        if (notice.reason != AbortNotice::Reason::finalizing) {
            broken_ = true;
            for (auto& [key, round] : rounds_)
                if (key.first == Lane::data) {
                    std::unique_lock working(round->working);  // waits for a peer inside its part
                    round->withdrawn = true;
                }
        }
    }
    doorbell_.ring();
}

std::optional<AbortNotice> Group::notice_for(int rank) {
    std::lock_guard lock(mutex_);
    std::optional<AbortNotice> first;
    for (const AbortNotice& notice : notices_)
        if (notice.from_rank != rank) first = notice_to_keep(first, notice);
    return first;
}

std::shared_ptr<Group> Group::child(uint64_t split, int color, int size) {
    std::lock_guard lock(mutex_);
    Child& child = children_[{split, color}];
    if (!child.group) child.group = std::make_shared<Group>(size);
    std::shared_ptr<Group> made = child.group;
    if (++child.taken == size) children_.erase({split, color});
    return made;
}

}  // namespace ddp::local
