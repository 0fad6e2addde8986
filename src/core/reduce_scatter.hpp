// reduce_scatter's data phase: the reduction of every rank's inputs[i],
// of which each rank keeps its equal shard in outputs[i] (the gradient
// half of ZeRO and FSDP).
#pragma once

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"

namespace ddp {

/// Runs the plan's steps over the host backend: a lone tensor straight
/// from its input into its output, the members of a fused step packed
/// rank block by rank block (each block holding every member's shard for
/// that rank) and this rank's reduced block unpacked into the outputs.
/// AVG is SUM, then a division.
void reduce_scatter_planned(Communicator& comm, CallContext& context, const FusionPlan& plan,
                            const CollectiveCall& call);

}  // namespace ddp
