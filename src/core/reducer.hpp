// Persistent gradient buckets (PyTorch DDP's reducer): a gradient list
// registered once, whose buckets libddp plans, agrees on and owns, and whose
// reductions start during the backward pass as the buckets fill. See
// ddp_reducer_create in ddp.h for the contract.
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

namespace ddp {

class Reducer {
public:
    /// Plans and allocates the buckets and agrees on the list with every
    /// rank (collective). `gradients` is validated (data is ignored);
    /// `names` (empty, or one per gradient) label the timeline's events.
    Reducer(Communicator& comm, std::span<const ddp_tensor> gradients, ddp_op op, int64_t bucket_bytes,
            double timeout_s, std::span<const char* const> names = {});
    /// Keeps the buckets alive with the backend when a failed step may have
    /// left MPI writing into them.
    ~Reducer();
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
    /// The communicator was finalized: nothing is in flight any more, so the
    /// buckets go with the reducer instead of to the (gone) backend.
    void communicator_gone() { transfers_abandoned_ = false; }

private:
    struct Bucket {
        ddp_dtype dtype = DDP_DTYPE_F32;
        int64_t elements = 0;
        std::vector<std::byte> storage;
        size_t unmarked = 0;  ///< members not yet marked this step
        size_t member_count = 0;
        std::unique_ptr<Pending> pending;      ///< the reduction in flight, driven by this thread
        std::shared_ptr<RequestState> driven;  ///< or by the communicator's worker
        bool started = false;
        bool finished = false;
        std::vector<int64_t> members;  ///< gradient indices, for the timeline
        int64_t started_ns = 0;        ///< when its reduction started (timeline on)
        int timeline_row = 0;
    };
    struct Location {
        size_t bucket;
        int64_t offset;  ///< in elements, within the bucket
        int64_t count;
        ddp_dtype dtype;
    };

    /// Refuses a call while another reducer's step is open on the communicator.
    void require_step_owner() const;
    /// Opens the step: every rank agrees it starts a step of this reducer
    /// (never a different collective) before any bucket moves.
    void open_step();
    /// Starts buckets in index order (the same order on every rank, as MPI
    /// requires), as long as the next one is complete or `all` is set, at
    /// most a few at a time (with `all`, waiting for the oldest first).
    void start_buckets(bool all);
    /// How many started buckets have not finished.
    size_t in_flight() const;
    /// Tests the reductions in flight, so that they progress between marks
    /// (when no background thread drives them).
    void progress();
    /// Waits for bucket `b`'s reduction, wherever it is driven.
    void finish_bucket(Bucket& bucket);
    /// Records bucket `b`'s reduction on the timeline, from start to now.
    void trace_bucket(size_t b, uint64_t sequence);
    /// Ends the step; after a failure, remembers whether MPI may still
    /// write into a bucket.
    void close_step(bool failed);
    std::vector<uint64_t> description() const;

    Communicator& comm_;
    ddp_op op_;
    int64_t bucket_bytes_;
    double timeout_s_;
    std::vector<ddp_tensor> layout_;  ///< the registered list (dtype and count)
    std::vector<Bucket> buckets_;
    std::vector<Location> location_;
    std::vector<uint64_t> marked_;  ///< one bit per gradient, this step
    size_t next_to_start_ = 0;
    std::optional<CallContext> step_;
    int64_t step_started_ns_ = 0;  ///< for the timeline's step event
    std::vector<std::string> names_;
    std::vector<const char*> name_pointers_;
    bool transfers_abandoned_ = false;  ///< a failed step left reductions in flight
};

}  // namespace ddp
