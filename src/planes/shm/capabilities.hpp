// What the shm plane implements: every data operation but exchange, on
// every dtype, from 4 KiB up. Measured (bench/allreduce_bench sizes, 2
// ranks): at 4 KiB, the smallest size timed, this plane already beat the mpi
// plane's point-to-point path (median 0.74-1.47x a bare MPI_Allreduce
// against 0.22-0.78x); below it (2-4 KiB: smaller allreduces travel inside
// agreement's messages) the mpi plane keeps the step. Exchanges (alltoall)
// go to the mpi plane's sends and receives.
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability shm_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter},
     .min_bytes = 4 * 1024},
};

}  // namespace ddp
