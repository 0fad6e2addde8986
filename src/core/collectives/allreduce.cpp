// allreduce: every rank's tensors reduced, the result on every rank, in place.
#include "core/collectives/collective_rules.hpp"
#include "core/data_steps.hpp"
#include "core/collectives/in_place_steps.hpp"
#include "control/agreement.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

void allreduce_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    const ddp_op op = plane_op(call.op);
    const InPlaceSteps steps(
        plan, call.tensors,
        {.op = DataOp::allreduce,
         .reduction = op,
         .divisor = avg_divisor(comm, call.op),
         .start = [op](HostPlane& plane, void* data, int64_t count,
                       ddp_dtype dtype) { return plane.start_allreduce(data, count, dtype, op); },
         .start_pieces = [op](HostPlane& plane, std::span<const Piece> pieces, int64_t count, ddp_dtype dtype) {
             return plane.start_allreduce_pieces(pieces, count, dtype, op);
         }});
    run_plan(comm, context, plan, call, steps);
}

void allreduce_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream) {
    plane.allreduce(call.tensors, call.op, stream, context.deadline);
}

// The bytes of a host allreduce small enough to travel inside agreement's
// messages (one dtype, 1 byte to the route's carried_capacity(), more than one rank),
// or 0 when it takes the plan. Ranks that decide differently passed
// different lists, which agreement reports.
int64_t carried_bytes(Communicator& comm, const CollectiveCall& call) {
    if (call.on_device || comm.size() == 1 || call.tensors.empty()) return 0;
    const int64_t capacity = comm.agreement().route().carried_capacity();
    int64_t bytes = 0;
    for (const ddp_tensor& tensor : call.tensors) {
        if (tensor.dtype != call.tensors[0].dtype) return 0;
        bytes += byte_size(tensor);
        if (bytes > capacity) return 0;  // a long list stops here, not at its end
    }
    return bytes;
}

// A small allreduce: packed, reduced inside agreement (one round of
// messages instead of two), unpacked only once every rank agreed.
void allreduce_in_agreement(Communicator& comm, CallContext& context, const CollectiveCall& call,
                            std::span<const uint64_t> words, int64_t bytes) {
    trace::Timeline& timeline = comm.trace().timeline;
    std::byte* bucket = comm.memory().fusion_buffer(static_cast<size_t>(bytes)).data();
    std::byte* end = bucket;
    {
        trace::Span span(timeline, "pack", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = bytes;
        for (const ddp_tensor& tensor : call.tensors) end = pack_one(tensor, end);
    }
    const ddp_dtype dtype = dtype_of(call.tensors[0]);
    const CarriedAllreduce carried{bucket, bytes / static_cast<int64_t>(element_size(dtype)), dtype,
                                   plane_op(call.op)};
    comm.agreement().agree(context, words, &carried, nullptr, call.names);
    trace::Span span(timeline, call.op == DDP_OP_AVG ? "unpack + divide" : "unpack", trace::Row::work, context.sequence);
    if (span.on()) span.event().bytes = bytes;
    const std::byte* next = bucket;
    for (const ddp_tensor& tensor : call.tensors) next = unpack_one(tensor, next, avg_divisor(comm, call.op));
}

}  // namespace

extern const CollectiveRules allreduce_rules{
    .takes = {.op = true},
    .host = allreduce_on_host,
    .device_op = DataOp::allreduce,
    .device = allreduce_on_device,
    .crossing = both_ways,
    .carried_bytes = carried_bytes,
    .in_agreement = allreduce_in_agreement,
};

}  // namespace ddp
