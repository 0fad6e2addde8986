// What the self plane implements: every data operation, since with one rank
// each result is the input itself.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability self_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter,
             DataOp::exchange}},
};

}  // namespace ddp
