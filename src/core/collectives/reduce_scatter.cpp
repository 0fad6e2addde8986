// reduce_scatter: every rank's inputs[i] reduced, and shard r of the result
// into rank r's outputs[i] (the gradient half of ZeRO and FSDP). A lone
// tensor goes straight from its input into its output; the members of a
// fused step are laid out rank block by rank block in one bucket.
#include <cstring>

#include "core/collectives/collective_rules.hpp"
#include "core/data_steps.hpp"
#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

// Lays the members' inputs out rank block by rank block: block r holds
// shard r of every member, in member order.
void pack_by_rank(const FusionPlan& plan, const PlanStep& step, const CollectiveCall& call, int ranks,
                  std::byte* bucket) {
    for (int rank = 0; rank < ranks; ++rank)
        for (int64_t index : plan.members_of(step)) {
            const size_t shard = byte_size(call.outputs[static_cast<size_t>(index)]);
            std::memcpy(bucket, static_cast<const std::byte*>(call.tensors[static_cast<size_t>(index)].data) + rank * shard,
                        shard);
            bucket += shard;
        }
}

// Copies this rank's reduced block into the members' outputs.
void unpack_shards(const FusionPlan& plan, const PlanStep& step, const CollectiveCall& call, const std::byte* block,
                   double divisor) {
    for (int64_t index : plan.members_of(step)) {
        const ddp_tensor& output = call.outputs[static_cast<size_t>(index)];
        if (divisor != 1.0)
            divide_copy(output.data, block, output.count, dtype_of(output), divisor);
        else
            std::memcpy(output.data, block, byte_size(output));
        block += byte_size(output);
    }
}

void reduce_scatter_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call,
                            const FusionPlan& plan) {
    trace::Timeline& timeline = comm.control().timeline();
    const double divisor = avg_divisor(comm, call.op);
    const auto ranks = static_cast<size_t>(comm.size());
    for (size_t index = 0; index < plan.steps.size(); ++index) {
        const PlanStep& step = plan.steps[index];
        const int64_t shard_elements = step.elements / comm.size();
        const int64_t started_ns = timeline.on() ? trace::now_ns() : 0;
        HostPlane& plane =
            comm.planes().host_for(DataOp::reduce_scatter, step.dtype, backend_op(call.op), step_bytes(step));
        if (!step.fused) {
            const auto member = static_cast<size_t>(plan.members_of(step)[0]);
            const ddp_tensor& output = call.outputs[member];
            comm.control().wait(context,
                                plane.start_reduce_scatter(call.tensors[member].data, output.data, shard_elements,
                                                             step.dtype, backend_op(call.op)),
                                WaitStyle::for_data);
            record_transfer(comm, context, plan, index, call, started_ns, plane.name());
            if (divisor != 1.0) {
                trace::Span span(timeline, "divide", trace::Row::work, context.sequence);
                describe_step(span, plan, step, index, call);
                divide_copy(output.data, output.data, output.count, step.dtype, divisor);
            }
            continue;
        }
        const auto bytes = static_cast<size_t>(step_bytes(step));
        std::byte* bucket = comm.fusion_buffer(bytes + bytes / ranks).data();
        std::byte* own_block = bucket + bytes;
        {
            trace::Span span(timeline, "pack", trace::Row::work, context.sequence);
            describe_step(span, plan, step, index, call);
            pack_by_rank(plan, step, call, comm.size(), bucket);
        }
        comm.control().wait(context,
                            plane.start_reduce_scatter(bucket, own_block, shard_elements, step.dtype,
                                                         backend_op(call.op)),
                            WaitStyle::for_data);
        record_transfer(comm, context, plan, index, call, started_ns, plane.name());
        trace::Span span(timeline, divisor != 1.0 ? "unpack + divide" : "unpack", trace::Row::work, context.sequence);
        describe_step(span, plan, step, index, call);
        unpack_shards(plan, step, call, own_block, divisor);
    }
}

void reduce_scatter_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                              void* stream) {
    plane.reduce_scatter(call.tensors, call.outputs, call.op, stream, context.deadline);
}

}  // namespace

const CollectiveRules reduce_scatter_rules{
    .host = reduce_scatter_on_host,
    .device_op = DataOp::reduce_scatter,
    .device = reduce_scatter_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
