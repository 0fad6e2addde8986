#include "core/collectives/collective_rules.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

// Each defined in this folder's file of the same name; a new collective is
// its file, one line here and one row below.
extern const CollectiveRules allreduce_rules;
extern const CollectiveRules reduce_rules;
extern const CollectiveRules broadcast_rules;
extern const CollectiveRules sync_optimizer_state_rules;
extern const CollectiveRules check_replicas_rules;
extern const CollectiveRules barrier_rules;
extern const CollectiveRules allgather_rules;
extern const CollectiveRules reduce_scatter_rules;
extern const CollectiveRules alltoall_rules;

namespace {

struct KindRules {
    CollectiveKind kind;
    const CollectiveRules& rules;
};
const KindRules every_rules[] = {
    {CollectiveKind::allreduce, allreduce_rules},
    {CollectiveKind::reduce, reduce_rules},
    {CollectiveKind::broadcast, broadcast_rules},
    {CollectiveKind::sync_optimizer_state, sync_optimizer_state_rules},
    {CollectiveKind::check_replicas, check_replicas_rules},
    {CollectiveKind::barrier, barrier_rules},
    {CollectiveKind::allgather, allgather_rules},
    {CollectiveKind::reduce_scatter, reduce_scatter_rules},
    {CollectiveKind::alltoall, alltoall_rules},
};

}  // namespace

const CollectiveRules& rules_for(CollectiveKind kind) {
    for (const KindRules& row : every_rules)
        if (row.kind == kind) return row.rules;
    fail(DDP_ERR_INTERNAL, std::string(kind_name(static_cast<uint64_t>(kind))) + " has no collective rules");
}

Crossing both_ways(const CollectiveCall&, int) { return {true, true}; }

}  // namespace ddp
