// broadcast: root's tensors to every rank, in place.
#include "core/collectives/broadcast.hpp"

#include "core/collectives/in_place_steps.hpp"
#include "util/dtype.hpp"

namespace ddp {

void broadcast_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    const int root = call.root;
    const bool is_root = comm.rank() == root;
    const InPlaceSteps steps(plan, call.tensors,
                             {.op = DataOp::broadcast,
                              .pack_before = is_root,
                              .unpack_after = !is_root,
                              .start = [root](HostPlane& plane, void* data, int64_t count, ddp_dtype dtype) {
                                  return plane.start_broadcast(
                                      data, count * static_cast<int64_t>(element_size(dtype)), root);
                              }});
    run_plan(comm, context, plan, call, steps);
}

void broadcast_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream) {
    plane.broadcast(call.tensors, call.root, stream, context.deadline);
}

Crossing from_root(const CollectiveCall& call, int rank) { return {rank == call.root, rank != call.root}; }

extern const CollectiveRules broadcast_rules{
    .takes = {.root = true},
    .host = broadcast_on_host,
    .device_op = DataOp::broadcast,
    .device = broadcast_on_device,
    .crossing = from_root,
};

}  // namespace ddp
