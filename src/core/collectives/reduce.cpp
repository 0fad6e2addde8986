// reduce: every rank's tensors reduced into root's, in place; the other
// ranks' tensors are left as they were.
#include "core/collectives/collective_rules.hpp"
#include "core/data_steps.hpp"
#include "core/collectives/in_place_steps.hpp"

namespace ddp {

namespace {

void reduce_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    const ddp_op op = plane_op(call.op);
    const int root = call.root;
    const InPlaceSteps steps(plan, call.tensors,
                             {.op = DataOp::reduce,
                              .reduction = op,
                              .unpack_after = comm.rank() == root,
                              .divisor = avg_divisor(comm, call.op),
                              .start = [op, root](HostPlane& plane, void* data, int64_t count, ddp_dtype dtype) {
                                  return plane.start_reduce(data, count, dtype, op, root);
                              }});
    run_plan(comm, context, plan, call, steps);
}

void reduce_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                      void* stream) {
    plane.reduce(call.tensors, call.op, call.root, stream, context.deadline);
}

Crossing to_root(const CollectiveCall& call, int rank) { return {true, rank == call.root}; }

}  // namespace

extern const CollectiveRules reduce_rules{
    .takes = {.op = true, .root = true},
    .host = reduce_on_host,
    .device_op = DataOp::reduce,
    .device = reduce_on_device,
    .crossing = to_root,
};

}  // namespace ddp
