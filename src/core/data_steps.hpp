// What every collective's data phase shares: a plan step's bytes, starting a
// step's allreduce, and AVG done as SUM followed by a division.
#pragma once

#include <cstdint>
#include <memory>

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

int64_t step_bytes(const PlanStep& step);

/// The reduction a host plane runs for `op`: SUM for AVG (divided afterwards).
inline ddp_op plane_op(ddp_op op) { return op == DDP_OP_AVG ? DDP_OP_SUM : op; }

/// What AVG divides the sum by: the communicator's size (1 for other ops).
double avg_divisor(Communicator& comm, ddp_op op);

/// The plane that allreduces `count` elements of `dtype` with `op`: the
/// first in the priority list that does.
HostPlane& allreduce_plane(Communicator& comm, int64_t count, ddp_dtype dtype, ddp_op op);

/// Starts allreducing the `count` elements at `data` in place with `op`
/// (AVG runs as SUM: divide by avg_divisor once it ends). When given,
/// `memory` owns the memory `data` lies in and the operation holds it: it
/// then outlives the operation even when a failure leaves that unfinished
/// with the plane, which may still write into it. `plane_name`, when
/// given, is set to the plane that runs it (allreduce_plane).
std::unique_ptr<Pending> start_allreduce_step(Communicator& comm, void* data, int64_t count, ddp_dtype dtype,
                                              ddp_op op, std::shared_ptr<void> memory = nullptr,
                                              const char** plane_name = nullptr);

}  // namespace ddp
