// A rank's part in one round of its group (local_group.hpp) as an operation
// its waiter drives: the rank has brought its share and counted itself in;
// test() finishes once every rank has (and, for data, done its part), and
// sleep() waits on the group's doorbell for a peer to count itself in.
#pragma once

#include <functional>
#include <memory>

#include "planes/local/local_group.hpp"
#include "util/pending.hpp"

namespace ddp::local {

class RoundPending final : public Pending {
public:
    /// `work`: this rank's part once every rank has arrived (may be empty);
    /// with `finish_together`, the operation ends only when every rank has
    /// done its part (peers write into this rank's memory until then).
    RoundPending(std::shared_ptr<Group> group, Lane lane, uint64_t number, std::shared_ptr<Round> round,
                 std::function<void(Round&)> work, bool finish_together)
        : group_(std::move(group)), lane_(lane), number_(number), round_(std::move(round)), work_(std::move(work)),
          finish_together_(finish_together) {}

    bool test() override {
        const int size = group_->size();
        if (!worked_) {
            if (round_->arrived.load(std::memory_order_acquire) < size) return false;
            {
                // A withdrawn round never finishes: the waiter's look at the
                // notices ends its call (the peer that stopped said why).
                std::shared_lock working(round_->working);
                if (round_->withdrawn) return false;
                if (work_) work_(*round_);
            }
            worked_ = true;
            if (finish_together_) group_->count_in(round_->finished);
        }
        if (finish_together_ && round_->finished.load(std::memory_order_acquire) < size) return false;
        if (!left_) {
            left_ = true;
            group_->leave(lane_, number_, *round_);
        }
        return true;
    }
    bool sleep(Clock::time_point until) override {
        return group_->sleep_unless([this] { return test(); }, until);
    }

private:
    std::shared_ptr<Group> group_;
    Lane lane_;
    uint64_t number_;
    std::shared_ptr<Round> round_;
    std::function<void(Round&)> work_;
    bool finish_together_;
    bool worked_ = false;
    bool left_ = false;
};

}  // namespace ddp::local
