// Operations run one after another as one: how a rank of a group across
// processes x threads does its part of a round in steps (its process's
// threads meet, one thread of each process crosses to the other processes,
// the threads meet again). A step starts once the step before has finished,
// and, where it passes a gate, once the steps of that gate made before it
// have started.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "util/pending.hpp"

namespace ddp::mixed {

/// Keeps one kind of step in the order its chains were made. A rank's
/// operations may finish their first steps in any order, but its process
/// meets the others (over MPI or shared memory), and its threads meet in
/// their rounds, in one order on every rank: the order in which the rank
/// made its chains. It orders starts only, so a plane there must fix its
/// order at start (MPI's operations, the shared-memory plane's numbered
/// steps), not as it is tested; and an MPI operation that issues more MPI
/// calls as it progresses (the channel's allgather of lists) relies on no
/// other MPI step of the rank running beside it, which holds since a rank's
/// control exchanges and its data operations never overlap. A chain dropped before
/// its turn (abandoned on a timeout) holds up the later ones: by then the
/// communicator is broken.
class Gate {
public:
    /// The place of a step of this kind in a chain being made now.
    uint64_t ticket() { return issued_.fetch_add(1, std::memory_order_relaxed); }
    bool open_for(uint64_t ticket) const { return next_.load(std::memory_order_acquire) == ticket; }
    void passed() { next_.fetch_add(1, std::memory_order_acq_rel); }

private:
    std::atomic<uint64_t> issued_{0};
    std::atomic<uint64_t> next_{0};
};

class Chain final : public Pending {
public:
    struct Step {
        /// Starts the step's operation (nullptr: it finished at once).
        std::function<std::unique_ptr<Pending>()> start;
        Gate* gate = nullptr;  ///< where it must wait its turn, if anywhere
        uint64_t ticket = 0;   ///< its turn, taken when the chain is made
    };

    /// A step that waits for nobody.
    static Step step(std::function<std::unique_ptr<Pending>()> start) { return {std::move(start)}; }
    /// A step that starts in its turn at `gate` (the ticket is taken now).
    static Step step(Gate& gate, std::function<std::unique_ptr<Pending>()> start) {
        return {std::move(start), &gate, gate.ticket()};
    }

    /// Starts the first steps; nullptr where every step finished at once.
    /// `buffers`: scratch memory the steps point into, kept while the chain lives.
    static std::unique_ptr<Pending> start(std::vector<Step> steps, std::vector<std::shared_ptr<void>> buffers = {}) {
        auto chain = std::make_unique<Chain>(std::move(steps), std::move(buffers));
        if (chain->test()) return nullptr;
        return chain;
    }

    Chain(std::vector<Step> steps, std::vector<std::shared_ptr<void>> buffers)
        : buffers_(std::move(buffers)), steps_(std::move(steps)) {}

    bool test() override {
        while (true) {
            if (current_ && !current_->test()) return false;
            current_.reset();
            if (next_ == steps_.size()) return true;
            Step& step = steps_[next_];
            if (step.gate != nullptr && !step.gate->open_for(step.ticket)) return false;
            ++next_;
            current_ = step.start();
            if (step.gate != nullptr) step.gate->passed();
        }
    }
    /// Sleeps where the step in progress can (a round between threads),
    /// not where it cannot (an MPI request, which progresses only when
    /// tested) or while waiting its turn at a gate.
    bool sleep(Clock::time_point until) override { return current_ && current_->sleep(until); }
    /// Moves with each step passed and within the step in progress (a
    /// waiter compares the values, not their order).
    uint64_t progress() const override { return next_ + (current_ ? current_->progress() : 0); }

private:
    std::vector<std::shared_ptr<void>> buffers_;  // first: the operations below may point into them
    std::vector<Step> steps_;
    size_t next_ = 0;
    std::unique_ptr<Pending> current_;
};

}  // namespace ddp::mixed
