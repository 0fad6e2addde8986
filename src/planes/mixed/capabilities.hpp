// What the plane of a group across processes x threads implements: every
// data operation, every dtype and reduction, at every size.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability mixed_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter,
             DataOp::exchange}},
};

}  // namespace ddp
