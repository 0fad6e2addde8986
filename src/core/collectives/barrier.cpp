// barrier: agreement needs every rank, so agreement is the barrier; there
// is no data phase.
#include "core/collectives/collective_rules.hpp"

namespace ddp {

namespace {

void nothing_to_move(Communicator&, CallContext&, const CollectiveCall&, const FusionPlan&) {}

}  // namespace

extern const CollectiveRules barrier_rules{
    .takes = {},  // nothing: its entry point passes no list (an empty one)
    .host = nothing_to_move,
    .planned = false,
};

}  // namespace ddp
