// allgather: every rank's inputs[i], in rank order, into every rank's
// outputs[i] (the parameter half of ZeRO and FSDP). A lone tensor goes
// straight from its input into its output; the members of a fused step are
// packed into this rank's block of one gathered bucket and unpacked from it.
#include <cstring>

#include "core/collectives/collective_rules.hpp"
#include "core/data_steps.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

// Copies each member's input into this rank's block of the bucket: the
// gather then runs in place and every rank's block arrives beside it.
void pack_own_block(const FusionPlan& plan, const PlanStep& step, const CollectiveCall& call, std::byte* block) {
    for (int64_t index : plan.members_of(step)) {
        const ddp_tensor& input = call.tensors[static_cast<size_t>(index)];
        std::memcpy(block, input.data, byte_size(input));
        block += byte_size(input);
    }
}

// Copies every rank's block of the bucket into the members' outputs, each
// at that rank's place.
void unpack_blocks(const FusionPlan& plan, const PlanStep& step, const CollectiveCall& call, int ranks,
                   const std::byte* bucket) {
    for (int rank = 0; rank < ranks; ++rank)
        for (int64_t index : plan.members_of(step)) {
            const size_t bytes = byte_size(call.tensors[static_cast<size_t>(index)]);
            std::memcpy(static_cast<std::byte*>(call.outputs[static_cast<size_t>(index)].data) + rank * bytes, bucket,
                        bytes);
            bucket += bytes;
        }
}

void allgather_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    trace::Timeline& timeline = comm.control().timeline();
    for (size_t index = 0; index < plan.steps.size(); ++index) {
        const PlanStep& step = plan.steps[index];
        const int64_t started_ns = timeline.on() ? trace::now_ns() : 0;
        HostPlane& plane = comm.planes().host_for(DataOp::allgather, step.dtype, DDP_OP_SUM, step_bytes(step));
        if (!step.fused) {
            const auto member = static_cast<size_t>(plan.members_of(step)[0]);
            comm.control().wait(context,
                                plane.start_allgather(call.tensors[member].data, call.outputs[member].data,
                                                        step.elements, step.dtype),
                                WaitStyle::for_data);
            record_transfer(comm, context, plan, index, call, started_ns, plane.name());
            continue;
        }
        const auto block_bytes = static_cast<size_t>(step_bytes(step));
        std::byte* bucket = comm.fusion_buffer(block_bytes * static_cast<size_t>(comm.size())).data();
        std::byte* own_block = bucket + block_bytes * static_cast<size_t>(comm.rank());
        {
            trace::Span span(timeline, "pack", trace::Row::work, context.sequence);
            describe_step(span, plan, step, index, call);
            pack_own_block(plan, step, call, own_block);
        }
        comm.control().wait(context, plane.start_allgather(own_block, bucket, step.elements, step.dtype),
                            WaitStyle::for_data);
        record_transfer(comm, context, plan, index, call, started_ns, plane.name());
        trace::Span span(timeline, "unpack", trace::Row::work, context.sequence);
        describe_step(span, plan, step, index, call);
        unpack_blocks(plan, step, call, comm.size(), bucket);
    }
}

void allgather_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream) {
    plane.allgather(call.tensors, call.outputs, stream, context.deadline);
}

}  // namespace

const CollectiveRules allgather_rules{
    .host = allgather_on_host,
    .device_op = DataOp::allgather,
    .device = allgather_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
