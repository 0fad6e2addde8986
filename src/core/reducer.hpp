// Persistent gradient buckets (PyTorch DDP's reducer): a gradient list
// registered once, whose buckets libddp plans (the fusion planner, in
// reverse order), agrees on and owns, and whose reductions start during the
// backward pass as the buckets fill. See ddp_reducer_create in ddp.h for
// the contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/communicator.hpp"
#include "core/fusion_plan.hpp"

namespace ddp {

class Reducer {
public:
    /// Plans and allocates the buckets and agrees on the list with every
    /// rank (collective). `gradients` is validated (data is ignored);
    /// `names` (empty, or one per gradient) label the timeline's events.
    Reducer(Communicator& comm, std::span<const ddp_tensor> gradients, ddp_op op, int64_t bucket_bytes,
            double timeout_s, std::span<const char* const> names = {});
    Reducer(const Reducer&) = delete;
    Reducer& operator=(const Reducer&) = delete;

    int64_t size() const { return static_cast<int64_t>(location_.size()); }
    /// Gradient `index`'s storage in its bucket.
    ddp_tensor gradient(int64_t index) const;
    /// Marks gradient `index` computed; starts every bucket that is now
    /// complete and next in order. The first mark of a step agrees on it.
    void mark_ready(int64_t index);
    /// Finishes the step (collective) and readies the next one. With a
    /// `failure`, this rank fails the step on purpose: every peer's wait
    /// throws DDP_ERR_MISMATCH naming this rank and the reason.
    void wait(std::optional<std::string_view> failure = std::nullopt);
    bool step_open() const { return step_.has_value(); }

private:
    /// The state of plan step `b`'s bucket (its dtype, elements and members
    /// are the step's).
    struct Bucket {
        /// Shared with its reduction in flight, so that a failed step's
        /// reduction, which MPI may still write into, keeps it alive.
        std::shared_ptr<std::vector<std::byte>> storage;
        size_t unmarked = 0;                   ///< members not yet marked this step
        std::unique_ptr<Pending> pending;      ///< the reduction in flight, driven by this thread
        std::shared_ptr<RequestState> driven;  ///< or by the communicator's worker
        bool started = false;
        bool finished = false;
        int64_t started_ns = 0;  ///< when its reduction started (timeline on)
        int timeline_row = 0;
        const char* plane = "";  ///< the plane its reduction ran on, for the timeline ("": none)
    };
    /// Where a gradient lives; an empty gradient has no bucket.
    struct Location {
        static constexpr size_t no_bucket = static_cast<size_t>(-1);
        size_t bucket = no_bucket;
        int64_t offset = 0;  ///< in elements, within the bucket
    };

    /// Refuses a call while another reducer's step is open on the communicator.
    void require_step_owner() const;
    /// Agrees with every rank on this reducer's call `context` (its creation
    /// or a step's start), described by the registered list.
    void agree_on_call(CallContext& context);
    /// Opens the step: every rank agrees it starts a step of this reducer
    /// (never a different collective) before any bucket moves.
    void open_step();
    /// Starts buckets in index order (the same order on every rank, as MPI
    /// requires), as long as the next one is complete or `all` is set, at
    /// most a few at a time (with `all`, waiting for the oldest first).
    void start_buckets(bool all);
    /// Whether this step's marks are all in (every bucket complete).
    bool every_gradient_marked() const;
    /// How many started buckets have not finished (those on `plane`, when named).
    size_t in_flight(std::string_view plane = {}) const;
    /// Tests the reductions in flight, so that they progress between marks
    /// (when no background thread drives them).
    void progress();
    /// Waits for bucket `b`'s reduction, wherever it is driven.
    void finish_bucket(Bucket& bucket);
    /// Records bucket `b`'s reduction on the timeline, from start to now.
    void trace_bucket(size_t b, uint64_t sequence);
    /// Ends the step; after a failure, reductions still in flight stay with
    /// the control channel (holding their buckets' storage).
    void close_step(bool failed);

    Communicator& comm_;
    ddp_op op_;
    int64_t bucket_bytes_;
    double timeout_s_;
    std::vector<ddp_tensor> layout_;  ///< the registered list (dtype and count)
    FusionPlan plan_;                 ///< the buckets, in the order they start
    std::vector<Bucket> buckets_;     ///< one per plan step
    std::vector<Location> location_;
    std::vector<uint64_t> marked_;  ///< one bit per gradient, this step
    size_t next_to_start_ = 0;
    std::optional<CallContext> step_;
    /// Held while a step is open: no other collective may interleave.
    std::shared_ptr<const Communicator::ExclusiveSpan> span_;
    int64_t step_started_ns_ = 0;  ///< for the timeline's step event
    std::vector<std::string> names_;
    std::vector<const char*> name_pointers_;
};

}  // namespace ddp
