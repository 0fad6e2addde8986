// What the mpi plane implements: every data operation on every dtype (user
// operations cover what MPI lacks: f16, bf16 and NaN-propagating MIN and MAX).
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability mpi_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter,
             DataOp::exchange}},
};

}  // namespace ddp
