// allgather's data phase: every rank's inputs[i], in rank order, into
// every rank's outputs[i] (the parameter half of ZeRO and FSDP).
#pragma once

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"

namespace ddp {

/// Runs the plan's steps over the host backend: a lone tensor straight
/// from its input into its output, the members of a fused step packed
/// into this rank's block of one gathered bucket and unpacked from it.
void allgather_planned(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call);

}  // namespace ddp
