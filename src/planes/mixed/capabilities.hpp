// What the plane of a group across processes x threads implements: every
// data operation but alltoall (whose blocks would have to be regrouped by
// process on the way and back; not built), every dtype and reduction, at
// every size.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability mixed_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter}},
};

}  // namespace ddp
