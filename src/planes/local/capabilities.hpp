// What the in-process plane implements: every data operation, every dtype
// and reduction, at every size, since its ranks read each other's memory
// directly.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability local_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter,
             DataOp::exchange}},
};

}  // namespace ddp
