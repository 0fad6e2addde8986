// The operations started on one shared segment, driven in the order they
// started. Every rank numbers its steps (or rounds) and runs them in that one
// order, so a rank still finishing an earlier operation never meets a flag it
// could take for a later one, and a test() of a later operation first drives
// the ones before it.
#pragma once

#include <algorithm>
#include <deque>
#include <mutex>

namespace ddp::shm {

/// `Operation` has `bool advance()` (goes as far as the peers' flags allow;
/// true once done) and `bool done() const`. advance() runs under this
/// queue's lock, so it may use counters that only it touches.
template <class Operation>
class StartOrder {
public:
    void push(Operation* operation) {
        std::lock_guard lock(mutex_);
        queue_.push_back(operation);
    }
    /// An operation going away, finished or abandoned by a timeout.
    void remove(Operation* operation) {
        std::lock_guard lock(mutex_);
        std::erase(queue_, operation);
    }
    /// Advances the operations started before `operation`, then it; true
    /// once it is done. Never blocks on the peers.
    bool drive(const Operation& operation) {
        std::lock_guard lock(mutex_);
        while (!operation.done()) {
            if (!queue_.front()->advance()) return false;
            queue_.pop_front();
        }
        return true;
    }

private:
    std::mutex mutex_;
    std::deque<Operation*> queue_;  ///< started, unfinished, in start order
};

}  // namespace ddp::shm
