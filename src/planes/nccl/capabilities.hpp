// What the nccl plane implements, on device memory: every data operation
// (exchange as a group of ncclSend and ncclRecv),
// except float MIN and MAX (NCCL's do not promise to propagate NaN, so those
// are staged through the host planes instead). AVG is SUM, then a division
// on the GPU.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability nccl_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::reduce_scatter},
     .reductions = {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_PROD},
     .memory = Memory::device},
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::reduce_scatter},
     .dtypes = integer_dtypes,
     .reductions = {DDP_OP_MIN, DDP_OP_MAX},
     .memory = Memory::device},
    {.ops = {DataOp::broadcast, DataOp::allgather, DataOp::exchange}, .memory = Memory::device},
};

}  // namespace ddp
