#include "core/plan_runner.hpp"

#include <cstring>
#include <vector>

#include "core/data_steps.hpp"
#include "device/cpu/elementwise.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"

namespace ddp {

std::byte* pack_one(const ddp_tensor& tensor, std::byte* bucket) {
    std::memcpy(bucket, tensor.data, byte_size(tensor));
    return bucket + byte_size(tensor);
}

const std::byte* unpack_one(const ddp_tensor& tensor, const std::byte* bucket, double divisor) {
    if (divisor != 1.0)
        divide_copy(tensor.data, bucket, tensor.count, dtype_of(tensor), divisor);
    else
        std::memcpy(tensor.data, bucket, byte_size(tensor));
    return bucket + byte_size(tensor);
}

namespace {

// Copies the members of a fused step into the bucket, back to back.
void pack(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors, std::byte* bucket) {
    for (int64_t index : plan.members_of(step)) bucket = pack_one(tensors[static_cast<size_t>(index)], bucket);
}

// Copies the bucket back into the members.
void unpack(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors,
            const std::byte* bucket, double divisor) {
    for (int64_t index : plan.members_of(step))
        bucket = unpack_one(tensors[static_cast<size_t>(index)], bucket, divisor);
}

// Whether this rank's members of a fused step already lie back to back in
// memory (views into one flat gradient buffer, as ComponentArrays or a
// destructured model give): then the step runs on them in place, with no
// packing. Only the buffer differs between ranks, never the plane's call, so
// ranks with different memory layouts still issue the same operations.
std::byte* contiguous_members(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors) {
    const auto members = plan.members_of(step);
    auto* start = static_cast<std::byte*>(tensors[static_cast<size_t>(members[0])].data);
    const std::byte* next = start;
    for (int64_t index : members) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        if (byte_size(tensor) == 0) continue;
        if (tensor.data != next) return nullptr;
        next += byte_size(tensor);
    }
    return start;
}

// Where each member of a fused step lies.
std::vector<Piece> pieces_of(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors) {
    std::vector<Piece> pieces;
    for (int64_t index : plan.members_of(step)) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        if (byte_size(tensor) > 0) pieces.push_back({static_cast<std::byte*>(tensor.data), byte_size(tensor)});
    }
    return pieces;
}

}  // namespace

// Runs every plan step through `start`, pipelined: step k+1 is packed and
// started before step k is waited for, so packing overlaps the transfer and
// two operations are in flight (fused steps alternate between two halves
// of the fusion buffer). Each wait is held to the call's deadline. A step
// runs on the tensor itself for single tensors and for members already
// contiguous in memory, on the members where they lie when the plane gathers
// them (run.start_pieces), else on a bucket (packed before when
// `pack_before`, unpacked after when `unpack_after`).
void run_plan(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
              const PlanRun& run, const StartStep& start) {
    const bool pack_before = run.pack_before, unpack_after = run.unpack_after;
    const double divisor = run.divisor;
    const std::span<const ddp_tensor> tensors = call.tensors;
    trace::Timeline& timeline = comm.control().timeline();
    const auto half = static_cast<size_t>(plan.largest_bucket_bytes);
    std::byte* buffers = comm.fusion_buffer(2 * half).data();
    struct InFlight {
        const PlanStep* step = nullptr;
        size_t index = 0;            // the step's place in the plan
        std::byte* data = nullptr;   // where the step ran
        bool in_bucket = false;      // on a packed bucket (else on the caller's memory)
        bool in_pieces = false;      // on the members where they lie
        std::unique_ptr<Pending> pending;
        const char* plane = nullptr; // the plane it runs on
        int64_t started_ns = 0;      // for the timeline
    };
    auto finish = [&](InFlight& flight) {
        if (flight.step == nullptr) return;
        const PlanStep& step = *flight.step;
        comm.control().wait(context, std::move(flight.pending), WaitStyle::for_data);
        record_transfer(comm, context, plan, flight.index, call, flight.started_ns, flight.plane);
        if (flight.in_bucket) {
            if (unpack_after) {
                trace::Span span(timeline, divisor != 1.0 ? "unpack + divide" : "unpack", trace::Row::work,
                                 context.sequence);
                describe_step(span, plan, step, flight.index, call);
                unpack(plan, step, tensors, flight.data, divisor);
            }
        } else if (unpack_after && divisor != 1.0) {
            trace::Span span(timeline, "divide", trace::Row::work, context.sequence);
            describe_step(span, plan, step, flight.index, call);
            if (flight.in_pieces)
                for (int64_t index : plan.members_of(step)) {
                    const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
                    divide_copy(tensor.data, tensor.data, tensor.count, step.dtype, divisor);
                }
            else
                divide_copy(flight.data, flight.data, step.elements, step.dtype, divisor);
        }
        flight.step = nullptr;
    };
    InFlight previous;
    size_t next_half = 0;
    for (size_t index = 0; index < plan.steps.size(); ++index) {
        const PlanStep& step = plan.steps[index];
        InFlight current;
        current.step = &step;
        current.index = index;
        HostPlane& plane = comm.planes().host_for(run.op, step.dtype, run.reduction, step_bytes(step));
        current.plane = plane.name();
        std::vector<Piece> pieces;
        if (!step.fused) {
            current.data = static_cast<std::byte*>(tensors[static_cast<size_t>(plan.members_of(step)[0])].data);
        } else if (std::byte* in_place = contiguous_members(plan, step, tensors)) {
            current.data = in_place;
        } else if (run.start_pieces && plane.gathers_pieces()) {
            pieces = pieces_of(plan, step, tensors);
            current.in_pieces = true;
        } else {
            current.data = buffers + half * next_half;
            next_half ^= 1;
            current.in_bucket = true;
            if (pack_before) {
                trace::Span span(timeline, "pack", trace::Row::work, context.sequence);
                describe_step(span, plan, step, index, call);
                pack(plan, step, tensors, current.data);
            }
        }
        if (timeline.on()) current.started_ns = trace::now_ns();
        current.pending = current.in_pieces ? run.start_pieces(plane, pieces, step.elements, step.dtype)
                                            : start(plane, current.data, step.elements, step.dtype);
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
