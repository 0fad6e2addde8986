#include "core/reducer.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "control/agreement.hpp"
#include "core/data_steps.hpp"
#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"
#include "trace/timeline.hpp"

namespace ddp {

namespace {

// How many bucket reductions may be in flight at once (on a plane that does
// not run operations alongside each other, HostPlane::overlaps_operations,
// one of its own).
constexpr size_t max_in_flight = 4;

bool is_marked(std::span<const uint64_t> bits, size_t index) { return (bits[index / 64] >> (index % 64)) & 1u; }

// A step's words: the marked bits, then, from a rank that fails its step on
// purpose, its reason (append_reason).
std::vector<uint64_t> step_words(std::span<const uint64_t> marked, std::optional<std::string_view> failure) {
    std::vector<uint64_t> words(marked.begin(), marked.end());
    if (failure) append_reason(words, *failure);
    return words;
}

// The reason in a failed step's words, or nullopt when the rank did not fail it.
std::optional<std::string> step_failure(std::span<const uint64_t> words, size_t mark_words) {
    if (words.size() <= mark_words) return std::nullopt;
    return reason_at(words, mark_words);
}

// Ranks a and b ended a step differently: name a rank that failed it, or
// else the first gradient one of them marked and the other did not.
std::string explain_marks(std::span<const uint64_t> a, int rank_a, std::span<const uint64_t> b, int rank_b,
                          uint64_t step, size_t mark_words) {
    for (const auto& [words, rank, other] : {std::tuple(a, rank_a, rank_b), std::tuple(b, rank_b, rank_a)})
        if (const std::optional<std::string> reason = step_failure(words, mark_words))
            return "reducer step #" + std::to_string(step) + ": rank " + std::to_string(rank) +
                   " failed its step (unlike rank " + std::to_string(other) + ")" +
                   (reason->empty() ? std::string() : ": " + *reason) + "; this step's gradients are undefined";
    for (size_t i = 0; i < 64 * mark_words; ++i) {
        if (is_marked(a, i) == is_marked(b, i)) continue;
        const bool a_marked = is_marked(a, i);
        return "reducer step #" + std::to_string(step) + ": rank " + std::to_string(a_marked ? rank_a : rank_b) +
               " marked gradient " + std::to_string(i) + " ready but rank " +
               std::to_string(a_marked ? rank_b : rank_a) +
               " did not (every rank must mark the same gradients each step; this step's gradients are undefined)";
    }
    return "reducer step #" + std::to_string(step) + ": ranks marked different gradients";
}

/// What other collectives get while a step is open.
constexpr std::string_view step_open_refusal =
    "a reducer step is open on this communicator (gradients were marked ready): call ddp_reducer_wait before any "
    "other collective, so that no collective interleaves with the bucket reductions";

}  // namespace

Reducer::Reducer(Communicator& comm, std::span<const ddp_tensor> gradients, ddp_op op, int64_t bucket_bytes,
                 double timeout_s, std::span<const char* const> names)
    : comm_(comm), op_(op), bucket_bytes_(bucket_bytes), timeout_s_(timeout_s) {
    for (const char* name : names)
        names_.push_back(name != nullptr ? std::string(name) : std::string(1, '#').append(std::to_string(names_.size())));
    for (const std::string& name : names_) name_pointers_.push_back(name.c_str());
    for (const ddp_tensor& tensor : gradients)
        layout_.push_back(ddp_tensor{nullptr, tensor.count, tensor.dtype, tensor.device_type, 0, 0});
    // Agree first: a rank whose list differs allocates nothing.
    ControlPlane& control = comm_.control();
    CallContext context = control.begin(CollectiveKind::reducer_create, timeout_s_);
    CallScope scope(control);
    trace::Span span(comm_.trace().timeline, "reducer_create", trace::Row::calls, context.sequence);
    if (span.on()) {
        span.event().plane = comm_.transport().name();
        if (!names.empty()) span.event().names = trace::names_json(names);
    }
    agree_on_call(context);

    plan_ = plan_fusion(layout_, gradient_bucket_policy(bucket_bytes));
    location_.resize(layout_.size());
    buckets_.resize(plan_.steps.size());
    for (size_t b = 0; b < plan_.steps.size(); ++b) {
        const PlanStep& step = plan_.steps[b];
        int64_t offset = 0;
        for (int64_t index : plan_.members_of(step)) {
            location_[static_cast<size_t>(index)] = Location{b, offset};
            offset += layout_[static_cast<size_t>(index)].count;
        }
        buckets_[b].storage = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(step_bytes(step)));
        buckets_[b].unmarked = step.member_count;
    }
    marked_.assign((gradients.size() + 63) / 64, 0);
}

void Reducer::agree_on_call(CallContext& context) {
    comm_.agreement().agree(context, encode(CallDescription{context.kind, op_, 0, bucket_bytes_, 0, layout_}));
}

ddp_tensor Reducer::gradient(int64_t index) const {
    const ddp_tensor& layout = layout_[static_cast<size_t>(index)];
    const Location& where = location_[static_cast<size_t>(index)];
    std::byte* start = where.bucket == Location::no_bucket
                           ? nullptr
                           : buckets_[where.bucket].storage->data() +
                                 static_cast<size_t>(where.offset) * element_size(dtype_of(layout));
    return ddp_tensor{start, layout.count, layout.dtype, DDP_DEVICE_CPU, 0, 0};
}

void Reducer::require_step_owner() const {
    if (!span_ && comm_.exclusive_span_open())
        fail(DDP_ERR_INVALID_ARGUMENT,
             "another reducer's step is open on this communicator: call ddp_reducer_wait on it first (the steps "
             "of two reducers must not interleave)");
}

void Reducer::open_step() {
    if (step_) return;
    comm_.drain_async();  // earlier async requests first: collectives run in one order
    step_ = comm_.control().begin(CollectiveKind::reducer_step, timeout_s_);
    span_ = comm_.open_exclusive_span(step_open_refusal);
    step_started_ns_ = comm_.trace().timeline.on() ? trace::now_ns() : 0;
    try {
        agree_on_call(*step_);
    } catch (...) {
        close_step(false);
        throw;
    }
}

void Reducer::mark_ready(int64_t index) {
    require_step_owner();
    comm_.control().require_usable();
    const auto i = static_cast<size_t>(index);
    if (is_marked(marked_, i))
        fail(DDP_ERR_INVALID_ARGUMENT, "gradient " + std::to_string(index) + " was already marked ready in this step");
    open_step();
    marked_[i / 64] |= uint64_t{1} << (i % 64);
    if (const size_t b = location_[i].bucket; b != Location::no_bucket) --buckets_[b].unmarked;
    if (comm_.trace().timeline.on())
        trace::instant(comm_.trace().timeline, "mark_ready", trace::Row::calls, step_->sequence, index, "gradient",
                       name_pointers_.empty() ? std::string() : trace::names_json(name_pointers_, std::span(&index, 1)));
    progress();
    start_buckets(false);
}

bool Reducer::every_gradient_marked() const {
    return std::all_of(buckets_.begin(), buckets_.end(), [](const Bucket& bucket) { return bucket.unmarked == 0; });
}

size_t Reducer::in_flight(std::string_view plane) const {
    size_t count = 0;
    for (size_t b = 0; b < next_to_start_; ++b) {
        const Bucket& bucket = buckets_[b];
        if (!plane.empty() && plane != bucket.plane) continue;
        if (!bucket.finished && (bucket.pending || (bucket.driven && !bucket.driven->done()))) ++count;
    }
    return count;
}

void Reducer::start_buckets(bool all) {
    // The worker drives a bucket while this thread computes the next
    // gradients. Once every gradient is marked there is nothing left to
    // compute: this thread's next call waits, and drives the bucket itself
    // rather than sleep until the worker wakes it (beside busy cores that
    // wake-up waited out a time slice: a 1 MB list took 3.5 ms, not 0.3).
    const bool hand_to_worker = !all && comm_.channel().allows_concurrent_calls() && !every_gradient_marked();
    while (next_to_start_ < buckets_.size() && (all || buckets_[next_to_start_].unmarked == 0)) {
        // A few in flight at a time: Open MPI progresses a hundred
        // concurrent non-blocking allreduces more slowly than a few; and
        // one at a time on the mpi plane (2 ranks, DDP_SHM=0, shared memory
        // and TCP: median 0.68x the time of 4 in flight, range 0.30-1.72x).
        const PlanStep& next = plan_.steps[next_to_start_];
        const HostPlane& plane = allreduce_plane(comm_, next.elements, next.dtype, op_);
        const bool full = plane.overlaps_operations() ? in_flight() >= max_in_flight : in_flight(plane.name()) >= 1;
        if (full) {
            if (!all) return;  // a later mark_ready or wait starts it
            for (size_t b = 0; b < next_to_start_; ++b)
                if (!buckets_[b].finished) {
                    finish_bucket(buckets_[b]);
                    break;
                }
            continue;
        }
        const size_t b = next_to_start_++;
        Bucket& bucket = buckets_[b];
        bucket.started = true;
        trace::Timeline& timeline = comm_.trace().timeline;
        bucket.started_ns = timeline.on() ? trace::now_ns() : 0;
        bucket.timeline_row = timeline.on() ? trace::thread_row(trace::Row::transfer, static_cast<int>(b % trace::transfer_lanes)) : 0;
        if (comm_.size() == 1) {
            bucket.finished = true;
            trace_bucket(b, step_->sequence);
            continue;
        }
        bucket.pending = start_allreduce_step(comm_, bucket.storage->data(), plan_.steps[b].elements,
                                              plan_.steps[b].dtype, op_, bucket.storage, &bucket.plane);
        if (!hand_to_worker) continue;
        // std::function needs a copyable job, hence the shared holder.
        auto holder = std::make_shared<std::unique_ptr<Pending>>(std::move(bucket.pending));
        bucket.driven = comm_.worker().submit([this, holder, context = *step_, b]() mutable {
            comm_.control().wait(context, std::move(*holder), WaitStyle::for_data);
            trace_bucket(b, context.sequence);  // done now, not when the caller notices
        });
    }
}

void Reducer::progress() {
    for (size_t b = 0; b < next_to_start_; ++b) {
        Bucket& bucket = buckets_[b];
        if (bucket.pending && bucket.pending->test()) {
            bucket.pending.reset();
            bucket.finished = true;
            trace_bucket(b, step_->sequence);
        } else if (bucket.driven && bucket.driven->done()) {
            finish_bucket(bucket);  // collects the worker's status without waiting
        }
    }
}

void Reducer::finish_bucket(Bucket& bucket) {
    if (bucket.driven) {
        // Not begun by the worker yet: this thread, about to wait for it
        // anyway, drives it itself instead of sleeping until the worker has.
        if (auto job = comm_.worker().withdraw(bucket.driven)) {
            bucket.driven.reset();
            (*job)();
        } else {
            std::string message;
            const ddp_status status = bucket.driven->wait(message);
            bucket.driven.reset();
            if (status != DDP_OK) fail(status, message);
        }
    } else {
        comm_.control().wait(*step_, std::move(bucket.pending), WaitStyle::for_data);
        trace_bucket(static_cast<size_t>(&bucket - buckets_.data()), step_->sequence);
    }
    bucket.finished = true;
}

void Reducer::trace_bucket(size_t b, uint64_t sequence) {
    trace::Timeline& timeline = comm_.trace().timeline;
    const Bucket& bucket = buckets_[b];
    const PlanStep& step = plan_.steps[b];
    if (!timeline.on() || bucket.started_ns == 0) return;  // started before the timeline was
    trace::Event event = trace::ended_now("bucket", bucket.timeline_row, bucket.started_ns, sequence);
    event.bytes = step_bytes(step);
    event.index = static_cast<int64_t>(b);
    event.plane = *bucket.plane != 0 ? bucket.plane : comm_.transport().name();  // "": it moved nothing
    if (!name_pointers_.empty()) event.names = trace::names_json(name_pointers_, plan_.members_of(step));
    timeline.record(std::move(event));
}

void Reducer::wait(std::optional<std::string_view> failure) {
    require_step_owner();
    open_step();
    try {
        start_buckets(true);  // unmarked ones too: no peer may wait for ever
        const double divisor = avg_divisor(comm_, op_);
        for (size_t b = 0; b < buckets_.size(); ++b) {
            Bucket& bucket = buckets_[b];
            if (!bucket.finished) finish_bucket(bucket);
            if (divisor != 1.0) {
                const PlanStep& step = plan_.steps[b];
                trace::Span span(comm_.trace().timeline, "divide", trace::Row::work, step_->sequence);
                if (span.on()) {
                    span.event().index = static_cast<int64_t>(b);
                    span.event().bytes = step_bytes(step);
                }
                divide_copy(bucket.storage->data(), bucket.storage->data(), step.elements, step.dtype, divisor);
            }
        }
        const uint64_t step = step_->sequence;
        const size_t mark_words = marked_.size();
        comm_.agreement().agree_on_words(*step_, step_words(marked_, failure),
                                         [step, mark_words](auto a, int rank_a, auto b, int rank_b) {
                                             return explain_marks(a, rank_a, b, rank_b, step, mark_words);
                                         });
    } catch (const Error& error) {
        close_step(true);
        // A failure of this rank's own (not a mismatch or a timeout every
        // rank sees) must not leave the peers waiting for it.
        if (error.status() != DDP_ERR_MISMATCH && error.status() != DDP_ERR_TIMEOUT)
            comm_.control().abort(error.what());
        throw;
    } catch (...) {
        close_step(true);
        comm_.control().abort("an unexpected error in ddp_reducer_wait");
        throw;
    }
    close_step(false);
}

void Reducer::close_step(bool failed) {
    for (Bucket& bucket : buckets_) {
        if (failed && bucket.driven) {  // the worker ends it within the step's deadline
            std::string ignored;
            bucket.driven->wait(ignored);
            bucket.driven.reset();
        }
        // A reduction that did not finish may still write into the bucket,
        // whose storage it holds.
        if (failed && bucket.pending) comm_.channel().abandon(std::move(bucket.pending));
        bucket.started = bucket.finished = false;
    }
    for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].unmarked = plan_.steps[b].member_count;
    std::fill(marked_.begin(), marked_.end(), 0);
    next_to_start_ = 0;
    trace::Timeline& timeline = comm_.trace().timeline;
    if (timeline.on() && step_started_ns_ != 0) {
        trace::Event event = trace::ended_now("reducer step", trace::thread_row(trace::Row::calls), step_started_ns_,
                                              step_->sequence);
        event.plane = comm_.transport().name();
        event.failed = failed;
        event.bytes = 0;
        for (const PlanStep& step : plan_.steps) event.bytes += step_bytes(step);
        timeline.record(std::move(event));
    }
    step_.reset();
    comm_.control().end(failed);
    span_.reset();
}

}  // namespace ddp
