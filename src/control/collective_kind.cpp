#include "control/collective_kind.hpp"

namespace ddp {

const char* kind_name(uint64_t kind) {
    switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::allreduce: return "allreduce";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::sync_optimizer_state: return "sync_optimizer_state";
    case CollectiveKind::check_replicas: return "check_replicas";
    case CollectiveKind::barrier: return "barrier";
    case CollectiveKind::reducer_create: return "reducer_create";
    case CollectiveKind::reducer_step: return "reducer step";
    case CollectiveKind::timeline_start: return "timeline_start";
    case CollectiveKind::allgather: return "allgather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::comm_split: return "comm_split";
    case CollectiveKind::comm_split_node: return "comm_split_node";
    }
    return "an unknown collective";
}

std::string call_name(uint64_t kind, CallLabel label) {
    if (!label.for_binding) return std::string(kind_name(kind)) + " #" + std::to_string(label.number);
    return std::string("the binding's own ") + kind_name(kind) +
           (label.number == 0 ? std::string(" before call #1") : " after call #" + std::to_string(label.number));
}

}  // namespace ddp
