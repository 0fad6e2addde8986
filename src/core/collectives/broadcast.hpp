// broadcast's data phase, shared with sync_optimizer_state (its leaves).
#pragma once

#include "core/collectives/collective_rules.hpp"

namespace ddp {

/// Root's tensors to every rank, fused as the plan says.
void broadcast_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan);

void broadcast_on_device(Communicator& comm, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream);

/// Root's bytes go up, every other rank's come down.
Crossing from_root(const CollectiveCall& call, int rank);

}  // namespace ddp
