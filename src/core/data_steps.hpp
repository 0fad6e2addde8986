// What every collective's data phase shares: a plan step's bytes, its
// timeline events, and AVG done as SUM followed by a division.
#pragma once

#include <cstdint>

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"
#include "trace/timeline.hpp"

namespace ddp {

int64_t step_bytes(const PlanStep& step);

/// Fills a timeline event with a plan step's details (only when recording).
void describe_step(trace::Span& span, const FusionPlan& plan, const PlanStep& step, size_t index,
                   const CollectiveCall& call);

/// Records step `index`'s transfer on `plane`, started at `started_ns`, on
/// the timeline (only when recording).
void record_transfer(Communicator& comm, const CallContext& context, const FusionPlan& plan, size_t index,
                     const CollectiveCall& call, int64_t started_ns, const char* plane);

/// The op a plane runs for `op`: SUM for AVG (divided afterwards).
inline ddp_op backend_op(ddp_op op) { return op == DDP_OP_AVG ? DDP_OP_SUM : op; }

/// What AVG divides the sum by: the communicator's size (1 for other ops).
double avg_divisor(Communicator& comm, ddp_op op);

}  // namespace ddp
