#include "core/collectives.hpp"

#include <cstring>
#include <new>
#include <functional>

#include "control/agreement.hpp"
#include "core/allgather.hpp"
#include "core/data_steps.hpp"
#include "core/reduce_scatter.hpp"
#include "core/device_collectives.hpp"
#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"
#include "trace/timeline.hpp"

namespace ddp {

namespace {

// Copies `tensor` into the bucket at `bucket`; returns the end of its bytes.
std::byte* pack_one(const ddp_tensor& tensor, std::byte* bucket) {
    std::memcpy(bucket, tensor.data, byte_size(tensor));
    return bucket + byte_size(tensor);
}

// Copies the tensor's bytes back from the bucket, dividing by `divisor` for
// AVG; returns the end of its bytes in the bucket.
const std::byte* unpack_one(const ddp_tensor& tensor, const std::byte* bucket, double divisor) {
    if (divisor != 1.0)
        divide_copy(tensor.data, bucket, tensor.count, dtype_of(tensor), divisor);
    else
        std::memcpy(tensor.data, bucket, byte_size(tensor));
    return bucket + byte_size(tensor);
}

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

// The bytes of a host allreduce small enough to travel inside agreement's
// messages (one dtype, 1 to max_carried_bytes bytes, more than one rank),
// or 0 when it takes the plan. Ranks that decide differently passed
// different lists, which agreement reports.
int64_t carried_bytes(Communicator& comm, const CollectiveCall& call) {
    if (call.kind != CollectiveKind::allreduce || call.on_device || comm.backend().size() == 1 ||
        call.tensors.empty())
        return 0;
    int64_t bytes = 0;
    for (const ddp_tensor& tensor : call.tensors) {
        if (tensor.dtype != call.tensors[0].dtype) return 0;
        bytes += byte_size(tensor);
    }
    return bytes <= max_carried_bytes ? bytes : 0;
}

// Whether this rank's members of a fused step already lie back to back in
// memory (views into one flat gradient buffer, as ComponentArrays or a
// destructured model give): then the step runs on them in place, with no
// packing. Only the buffer differs between ranks, never the backend call, so
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

/// What a plan step does on one buffer: start the backend operation.
using StartStep = std::function<std::unique_ptr<Pending>(void* data, int64_t count, ddp_dtype dtype)>;

// Runs every plan step through `start`, pipelined: step k+1 is packed and
// started before step k is waited for, so packing overlaps the transfer and
// two operations are in flight (fused steps alternate between two halves
// of the fusion buffer). Each wait is held to the call's deadline. A step
// runs on the tensor itself for single tensors and for members already
// contiguous in memory, else on a bucket (packed before when `pack_before`,
// unpacked after when `unpack_after`).
void run_plan(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
              bool pack_before, bool unpack_after, double divisor, const StartStep& start) {
    const std::span<const ddp_tensor> tensors = call.tensors;
    trace::Timeline& timeline = comm.control().timeline();
    const auto half = static_cast<size_t>(plan.largest_bucket_bytes);
    std::byte* buffers = comm.fusion_buffer(2 * half).data();
    struct InFlight {
        const PlanStep* step = nullptr;
        size_t index = 0;            // the step's place in the plan
        std::byte* data = nullptr;   // where the step ran
        bool in_bucket = false;      // on a packed bucket (else on the caller's memory)
        std::unique_ptr<Pending> pending;
        int64_t started_ns = 0;      // for the timeline
    };
    auto finish = [&](InFlight& flight) {
        if (flight.step == nullptr) return;
        const PlanStep& step = *flight.step;
        comm.control().wait(context, std::move(flight.pending), WaitStyle::for_data);
        record_transfer(comm, context, plan, flight.index, call, flight.started_ns);
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
        if (!step.fused) {
            current.data = static_cast<std::byte*>(tensors[static_cast<size_t>(plan.members_of(step)[0])].data);
        } else if (std::byte* in_place = contiguous_members(plan, step, tensors)) {
            current.data = in_place;
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
        current.pending = start(current.data, step.elements, step.dtype);
        try {
            finish(previous);
        } catch (...) {
            // The step already started may still write: keep it with the abandoned ones.
            if (current.pending) comm.backend().abandon(std::move(current.pending));
            throw;
        }
        previous = std::move(current);
    }
    finish(previous);
}

// Root's tensors to every rank, fused as the plan says.
void broadcast_planned(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
                       int root) {
    Backend& backend = comm.backend();
    const bool is_root = backend.rank() == root;
    run_plan(comm, context, plan, call, is_root, !is_root, 1.0, [&](void* data, int64_t count, ddp_dtype dtype) {
        return backend.start_broadcast(data, count * static_cast<int64_t>(element_size(dtype)), root);
    });
}

// check_replicas' data phase: (max hash, ~min hash) per tensor is equal on
// every rank iff max == min.
void compare_replicas(Communicator& comm, CallContext& context, const CollectiveCall& call) {
    Backend& backend = comm.backend();
    const auto tensors = call.tensors;
    std::vector<uint64_t> extremes(2 * tensors.size()), hashes(tensors.size());
    const trace::Span span(comm.control().timeline(), "hash", trace::Row::work, context.sequence);
    for (size_t i = 0; i < tensors.size(); ++i) {
        hashes[i] = hash_bytes(tensors[i].data, byte_size(tensors[i]));
        extremes[2 * i] = hashes[i];
        extremes[2 * i + 1] = ~hashes[i];
    }
    comm.control().wait(context, backend.start_max_u64(extremes), WaitStyle::for_data);
    *call.identical = true;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (extremes[2 * i] == ~extremes[2 * i + 1]) continue;
        std::vector<std::vector<uint64_t>> all;
        comm.control().wait(context, backend.start_allgather_u64(std::span(&hashes[i], 1), all), WaitStyle::for_data);
        size_t other = 1;
        while (other < all.size() && all[other][0] == all[0][0]) ++other;
        *call.identical = false;
        *call.difference = "check_replicas: tensor " + std::to_string(i) + " (" + dtype_name(tensors[i].dtype) + "[" +
                           std::to_string(tensors[i].count) + "]) differs between rank 0 and rank " +
                           std::to_string(other);
        return;
    }
}

void move_data(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    Backend& backend = comm.backend();
    switch (call.kind) {
    case CollectiveKind::allreduce:
        run_plan(comm, context, plan, call, true, true, avg_divisor(comm, call.op),
                 [&](void* data, int64_t count, ddp_dtype dtype) {
                     return backend.start_allreduce(data, count, dtype, backend_op(call.op));
                 });
        return;
    case CollectiveKind::reduce: {
        const bool is_root = backend.rank() == call.root;
        run_plan(comm, context, plan, call, true, is_root, avg_divisor(comm, call.op),
                 [&](void* data, int64_t count, ddp_dtype dtype) {
                     return backend.start_reduce(data, count, dtype, backend_op(call.op), call.root);
                 });
        return;
    }
    case CollectiveKind::broadcast: broadcast_planned(comm, context, plan, call, call.root); return;
    case CollectiveKind::sync_optimizer_state:
        broadcast_planned(comm, context, plan, call, call.root);
        broadcast_scalars(comm, context, call);
        return;
    case CollectiveKind::allgather: return allgather_planned(comm, context, plan, call);
    case CollectiveKind::reduce_scatter: return reduce_scatter_planned(comm, context, plan, call);
    case CollectiveKind::check_replicas: return;  // compared without a plan, above
    case CollectiveKind::barrier: return;         // agreement needs every rank: it is the barrier
    case CollectiveKind::reducer_create:
    case CollectiveKind::reducer_step:
    case CollectiveKind::timeline_start:
    case CollectiveKind::comm_split:
    case CollectiveKind::comm_split_node: break;  // their own (core/reducer.cpp, core/split.cpp, api)
    }
}

// A small allreduce: packed, reduced inside agreement (one round of
// messages instead of two), unpacked only once every rank agreed.
void allreduce_in_agreement(Communicator& comm, CallContext& context, const CollectiveCall& call,
                            std::span<const uint64_t> words, int64_t bytes) {
    trace::Timeline& timeline = comm.control().timeline();
    std::byte* bucket = comm.fusion_buffer(static_cast<size_t>(bytes)).data();
    std::byte* end = bucket;
    {
        trace::Span span(timeline, "pack", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = bytes;
        for (const ddp_tensor& tensor : call.tensors) end = pack_one(tensor, end);
    }
    const ddp_dtype dtype = dtype_of(call.tensors[0]);
    const CarriedAllreduce carried{bucket, bytes / static_cast<int64_t>(element_size(dtype)), dtype,
                                   backend_op(call.op)};
    agree(comm.backend(), comm.control(), context, words, &carried);
    trace::Span span(timeline, call.op == DDP_OP_AVG ? "unpack + divide" : "unpack", trace::Row::work, context.sequence);
    if (span.on()) span.event().bytes = bytes;
    const std::byte* next = bucket;
    for (const ddp_tensor& tensor : call.tensors) next = unpack_one(tensor, next, avg_divisor(comm, call.op));
}

// Which plane moves the call's bytes, as the timeline names it.
const char* plane_name(Communicator& comm, const CollectiveCall& call, bool carried) {
    if (carried) return "agreement's messages";
    if (!call.on_device) return comm.backend().device_plane() != nullptr ? "mpi (host buffers)" : comm.backend().name();
    return runs_on_gpu(comm, call) ? "nccl" : "staged through host memory";
}

}  // namespace

void run_collective(Communicator& comm, const CollectiveCall& call) {
    ControlPlane& control = comm.control();
    CallContext context = control.begin(call.kind, call.timeout_s);
    CallScope scope(control);
    trace::Span span(control.timeline(), kind_name(static_cast<uint64_t>(call.kind)), trace::Row::calls,
                     context.sequence);
    const std::vector<uint64_t> words = encode(CallDescription{call.kind, call.op, call.root, call.fusion_bytes,
                                                               static_cast<int64_t>(call.scalars.size()), call.tensors});
    const int64_t carried = carried_bytes(comm, call);
    if (span.on()) {
        span.event().bytes = described_bytes(words);
        span.event().plane = plane_name(comm, call, carried != 0);
        if (!call.names.empty()) span.event().names = trace::names_json(call.names);
    }
    if (carried != 0) return allreduce_in_agreement(comm, context, call, words, carried);
    agree(comm.backend(), control, context, words);
    if (comm.backend().size() == 1 && call.outputs.empty()) {  // one rank: every result is the input
        if (call.identical != nullptr) *call.identical = true;
        if (call.gpu_request) call.gpu_request->state->complete(DDP_OK, "");
        return;
    }
    // Past agreement the peers count on this rank: if it fails on its own
    // (out of memory, a backend error), they are told at once instead of
    // waiting for their timeout.
    try {
        if (call.on_device)
            run_device_data_phase(comm, context, call, words);
        else
            run_host_data_phase(comm, context, call, words);
    } catch (const Error& error) {
        if (error.status() != DDP_ERR_TIMEOUT) control.abort(std::string(error.what()));
        throw;
    } catch (const std::bad_alloc&) {
        control.abort("out of memory during " + std::string(kind_name(static_cast<uint64_t>(call.kind))));
        throw;
    }
}

void run_host_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                         std::span<const uint64_t> words) {
    if (call.kind == CollectiveKind::check_replicas) return compare_replicas(comm, context, call);
    const FusionPlan& plan = comm.plans().plan(words, call.tensors, policy_for_bucket_bytes(call.fusion_bytes));
    move_data(comm, context, call, plan);
}

void broadcast_scalars(Communicator& comm, CallContext& context, const CollectiveCall& call) {
    if (call.scalars.empty()) return;
    comm.control().wait(context,
                        comm.backend().start_broadcast(call.scalars.data(),
                                                       static_cast<int64_t>(call.scalars.size_bytes()), call.root),
                        WaitStyle::for_data);
}

void announce_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, std::string_view reason) {
    ControlPlane& control = comm.control();
    CallContext context = control.begin(kind, timeout_s);
    CallScope scope(control);
    agree_on_invalid_call(comm.backend(), control, context, reason);
}

}  // namespace ddp
