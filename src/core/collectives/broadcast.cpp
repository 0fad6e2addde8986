// broadcast: root's tensors to every rank, in place.
#include "core/collectives/broadcast.hpp"

#include "core/plan_runner.hpp"
#include "util/dtype.hpp"

namespace ddp {

void broadcast_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    const int root = call.root;
    const bool is_root = comm.rank() == root;
    run_plan(comm, context, plan, call, PlanRun{DataOp::broadcast, DDP_OP_SUM, is_root, !is_root, 1.0},
             [root](HostPlane& plane, void* data, int64_t count, ddp_dtype dtype) {
                 return plane.start_broadcast(data, count * static_cast<int64_t>(element_size(dtype)), root);
             });
}

void broadcast_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream) {
    plane.broadcast(call.tensors, call.root, stream, context.deadline);
}

Crossing from_root(const CollectiveCall& call, int rank) { return {rank == call.root, rank != call.root}; }

const CollectiveRules broadcast_rules{
    .host = broadcast_on_host,
    .device_op = DataOp::broadcast,
    .device = broadcast_on_device,
    .crossing = from_root,
};

}  // namespace ddp
