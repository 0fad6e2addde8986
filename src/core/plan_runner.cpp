#include "core/plan_runner.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/data_steps.hpp"
#include "trace/timeline.hpp"

namespace ddp {

namespace {

// Fills a timeline event with a plan step's details (only when recording).
void describe_step(trace::Span& span, const FusionPlan& plan, const PlanStep& step, size_t index,
                   const CollectiveCall& call) {
    if (!span.on()) return;
    span.event().bytes = step_bytes(step);
    span.event().index = static_cast<int64_t>(index);
    if (!call.names.empty()) span.event().names = trace::names_json(call.names, plan.members_of(step));
}

// Records step `index`'s transfer on `plane`, started at `started_ns`, on
// the timeline (only when recording).
void record_transfer(trace::Timeline& timeline, const CallContext& context, const FusionPlan& plan, size_t index,
                     const CollectiveCall& call, int64_t started_ns, const char* plane) {
    if (!timeline.on()) return;
    const PlanStep& step = plan.steps[index];
    trace::Event transfer = trace::ended_now(
        "transfer", trace::thread_row(trace::Row::transfer, static_cast<int>(index % 2)), started_ns, context.sequence);
    transfer.bytes = step_bytes(step);
    transfer.index = static_cast<int64_t>(index);
    transfer.plane = plane;
    if (!call.names.empty()) transfer.names = trace::names_json(call.names, plan.members_of(step));
    timeline.record(std::move(transfer));
}

// The largest bucket any fused step of the plan packs into.
size_t largest_bucket(const FusionPlan& plan, const PlanSteps& steps) {
    size_t largest = 0;
    for (const PlanStep& step : plan.steps)
        if (step.fused) largest = std::max(largest, steps.bucket_bytes(step));
    return largest;
}

// Up to this many bytes the fusion buffer holds two buckets, so that two
// steps in buckets can be in flight; beyond (an allgather's bucket grows
// with the ranks) it holds one, and a step waits for the one before it.
constexpr size_t most_pipelined_bytes = size_t{128} << 20;

}  // namespace

// Runs every plan step, pipelined: step k+1 is packed before step k is
// waited for, so packing overlaps the transfer, and started before it too
// unless both are on one plane that does not run two operations alongside
// (HostPlane::overlaps_operations), so that two are in flight (steps in
// buckets alternate between two halves of the fusion buffer). Each wait is
// held to the call's deadline. The buffer is taken at the first step that
// needs a bucket: a plan whose steps all run where their bytes lie (one
// region of memory) takes none.
void run_plan(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
              const PlanSteps& steps) {
    trace::Timeline& timeline = comm.trace().timeline;
    const size_t half = largest_bucket(plan, steps);
    const size_t buckets = 2 * half <= most_pipelined_bytes ? 2 : 1;
    std::byte* buffers = nullptr;
    struct InFlight {
        const PlanStep* step = nullptr;
        size_t index = 0;             // the step's place in the plan
        Place place = Place::caller;
        std::byte* bucket = nullptr;  // for Place::bucket
        std::unique_ptr<Pending> pending;
        const HostPlane* plane = nullptr;  // the plane it runs on
        int64_t started_ns = 0;       // for the timeline
    };
    // Once per step: a wait that throws leaves the step finished (abandoned).
    auto finish = [&](InFlight& flight) {
        const PlanStep* step = std::exchange(flight.step, nullptr);
        if (step == nullptr) return;
        comm.control().wait(context, std::move(flight.pending), WaitStyle::for_data);
        record_transfer(timeline, context, plan, flight.index, call, flight.started_ns, flight.plane->name());
        if (const char* after = steps.after(flight.place)) {
            trace::Span span(timeline, after, trace::Row::work, context.sequence);
            describe_step(span, plan, *step, flight.index, call);
            steps.unpack(*step, flight.place, flight.bucket);
        }
    };
    InFlight previous;
    size_t next_half = 0;
    for (size_t index = 0; index < plan.steps.size(); ++index) {
        const PlanStep& step = plan.steps[index];
        InFlight current;
        current.step = &step;
        current.index = index;
        try {
            HostPlane& plane = comm.planes().host_for(steps.op(), step.dtype, steps.reduction(), step_bytes(step));
            current.plane = &plane;
            current.place = steps.place(step, plane);
            if (current.place == Place::bucket) {
                if (buffers == nullptr) buffers = comm.memory().fusion_buffer(buckets * half).data();
                if (buckets == 1) finish(previous);  // its bucket is the one this step packs into
                current.bucket = buffers + half * next_half;
                next_half = (next_half + 1) % buckets;
            }
            if (const char* before = steps.before(current.place)) {
                trace::Span span(timeline, before, trace::Row::work, context.sequence);
                describe_step(span, plan, step, index, call);
                steps.pack(step, current.bucket);
            }
            if (previous.plane == &plane && !plane.overlaps_operations()) finish(previous);
            if (timeline.on()) current.started_ns = trace::now_ns();
            current.pending = steps.start(plane, step, current.place, current.bucket);
        } catch (...) {
            // A step refused on every rank alike (no plane runs it, or a
            // plane's limit): the step before it still runs everywhere, and
            // may write into its buffers, so it finishes before the refusal
            // goes up.
            finish(previous);
            throw;
        }
        try {
            finish(previous);
        } catch (...) {
            // The step already started may still write: keep it with the abandoned ones.
            if (current.pending) comm.channel().abandon(std::move(current.pending));
            throw;
        }
        previous = std::move(current);
    }
    finish(previous);
}

}  // namespace ddp
