// The bucket layout of the collectives whose tensors are `size` equal blocks,
// one per rank (reduce_scatter's inputs, allgather's outputs, both of
// alltoall's lists): bucket block r holds block r of every member of a fused
// step, in member order.
#pragma once

#include <cstddef>
#include <span>

#include "core/fusion_plan.hpp"
#include "ddp/ddp.h"

namespace ddp {

/// Copies block r of each member's tensor in `tensors` into bucket block r.
void pack_rank_blocks(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors, int ranks,
                      std::byte* bucket);

/// Copies bucket block r into block r of each member's tensor in `tensors`.
void unpack_rank_blocks(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors, int ranks,
                        const std::byte* bucket);

}  // namespace ddp
