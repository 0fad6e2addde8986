#include "core/collectives/collective_rules.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

const CollectiveRules& rules_for(CollectiveKind kind) {
    switch (kind) {
    case CollectiveKind::allreduce: return allreduce_rules;
    case CollectiveKind::reduce: return reduce_rules;
    case CollectiveKind::broadcast: return broadcast_rules;
    case CollectiveKind::sync_optimizer_state: return sync_optimizer_state_rules;
    case CollectiveKind::check_replicas: return check_replicas_rules;
    case CollectiveKind::barrier: return barrier_rules;
    case CollectiveKind::allgather: return allgather_rules;
    case CollectiveKind::reduce_scatter: return reduce_scatter_rules;
    case CollectiveKind::alltoall: return alltoall_rules;
    default: break;
    }
    fail(DDP_ERR_INTERNAL, std::string(kind_name(static_cast<uint64_t>(kind))) + " has no collective rules");
}

Crossing both_ways(const CollectiveCall&, int) { return {true, true}; }

}  // namespace ddp
