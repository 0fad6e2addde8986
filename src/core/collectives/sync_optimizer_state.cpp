// sync_optimizer_state: root's optimizer state (leaves, then host scalars
// such as step counts) to every rank.
#include "core/collectives/broadcast.hpp"

namespace ddp {

namespace {

void sync_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    broadcast_on_host(comm, context, call, plan);
    broadcast_scalars(comm, context, call);
}

void sync_on_device(Communicator& comm, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                    void* stream) {
    broadcast_on_device(comm, context, call, plane, stream);
    broadcast_scalars(comm, context, call);
}

}  // namespace

extern const CollectiveRules sync_optimizer_state_rules{
    .takes = {.list_name = "leaves", .root = true, .scalars = true},
    .host = sync_on_host,
    .device_op = DataOp::broadcast,
    .device = sync_on_device,
    .crossing = from_root,
};

}  // namespace ddp
